"""Serial ports: when the one asked for is not there, say so and name the
ones that are (tools/deploy.py, tools/monitor.py)."""
import os

import serial.tools.list_ports


def missing(port):
    """None when `port` is there (or is a pyserial URL such as rfc2217://);
    otherwise the message to show: that it is missing, and the ports there are."""
    if "://" in port or os.path.exists(port):
        return None
    found = sorted(serial.tools.list_ports.comports())
    if not found:
        return ("no serial port %s: nothing at that path, and no serial ports on this "
                "machine. Is the board plugged in, with a data (not charge-only) USB "
                "cable?" % port)
    return ("no serial port %s: nothing at that path. Serial ports on this machine "
            "(PORT=...): %s" % (port, ", ".join(
                p.device + ("" if p.description in ("", "n/a") else " (%s)" % p.description)
                for p in found)))
