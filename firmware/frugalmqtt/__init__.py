"""frugalmqtt: a small MQTT 3.1.1 + 5.0 client for MicroPython."""
__version__ = "0.1.0"
