#!/usr/bin/env python3
"""A pretend board: the MicroPython unix port behind a serial-like device.

    python tools/ptyboard.py --root DIR --link PATH [--heapsize 256k]

PATH becomes a symlink to a pseudo-terminal that behaves like a board's
UART bridge: mpremote, tools/monitor.py and tools/deploy.py open it as a
serial port. DIR is the board's filesystem (the unix port's cwd; lib/ is on
its import path, like a device's /lib). Each "boot" runs `micropython`, or
`micropython -i main.py` when DIR/main.py exists (a board runs main.py at
boot, then the REPL); when the process exits (Ctrl-D at the REPL, which is a
soft reset on a board, or a crash), it boots again. The serial side stays
open across boots, as an ESP32's USB-UART bridge does.

Two ptys, as socat would make: the board's (micropython's stdio, with output
newline translation off, `stty -onlcr`, so the raw REPL's bytes pass
unchanged) and the port's (PATH); this process copies bytes between them.
mpremote needs `connect PATH resume`: the unix port has no soft reset.
"""
import argparse
import os
import select
import signal
import subprocess
import sys
import termios
import tty
from pathlib import Path


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

    def boot(self):
        master, slave = os.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # stty -onlcr
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        cmd = [self.micropython, "-X", "heapsize=" + self.heapsize]
        if (self.root / "main.py").is_file():
            cmd += ["-i", "main.py"]
        env = dict(os.environ, MICROPYPATH=":.frozen:%s/lib" % self.root)
        self.proc = subprocess.Popen(cmd, cwd=self.root, stdin=slave, stdout=slave,
                                     stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.board_master = master
        self.boots += 1
        self.log("ptyboard: boot %d: %s" % (self.boots, " ".join(cmd[3:]) or "REPL"))

    def serve(self):
        """Copy bytes both ways; reboot when micropython exits. Until killed."""
        self.boot()
        while True:
            r, _, _ = select.select([self.board_master, self.port_master], [], [], 0.5)
            if self.board_master in r:
                try:
                    data = os.read(self.board_master, 4096)
                except OSError:  # EIO: micropython exited and closed its tty
                    data = b""
                if not data:
                    self.proc.wait()
                    os.close(self.board_master)
                    self.boot()
                    continue
                os.write(self.port_master, data)
            if self.port_master in r:
                try:
                    data = os.read(self.port_master, 4096)
                except OSError:
                    data = b""
                if data:
                    os.write(self.board_master, data)

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
