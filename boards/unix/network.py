# A stand-in for MicroPython's `network` module on the unix port, where the
# host's network is always up: WLAN(STA_IF) "joins" any SSID after a short
# delay. SSIDs starting with "unreachable" never join (to exercise timeouts and
# retries). Only the calls firmware/app/wifi.py makes.
from time import ticks_ms, ticks_diff

STA_IF = 0
AP_IF = 1
STAT_IDLE = 0
STAT_CONNECTING = 1
STAT_GOT_IP = 3
STAT_NO_AP_FOUND = 201
JOIN_MS = 50  # how long "joining" takes

_hostname = "micropython"


def hostname(name=None):
    global _hostname
    if name is None:
        return _hostname
    _hostname = name


class WLAN:
    def __init__(self, interface=STA_IF):
        self.interface = interface
        self._active = False
        self._ssid = None
        self._since = 0
        self.attempts = 0

    def active(self, on=None):
        if on is None:
            return self._active
        self._active = bool(on)

    def connect(self, ssid, key=None):
        if not self._active:
            raise OSError("WLAN not active")
        self._ssid = ssid
        self._since = ticks_ms()
        self.attempts += 1

    def disconnect(self):
        self._ssid = None

    def status(self, param=None):
        if self._ssid is None:
            return STAT_IDLE
        if self._ssid.startswith("unreachable"):
            return STAT_NO_AP_FOUND
        return STAT_GOT_IP if self.isconnected() else STAT_CONNECTING

    def isconnected(self):
        return (self._ssid is not None and not self._ssid.startswith("unreachable")
                and ticks_diff(ticks_ms(), self._since) >= JOIN_MS)

    def ifconfig(self, *a):
        return ("127.0.0.1", "255.0.0.0", "127.0.0.1", "127.0.0.1")
