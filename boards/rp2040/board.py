# Board profile: Raspberry Pi Pico W (RP2040 + CYW43439 Wi-Fi) on MicroPython's
# RPI_PICO_W firmware. Read by firmware/app/telemetry.py as the module `board`.
import machine

NAME = "rp2040"
# Pico W: the LED hangs off the Wi-Fi chip ("LED"), the temperature sensor is
# ADC input 4, I2C0 on GP4/GP5.
PINS = {"led": "LED", "temp_adc": 4, "i2c_sda": 4, "i2c_scl": 5}
# GC heap the firmware may use. RPI_PICO_W gives MicroPython roughly 160-170 KB
# of GC heap after boot; on this port mbedTLS allocates from the GC heap, and
# a TLS session with verification takes tens of KB of it during the
# handshake. The status message reports heap_free: check it on your board.
HEAP_BUDGET = 64 * 1024
SENSORS = ["rp2040_temp"]
SESSION = {"slots": 8, "slot_size": 256, "max_packet": 1024, "tx_size": 512, "inbound": 2,
           "aliases_in": 0}
# TLS: the RP2040 has no battery-backed clock; set it by NTP before verifying
# certificate dates. Keep mbedTLS records small with a broker that allows it.
TLS = {"ntp": True}
# The sequence number: the RP2040 keeps no RAM through machine.deepsleep()
# (it resets), so it goes to telemetry's default store, the file seq.txt (one
# small flash write per sample in deep-sleep mode; idle mode writes it only
# when it stops).

# The battery mode's store (config "wake", frugalmqtt.wake.Store): the
# RP2040 keeps no RAM through machine.deepsleep(), so a file in flash,
# replaced whole (renamed over) on each write.
WAKE_STORE = "wake.bin"


def set_clock():
    try:
        import ntptime
        ntptime.settime()
    except Exception as e:
        print("ntp: %r" % (e,))


def deep_sleep(ms):
    machine.deepsleep(ms)


def reset():
    machine.reset()
