"""tools/monitor.py against a pseudo-terminal standing in for a board's USB
serial port, including the port going away and coming back (a reset)."""
import io
import os
import queue
import re
import subprocess
import sys
import threading
import time
import tty
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import monitor  # noqa: E402

STAMP = r"\[\d\d:\d\d:\d\d\.\d{3}\] "


class FakeBoard:
    """A pty whose slave side is reachable through a fixed symlink, like a
    udev name; reset() replaces the pty, as a USB device that re-enumerates."""

    def __init__(self, link):
        self.link = Path(link)
        self.master = None
        self.open()

    def open(self):
        self.master, slave = os.openpty()
        tty.setraw(slave)
        name = os.ttyname(slave)
        os.close(slave)
        tmp = self.link.with_suffix(".new")
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()
        os.symlink(name, tmp)
        os.replace(tmp, self.link)

    def write(self, text):
        os.write(self.master, text.encode())

    def reset(self):
        os.close(self.master)  # the reader gets EIO: the device is gone
        self.master = None
        time.sleep(0.3)
        self.open()

    def close(self):
        if self.master is not None:
            os.close(self.master)


def reader(proc):
    q = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line.rstrip("\n"))
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def wait_line(q, pattern, seen, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            line = q.get(timeout=0.1)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if re.search(pattern, line):
            return line
    raise AssertionError("no line matching %r in %r" % (pattern, seen))


def test_lines_highlight_only_the_traceback():
    out = io.StringIO()
    lines = monitor.Lines(out, color=True, clock=lambda: 0.25)
    lines.feed(b"boot\r\nTraceback (most recent call last):\r\n  File \"main.py\", line 3"
               b", in <module>\r\nOSError: [Errno 113] EHOSTUNREACH\r\nnext")
    lines.flush()
    text = out.getvalue().splitlines()
    assert len(text) == 5 and lines.tracebacks == 1
    assert monitor.RED not in text[0] and text[0].endswith("boot")
    for t in text[1:4]:
        assert monitor.RED in t
    assert text[3].endswith("OSError: [Errno 113] EHOSTUNREACH" + monitor.RESET)
    assert monitor.RED not in text[4] and text[4].endswith("next")
    assert ".250]" in text[0]


def test_monitor_timestamps_and_survives_a_reset(tmp_path):
    board = FakeBoard(tmp_path / "ttyBOARD")
    proc = subprocess.Popen([sys.executable, str(REPO / "tools" / "monitor.py"),
                             str(board.link), "--exit-on", "^DONE$", "--timeout", "20",
                             "--color", "never"], stdout=subprocess.PIPE, text=True)
    q = reader(proc)
    seen = []
    try:
        time.sleep(0.5)  # let it open the port
        board.write("MicroPython v1.29 on esp32\r\n>>> ")
        board.write("partial line...")
        board.write(" ends here\r\n")
        wait_line(q, STAMP + "MicroPython v1.29 on esp32$", seen)
        wait_line(q, STAMP + ">>> partial line... ends here$", seen)
        board.reset()
        wait_line(q, r"\[monitor\] .*ttyBOARD lost", seen)
        wait_line(q, r"\[monitor\] reconnected to .*ttyBOARD", seen)
        board.write("rst:0x1 (POWERON_RESET)\r\nafter reset\r\nDONE\r\n")
        wait_line(q, STAMP + "after reset$", seen)
        assert proc.wait(10) == 0  # --exit-on matched
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        board.close()
    # bytes arriving in pieces are joined into one line
    assert any(re.fullmatch(STAMP + ">>> partial line... ends here", l) for l in seen)
    assert all(re.match(STAMP, l) for l in seen)


def test_monitor_without_reconnect_stops_when_the_port_goes(tmp_path):
    board = FakeBoard(tmp_path / "ttyBOARD")
    proc = subprocess.Popen([sys.executable, str(REPO / "tools" / "monitor.py"),
                             str(board.link), "--no-reconnect", "--timeout", "20"],
                            stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        board.write("hello\r\n")
        time.sleep(0.3)
        board.reset()
        assert proc.wait(10) == 1
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        board.close()
    assert re.search(STAMP + "hello", out) and "[monitor]" in out


def test_monitor_reports_a_missing_port_with_the_ports_there_are(tmp_path):
    import serial.tools.list_ports
    r = subprocess.run([sys.executable, str(REPO / "tools" / "monitor.py"),
                        str(tmp_path / "ttyGONE")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "no serial port %s: nothing at that path" % (tmp_path / "ttyGONE") in r.stderr
    for p in serial.tools.list_ports.comports():
        assert p.device in r.stderr
