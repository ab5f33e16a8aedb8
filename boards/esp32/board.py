# Board profile: ESP32 (ESP32-DevKitC / ESP32-WROOM-32 class, no PSRAM) on
# MicroPython's ESP32_GENERIC firmware. Read by firmware/app/telemetry.py as
# the module `board`.
import machine

NAME = "esp32"
# ESP32-DevKitC: blue LED on GPIO2 (most clones), I2C on the usual pins.
PINS = {"led": 2, "i2c_sda": 21, "i2c_scl": 22, "button": 0}
# GC heap the firmware may use. ESP32_GENERIC gives MicroPython roughly
# 100-110 KB of GC heap after boot with Wi-Fi up (gc.mem_free(); varies with
# the ESP-IDF version); mbedTLS allocates from the IDF heap, not the GC heap,
# so TLS does not come out of this. The status message reports heap_free:
# check it on your board.
HEAP_BUDGET = 64 * 1024
SENSORS = ["esp32_temp"]
# Client sizing (frugalmqtt Session keywords): 8 QoS 1 readings can wait
# offline; a config's "session" overrides.
SESSION = {"slots": 8, "slot_size": 256, "max_packet": 1024, "tx_size": 512, "inbound": 2,
           "aliases_in": 0}
# TLS: verify the broker against the config's CA; the clock must be right
# for certificate validity, so it is set by NTP first.
TLS = {"ntp": True}
_MAGIC = b"FQ"

# The battery mode's store (config "wake", frugalmqtt.wake.Store): RTC slow
# memory, 2 KB kept through deep sleep (not a power cycle), no flash wear.
# It takes the whole RTC memory: the sequence number then lives in it too.
WAKE_STORE = None


def set_clock():
    try:
        import ntptime
        ntptime.settime()
    except Exception as e:  # no NTP: certificate dates cannot be checked
        print("ntp: %r" % (e,))


# The sequence number lives in RTC slow memory, which survives deep sleep
# (not a power cycle) and costs no flash writes.
def load_seq():
    m = machine.RTC().memory()
    if len(m) == 6 and m[:2] == _MAGIC:
        return int.from_bytes(m[2:], "little")
    return 0


def save_seq(seq):
    machine.RTC().memory(_MAGIC + seq.to_bytes(4, "little"))


def deep_sleep(ms):
    machine.deepsleep(ms)  # wakes through a reset: main.py runs again


def reset():
    machine.reset()
