# Codec micro-benchmark: the device's protocol core, sans-I/O. Runs unchanged
# under MicroPython (MICROPYPATH=firmware) and CPython (PYTHONPATH=firmware);
# bench/run.py runs it under both and parses the "@@RESULT" lines.
# session.Session is the full client's engine without a driver (the core with
# receiving and aliases): packets go to a stream that drops them, and the
# server's packets are put in its receive buffer (data, the first byte in
# state[_T]) as a driver frames them.
#
# Operations (MQTT 5, protocol level 5; topic b"sensors/dev1/temp", 32-byte
# payload, one user property ("unit", "C") built once with props.build()):
#   publish_q0: Session.publish() at QoS 0: the PUBLISH encoded and written
#   publish_q1_acked: a QoS 1 publish (stored in a slot, written), then its
#     PUBACK handled (input(): the slot freed)
#   receive_q1: a QoS 1 PUBLISH from the server handled (input(): parsed,
#     properties checked, on_message called, PUBACK written)
#
# Rate: best of REPEATS timed loops of N calls (loop overhead included).
# Allocation: MicroPython: gc.mem_alloc() delta over N_ALLOC calls with the GC
#   disabled, minus the same loop run 0 times, per call; plus a run of 10 calls
#   under micropython.heap_lock() (heap_lock_ok: no allocation at all).
#   CPython: tracemalloc, peak traced memory during one call above the level
#   before it (transient allocation), and memory still held per call after
#   N_ALLOC calls (retained).
import gc
import sys

from frugalmqtt import props as P
from frugalmqtt import session

MP = sys.implementation.name == "micropython"
if MP:
    import micropython
    import time

    def now():
        return time.ticks_us()

    def elapsed_us(t0):
        return time.ticks_diff(time.ticks_us(), t0)
else:
    import time
    import tracemalloc

    def now():
        return time.perf_counter_ns()

    def elapsed_us(t0):
        return (time.perf_counter_ns() - t0) // 1000

N = 20000
REPEATS = 5
N_ALLOC = 1000
for a in sys.argv[1:]:
    if a.startswith("n="):
        N = int(a[2:])
    elif a.startswith("repeats="):
        REPEATS = int(a[8:])

TOPIC = b"sensors/dev1/temp"
PAYLOAD = b"0123456789abcdef0123456789abcdef"
PROPS = P.build([(P.USER_PROPERTY, ("unit", "C"))])
_QUOTA = 1  # lite.py's state[...] indices: the server's quota (0: not up)
_T = 14  # ... the first byte of the packet in data


class Sink:
    """The stream the session writes to: keeps the last packet's length."""

    def __init__(self):
        self.n = 0

    def write(self, b, o, n):
        self.n = n
        return n

    def close(self):
        pass


class Count:
    def __init__(self):
        self.n = 0

    def cb(self, msg):
        self.n += 1


SINK = Sink()
S = session.Session("bench", 5, slots=4, slot_size=128, max_packet=256, tx_size=256)
S.begin(SINK, True)
S.data[0:3] = b"\x00\x00\x00"  # CONNACK: no session, accepted, no properties
S.state[_T] = 0x20
S.input(3)
RX = Count()
S.on_message = RX.cb

# The server's QoS 1 PUBLISH body (what a driver frames into data): topic,
# packet id 1234, the property block, the payload
_t = len(TOPIC).to_bytes(2, "big") + TOPIC + (1234).to_bytes(2, "big")
INBOUND = _t + bytes([len(PROPS)]) + PROPS + PAYLOAD
PUBACK = b"\x00\x00"  # the body of the PUBACK for the packet id, set per call


def check():
    """The session is up and every operation does what its name says."""
    assert S.state[_QUOTA]
    S.publish(TOPIC, PAYLOAD, 0, False, PROPS)
    assert SINK.n == 64, SINK.n  # 2-byte header, 62-byte body
    pid = S.publish(TOPIC, PAYLOAD, 1, False, PROPS)
    assert pid > 0 and S.n == 1 and SINK.n == 66, SINK.n  # + the packet id
    ack(pid)
    assert S.n == 0
    receive()
    assert RX.n == 1 and SINK.n == 4  # the PUBACK went out


def ack(pid):
    r = S.data
    r[0] = pid >> 8
    r[1] = pid & 0xFF
    S.state[_T] = 0x40
    S.input(2)


def load_inbound():
    """Put the server's PUBLISH in data (byte by byte: a slice would allocate)."""
    r = S.data
    b = INBOUND
    for i in range(len(b)):
        r[i] = b[i]


