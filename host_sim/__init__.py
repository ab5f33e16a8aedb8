"""Host-side simulator for frugalmqtt (runs the device code on CPython against real brokers)."""
