"""Host-side companions of the device package frugalmqtt: the broker
direction of the codec (server), conveniences for tests, the simulator and
the benchmarks (codec), and whole packets as bytes (packets). They import the
device modules; nothing in firmware/ imports them, and no device installs
them. They run on CPython and on the MicroPython unix port (the device tests
use them there)."""
