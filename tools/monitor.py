#!/usr/bin/env python3
"""Serial monitor for a MicroPython board: timestamps each line, highlights
tracebacks, and reopens the port after the board resets or is unplugged.

    python tools/monitor.py /dev/ttyUSB0 [--baud 115200] [--exit-on REGEX]
                            [--timeout S] [--no-reconnect] [--color auto|always|never]

--exit-on stops (exit 0) at the first line matching REGEX; --timeout stops
after S seconds (exit 3 if --exit-on was given and never matched). Ctrl-C
stops. A board's USB serial device disappears for a moment when it resets:
the monitor waits for the path to come back (a symlink that is re-pointed
counts) and says so on a "[monitor]" line. A port that is not there when
it starts is reported with the ports that are (exit 2).
"""
import argparse
import re
import sys
import time
from pathlib import Path

import serial

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serialports  # noqa: E402

RED = "\x1b[31;1m"
DIM = "\x1b[2m"
RESET = "\x1b[0m"


class Lines:
    """Turns received bytes into timestamped, highlighted lines.

    A traceback is "Traceback (most recent call last):", its indented frame
    lines and the exception line after them; all of it is shown in red."""

    def __init__(self, out, color=False, clock=time.time):
        self.out = out
        self.color = color
        self.clock = clock
        self.partial = b""
        self.in_traceback = False
        self.tracebacks = 0

    def feed(self, data):
        """Write every complete line in data; return them (decoded)."""
        done = []
        self.partial += data
        while b"\n" in self.partial:
            raw, self.partial = self.partial.split(b"\n", 1)
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            self.emit(line)
            done.append(line)
        return done

    def flush(self):
        if self.partial:
            line = self.partial.rstrip(b"\r").decode("utf-8", "replace")
            self.partial = b""
            self.emit(line)
            return [line]
        return []

    def emit(self, line):
        if line.startswith("Traceback (most recent call last):"):
            self.in_traceback = True
            self.tracebacks += 1
        hot = self.in_traceback
        if hot and not line.startswith((" ", "Traceback")):
            self.in_traceback = False  # the exception line ends it
        self.write(line, RED if hot else "")

    def note(self, text):
        self.write("[monitor] " + text, DIM)

    def write(self, line, style):
        t = self.clock()
        stamp = "%s.%03d" % (time.strftime("%H:%M:%S", time.localtime(t)), int(t * 1000) % 1000)
        if self.color and style:
            self.out.write("%s[%s]%s %s%s%s\n" % (DIM, stamp, RESET, style, line, RESET))
        else:
            self.out.write("[%s] %s\n" % (stamp, line))
        self.out.flush()


def open_port(port, baud):
    """Opened exclusive (as mpremote opens it): a deploy or a second monitor
    started meanwhile is told the port is in use, instead of sharing its bytes."""
    return serial.serial_for_url(port, baud, timeout=0.1, exclusive=True)


def monitor(port, baud=115200, out=sys.stdout, color=False, reconnect=True, exit_on=None,
            timeout=None, conn=None):
    """Run until exit_on matches (returns 0), the timeout passes (3 if
    exit_on was given, else 0), or the port fails without reconnect (1).
    conn: an already open serial port to start with (tools/deploy.py)."""
    lines = Lines(out, color)
    pattern = re.compile(exit_on) if exit_on else None
    end = time.monotonic() + timeout if timeout else None
    s = conn
    lost = False
    try:
        while end is None or time.monotonic() < end:
            if s is None:
                try:
                    s = open_port(port, baud)
                    if lost:
                        lines.note("reconnected to %s" % port)
                    lost = False
                except (serial.SerialException, OSError):
                    time.sleep(0.1)
                    continue
            try:
                data = s.read(s.in_waiting or 1)
            except (serial.SerialException, OSError) as e:
                lines.flush()
                try:
                    s.close()
                except Exception:
                    pass
                s = None
                if not reconnect:
                    lines.note("%s: %s" % (port, e))
                    return 1
                if not lost:
                    lines.note("%s lost (%s); waiting for it to come back" % (
                        port, e.__class__.__name__))
                lost = True
                continue
            for line in lines.feed(data):
                if pattern and pattern.search(line):
                    return 0
    except KeyboardInterrupt:
        return 0
    finally:
        lines.flush()
        if s is not None and s is not conn:
            s.close()
    return 3 if pattern else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("port")
    ap.add_argument("--baud", type=int, default=115200)
    ap.add_argument("--exit-on", help="stop at the first line matching this regex")
    ap.add_argument("--timeout", type=float, help="stop after this many seconds")
    ap.add_argument("--no-reconnect", action="store_true")
    ap.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    a = ap.parse_args(argv)
    gone = serialports.missing(a.port)
    if gone:
        print("monitor: " + gone, file=sys.stderr)
        return 2
    color = a.color == "always" or (a.color == "auto" and sys.stdout.isatty())
    return monitor(a.port, a.baud, color=color, reconnect=not a.no_reconnect,
                   exit_on=a.exit_on, timeout=a.timeout)


if __name__ == "__main__":
    sys.exit(main())
