"""wake.Store in RTC memory (the ESP32 path, machine.RTC().memory()) and in a
file: what a wake stored is there after a reset (new objects reading the
same memory), with DUP=1, its packet id, the packet-id counter, the
remembered limits and the application's counter. No network: the messages
wait in the table. machine.RTC is a stand-in here (no port but the ESP32 has
it); CPython and MicroPython."""
import sys
from _outbox_rig import scratch, drop
from frugalmqtt.lite import core
from frugalmqtt.wake import Wake, Store

# lite.py's state[...] indices the test reads
_N = 0
_PID = 2
_MQOS = 7
_STRIDE = 16
_ORD = 26


class _RTC:
    """machine.RTC: memory() reads, memory(b) replaces (as on the ESP32)."""
    mem = b""

    def memory(self, b=None):
        if b is None:
            return _RTC.mem
        _RTC.mem = bytes(b)


class _Machine:
    RTC = _RTC


def _publish_then_reset(store):
    w = Wake("dev", "127.0.0.1", 1, version=5, store=store(), slots=4, max_packet=128)
    assert core.publish(w, "t/a", b"one", 1) == 1
    assert core.publish(w, "t/b", b"two", 2) == 2
    w.user = 41
    w.known = True  # as after a CONNACK
    w.state[_MQOS] = 1
    w.rq = 3  # the remembered Receive Maximum
    w.save()
    return Wake("dev", "127.0.0.1", 1, version=5, store=store(), slots=4, max_packet=128)


def _check(w):
    a = w.state
    assert w.pending() == 2 and w.user == 41 and a[_PID] == 2
    assert w.known and a[_MQOS] == 1 and w.rq == 3
    b = w.buf
    for k, pid in ((0, 1), (1, 2)):
        s = a[_ORD][k] * a[_STRIDE]  # the slot: state, image start, size (2), packet id (2)
        assert b[s + 4] << 8 | b[s + 5] == pid
        assert b[s + b[s + 1]] & 8  # DUP=1: it may have gone before the reset


def test_rtc_memory_keeps_the_wake_across_a_reset():
    old = sys.modules.get("machine")
    sys.modules["machine"] = _Machine
    _RTC.mem = b""
    try:
        _check(_publish_then_reset(Store))
        assert len(_RTC.mem) == 2048
    finally:
        if old is None:
            del sys.modules["machine"]
        else:
            sys.modules["machine"] = old


def test_a_file_keeps_the_wake_across_a_reset():
    path = scratch()
    try:
        _check(_publish_then_reset(lambda: Store(2048, path)))
    finally:
        drop(path)


def test_a_damaged_state_block_forgets_the_limits_not_the_messages():
    old = sys.modules.get("machine")
    sys.modules["machine"] = _Machine
    _RTC.mem = b""
    try:
        _publish_then_reset(Store)
        m = bytearray(_RTC.mem)
        m[3] ^= 0xFF  # the quota, under the state block's checksum
        _RTC.mem = bytes(m)
        w = Wake("dev", "127.0.0.1", 1, version=5, store=Store(), slots=4, max_packet=128)
        assert not w.known and w.user == 0 and w.pending() == 2  # waits for a CONNACK
    finally:
        if old is None:
            del sys.modules["machine"]
        else:
            sys.modules["machine"] = old
