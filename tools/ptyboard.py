#!/usr/bin/env python3
"""A pretend board: the MicroPython unix port behind a serial-like device.

    python tools/ptyboard.py --root DIR --link PATH [--heapsize 256k]

PATH becomes a symlink to a pseudo-terminal that behaves like a board's
UART bridge: mpremote, tools/monitor.py and tools/deploy.py open it as a
serial port, with no options of their own (`mpremote connect PATH ...`).
DIR is the board's filesystem (the unix port's cwd; lib/ is on its import
path, like a device's /lib). The serial side stays open across boots, as an
ESP32's USB-UART bridge does.

What a board does, and how the unix port is made to do it:

- Boot: a board runs main.py, then the REPL. Each boot runs
  `micropython -i main.py` when DIR/main.py exists, else `micropython`.
- Soft reset (Ctrl-D at the REPL, `sys.exit()`): the unix port exits; the
  board boots again and prints "MPY: soft reboot". Reset from the raw REPL
  (how mpremote starts a session) comes back in the raw REPL without running
  main.py, as a board's does.
- Ctrl-C while a program runs raises KeyboardInterrupt in it and ends at the
  REPL. The unix port reads Ctrl-C as a character only at its REPL (its
  terminal is then in raw mode); while code runs the terminal is in canonical
  mode and it takes SIGINT instead. So this process watches the board's
  terminal mode: while code runs, a Ctrl-C from the port becomes SIGINT, and
  the other bytes wait, as in a UART's buffer, until the REPL reads again
  (a program on this board does not read the serial port's bytes itself).

Two ptys, as socat would make: the board's (micropython's stdio, with output
newline translation off, `stty -onlcr`, so the raw REPL's bytes pass
unchanged) and the port's (PATH); this process copies bytes between them.
"""
import argparse
import os
import select
import signal
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

CTRL_A, CTRL_B, CTRL_C = b"\x01", b"\x02", b"\x03"
SOFT_REBOOT = b"MPY: soft reboot\r\n"
SIGINT_GRACE = 0.5  # s: one SIGINT per Ctrl-C; the next waits until the REPL is back or this passes


def micropython_binary():
    p = Path(sys.executable).parent / "micropython"
    return str(p) if p.exists() else "micropython"


class PtyBoard:
    def __init__(self, root, link, heapsize="256k", micropython=None, log=None):
        self.root = Path(root).resolve()
        self.link = Path(link)
        self.heapsize = heapsize
        self.micropython = micropython or micropython_binary()
        self.log = log or (lambda m: None)
        self.boots = 0
        self.proc = None
        self.pending = bytearray()  # port -> board bytes the board has not read yet
        self.raw_repl = False       # the REPL last asked for: raw (Ctrl-A) or friendly (Ctrl-B)
        self.sigint_at = None       # when the last Ctrl-C was sent as SIGINT
        # the serial side: PATH -> its slave; we hold the master
        self.port_master, port_slave = os.openpty()
        tty.setraw(port_slave)
        self.port_name = os.ttyname(port_slave)
        self._port_slave = port_slave  # kept open: the port never "disappears"
        tmp = self.link.with_name(self.link.name + ".new")
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(self.port_name, tmp)
        os.replace(tmp, self.link)

    def boot(self, main=True):
        """Start micropython: main.py then the REPL, or (main=False) the REPL alone."""
        master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # stty -onlcr
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        cmd = [self.micropython, "-X", "heapsize=" + self.heapsize]
        if main and (self.root / "main.py").is_file():
            cmd += ["-i", "main.py"]
        env = dict(os.environ, MICROPYPATH=":.frozen:%s/lib" % self.root)
        self.proc = subprocess.Popen(cmd, cwd=self.root, stdin=slave, stdout=slave,
                                     stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.board_master = master
        self.sigint_at = None
        self.boots += 1
        self.log("ptyboard: boot %d: %s%s" % (self.boots, " ".join(cmd[3:]) or "REPL",
                                             " (raw REPL)" if self.raw_repl else ""))

    def reboot(self):
        """micropython exited: boot again as a board would after that reset."""
        code = self.proc.wait()
        os.close(self.board_master)
        interrupted = code == -signal.SIGINT  # Ctrl-C before its handler was in place
        os.write(self.port_master, SOFT_REBOOT)
        self.boot(main=not (self.raw_repl or interrupted))
        if self.raw_repl:
            self.pending[:0] = CTRL_A  # back into the raw REPL once it reads

    def at_repl(self):
        """The unix port puts its terminal in raw mode only while its REPL reads."""
        return not termios.tcgetattr(self.board_master)[3] & termios.ICANON

    def deliver(self):
        """Hand pending bytes to the board: all of them at the REPL; while
        code runs, a Ctrl-C becomes SIGINT (KeyboardInterrupt) and the rest waits."""
        if not self.pending:
            return
        if self.at_repl():
            data = bytes(self.pending)
            del self.pending[:]
            last = max(data.rfind(CTRL_A), data.rfind(CTRL_B))
            if last >= 0:
                self.raw_repl = data[last:last + 1] == CTRL_A
            os.write(self.board_master, data)
            self.sigint_at = None
            return
        i = self.pending.find(CTRL_C)
        if i < 0:
            return
        if self.sigint_at is not None and time.monotonic() - self.sigint_at < SIGINT_GRACE:
            return  # the last one is still being handled
        del self.pending[i]
        self.proc.send_signal(signal.SIGINT)
        self.sigint_at = time.monotonic()
        self.log("ptyboard: Ctrl-C while code runs: KeyboardInterrupt")

    def serve(self):
        """Copy bytes both ways; reboot when micropython exits. Until killed."""
        self.boot()
        while True:
            wait = 0.01 if self.pending else 0.5  # the terminal mode changes without a wake-up
            r, _, _ = select.select([self.board_master, self.port_master], [], [], wait)
            if self.board_master in r:
                try:
                    data = os.read(self.board_master, 4096)
                except OSError:  # EIO: micropython exited and closed its tty
                    data = b""
                if not data:
                    self.reboot()
                    continue
                os.write(self.port_master, data)
            if self.port_master in r:
                try:
                    self.pending += os.read(self.port_master, 4096)
                except OSError:
                    pass
            self.deliver()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="the board's filesystem")
    ap.add_argument("--link", required=True, help="symlink to create for the serial port")
    ap.add_argument("--heapsize", default="256k")
    a = ap.parse_args(argv)
    Path(a.root).mkdir(parents=True, exist_ok=True)
    board = PtyBoard(a.root, a.link, a.heapsize, log=lambda m: print(m, flush=True))
    print("ptyboard: serial port %s -> %s" % (a.link, board.port_name), flush=True)

    def bye(*_):
        board.stop()
        sys.exit(0)

    signal.signal(signal.SIGTERM, bye)
    try:
        board.serve()
    finally:
        board.stop()


if __name__ == "__main__":
    main()
