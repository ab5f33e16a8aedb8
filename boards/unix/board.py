# Board profile: the MicroPython unix port standing in for a board (tests,
# tools/heap_report.py, the pty "board" of tools/deploy.py's test). Same
# interface as boards/esp32/board.py and boards/rp2040/board.py.
import sys

NAME = "unix"
PINS = {}  # no GPIO
# The unix port's heap is whatever `micropython -X heapsize=` gives it; the
# budget is what tools/heap_report.py checks the firmware against.
HEAP_BUDGET = 64 * 1024
SENSORS = ["sim_temp"]
# Client sizing (frugalmqtt Session keywords); a config's "session" overrides.
SESSION = {"slots": 8, "slot_size": 256, "max_packet": 1024, "tx_size": 512, "inbound": 2,
           "aliases_in": 0}
# TLS: the host clock is already right, nothing to set before verifying.
TLS = {"ntp": False}
# The sequence number outlives a "deep sleep" in telemetry's default store,
# the file seq.txt.

# The battery mode's store (config "wake", frugalmqtt.wake.Store): a file
# standing in for RTC memory.
WAKE_STORE = "rtc.bin"


def set_clock():
    pass


def deep_sleep(ms):
    """A device resets when it wakes; the process ends after the sleep, and
    whoever runs it (a test, a shell loop) starts it again."""
    from time import sleep_ms
    sleep_ms(ms)
    sys.exit(0)


def reset():
    sys.exit(1)
