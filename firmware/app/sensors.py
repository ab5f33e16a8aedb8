# The sensor interface of the telemetry firmware: a sensor has a `name` (the
# payload's "sensor" field), a `unit` (sent as the MQTT 5 user property
# "unit") and read() -> float. make(names) builds the ones a board or config
# asks for; a board module lists its defaults in board.SENSORS.
import math


class Simulated:
    """A deterministic reading for the unix port and tests: a slow sine wave
    around `base` (one period every 60 readings) plus a small repeatable
    wobble, so a subscriber can check values."""

    def __init__(self, name="temp", unit="C", base=21.0, amplitude=2.5):
        self.name = name
        self.unit = unit
        self.base = base
        self.amplitude = amplitude
        self.n = 0

    def read(self):
        v = self.base + self.amplitude * math.sin(self.n * 2 * math.pi / 60)
        v += ((self.n * 7919) % 11 - 5) * 0.01  # repeatable wobble of +-0.05
        self.n += 1
        return v


class RP2040Temp:
    """RP2040 on-die temperature sensor on ADC input 4 (RP2040 datasheet
    4.9.5: 0.706 V at 27 C, -1.721 mV per degree, 3.3 V reference)."""

    name = "temp"
    unit = "C"

    def __init__(self):
        from machine import ADC
        self.adc = ADC(4)

    def read(self):
        volts = self.adc.read_u16() * 3.3 / 65535
        return 27 - (volts - 0.706) / 0.001721


class ESP32Temp:
    """ESP32 internal temperature: esp32.mcu_temperature() (C; ESP32-S2/S3/C3
    and later) or esp32.raw_temperature() (F; the original ESP32, whose
    reading is the die, well above the air)."""

    name = "temp"
    unit = "C"

    def __init__(self):
        import esp32
        self.esp32 = esp32

    def read(self):
        e = self.esp32
        if hasattr(e, "mcu_temperature"):
            return float(e.mcu_temperature())
        return (e.raw_temperature() - 32) / 1.8


class ESP32Hall:
    """ESP32 Hall-effect sensor (original ESP32, ports that still have it)."""

    name = "hall"
    unit = "raw"

    def __init__(self):
        import esp32
        self.read_hall = esp32.hall_sensor

    def read(self):
        return float(self.read_hall())


KINDS = {
    "sim_temp": lambda: Simulated("temp", "C", 21.0, 2.5),
    "sim_humidity": lambda: Simulated("humidity", "%", 45.0, 10.0),
    "rp2040_temp": RP2040Temp,
    "esp32_temp": ESP32Temp,
    "esp32_hall": ESP32Hall,
}


def make(names):
    """Sensors for the given kind names (keys of KINDS)."""
    out = []
    for n in names:
        if n not in KINDS:
            raise ValueError("unknown sensor kind " + n)
        out.append(KINDS[n]())
    return out