def receive():
    load_inbound()
    S.state[_T] = 0x32
    S.input(len(INBOUND))


# Bound methods made once (making one allocates)
PUBLISH = S.publish
HANDLE = S.input


# One loop per operation, with the call spelled out (a generic fn(*args)
# wrapper would allocate on MicroPython and add overhead).

def loop_publish_q0(n):
    pub = PUBLISH
    topic = TOPIC
    payload = PAYLOAD
    props = PROPS
    t0 = now()
    for _ in range(n):
        pub(topic, payload, 0, False, props)
    return elapsed_us(t0)


def loop_publish_q1_acked(n):
    pub = PUBLISH
    topic = TOPIC
    payload = PAYLOAD
    props = PROPS
    r = S.data
    a = S.state
    handle = HANDLE
    t0 = now()
    for _ in range(n):
        pid = pub(topic, payload, 1, False, props)
        r[0] = pid >> 8
        r[1] = pid & 0xFF
        a[_T] = 0x40
        handle(2)
    return elapsed_us(t0)


def loop_receive_q1(n):
    load_inbound()  # input() leaves data as it was
    k = len(INBOUND)
    a = S.state
    handle = HANDLE
    t0 = now()
    for _ in range(n):
        a[_T] = 0x32
        handle(k)
    return elapsed_us(t0)


OPS = (
    ("publish_q0", loop_publish_q0, 64),
    ("publish_q1_acked", loop_publish_q1_acked, 66),
    ("receive_q1", loop_receive_q1, 2 + len(INBOUND)),
)


def rate(loop):
    loop(N // 10)  # warm up
    best = None
    for _ in range(REPEATS):
        us = loop(N)
        if best is None or us < best:
            best = us
    if best < 1:
        best = 1
    return N * 1000000 // best, best


def alloc_mp(loop):
    gc.collect()
    gc.disable()
    try:
        a = gc.mem_alloc()
        loop(0)
        base = gc.mem_alloc() - a
        a = gc.mem_alloc()
        loop(N_ALLOC)
        used = gc.mem_alloc() - a - base
    finally:
        gc.enable()
    ok = True
    gc.collect()
    micropython.heap_lock()
    try:
        loop(10)
    except MemoryError:
        ok = False
    micropython.heap_unlock()
    return used / N_ALLOC, ok


def alloc_cpython(loop):
    tracemalloc.start()
    try:
        loop(10)
        tracemalloc.reset_peak()
        cur0 = tracemalloc.get_traced_memory()[0]
        loop(0)
        base_peak = tracemalloc.get_traced_memory()[1] - cur0
        tracemalloc.reset_peak()
        cur0 = tracemalloc.get_traced_memory()[0]
        loop(1)
        peak = tracemalloc.get_traced_memory()[1] - cur0 - base_peak
        cur0 = tracemalloc.get_traced_memory()[0]
        loop(N_ALLOC)
        retained = (tracemalloc.get_traced_memory()[0] - cur0) / N_ALLOC
    finally:
        tracemalloc.stop()
    return max(peak, 0), retained


def emit(d):
    # One line of JSON-like text; both json modules print the same for this.
    parts = []
    for k in sorted(d):
        v = d[k]
        if isinstance(v, str):
            v = '"%s"' % v
        elif v is True or v is False:
            v = "true" if v else "false"
        parts.append('"%s": %s' % (k, v))
    print("@@RESULT {" + ", ".join(parts) + "}")


def main():
    check()
    impl = sys.implementation.name
    version = ".".join([str(x) for x in sys.implementation.version[:3]])
    release = sys.implementation.version[3] if len(sys.implementation.version) > 3 else ""
    emit({"kind": "info", "impl": impl, "version": version, "release": release,
          "n": N, "repeats": REPEATS, "n_alloc": N_ALLOC,
          "mpy_loaded": str(getattr(session, "__file__", "?")).endswith(".mpy")})
    for name, loop, size in OPS:
        ops, best_us = rate(loop)
        d = {"kind": "op", "impl": impl, "op": name, "packet_bytes": size,
             "ops_per_s": ops, "best_us": best_us}
        if MP:
            per, ok = alloc_mp(loop)
            d["alloc_bytes_per_op"] = per
            d["heap_lock_ok"] = ok
        else:
            peak, retained = alloc_cpython(loop)
            d["alloc_peak_bytes_per_op"] = peak
            d["alloc_retained_bytes_per_op"] = retained
        emit(d)


main()
