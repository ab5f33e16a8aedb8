# frugalmqtt.time, PROTOTYPE 3: CPython only. The device modules fall back
# to it (`from .time import ...`) where MicroPython's time and micropython
# have what CPython lacks: "time" is a static qstr of MicroPython, so the
# fallback costs the device no name (._cpython's name costs one, interned
# when the .mpy loads even though the branch never runs).
from ._cpython import const, ticks_ms, ticks_diff, Stream  # noqa: F401
