# Codec micro-benchmark. Runs unchanged under MicroPython (MICROPYPATH=firmware:.
# micropython bench/codec_bench_mp.py) and CPython (PYTHONPATH=firmware:.);
# bench/run.py runs it under both and parses the "@@RESULT" lines.
# encode_publish (with its checks) is frugalmqtt_host's; it writes with the
# device's publish.put_publish.
#
# Operations (MQTT 5, protocol level 5):
#   encode_publish / decode_publish: QoS 1 PUBLISH, topic b"sensors/dev1/temp",
#     32-byte payload, one user property ("unit", "C") -> 66-byte packet
#   encode_puback / decode_puback: PUBACK, short form (4 bytes)
# Decoding goes through control.decode() on the body, as a client does after
# codec.Framer has read the fixed header.
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

from frugalmqtt import control, publish
from frugalmqtt import props as P
from frugalmqtt.codec import PUBACK
from frugalmqtt_host import codec as host

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
PROPS = [(P.USER_PROPERTY, ("unit", "C"))]
PID = 1234

OUT = bytearray(256)  # encode target
PUB = bytearray(256)  # an encoded PUBLISH to decode
PUB_LEN = host.encode_publish(PUB, 0, 5, TOPIC, PAYLOAD, 1, PID, False, False, PROPS)
PUB_FIRST = PUB[0]
PUB_BODY = 2  # remaining length (64) fits one byte
ACK = bytearray(8)
ACK_LEN = publish.encode_ack(ACK, 0, 5, PUBACK, PID)
ACK_FIRST = ACK[0]
PKT = publish.Packet()


def check():
    """The decoders see what the encoders wrote."""
    assert PUB_LEN == 66 and PUB[1] == PUB_LEN - 2, PUB_LEN
    assert control.decode(PKT, PUB_FIRST, PUB, PUB_BODY, PUB_LEN, 5) == 3
    assert host.topic_bytes(PKT) == TOPIC and host.payload_bytes(PKT) == PAYLOAD
    assert PKT.qos == 1 and PKT.pid == PID and host.props_items(PKT.props) == PROPS
    assert ACK_LEN == 4
    assert control.decode(PKT, ACK_FIRST, ACK, 2, ACK_LEN, 5) == PUBACK
    assert PKT.pid == PID and PKT.reason == 0


# One loop per operation, with the call spelled out (a generic fn(*args)
# wrapper would allocate on MicroPython and add overhead).

def loop_encode_publish(n):
    enc = host.encode_publish
    buf = OUT
    topic = TOPIC
    payload = PAYLOAD
    props = PROPS
    t0 = now()
    for _ in range(n):
        enc(buf, 0, 5, topic, payload, 1, PID, False, False, props)
    return elapsed_us(t0)


def loop_decode_publish(n):
    dec = control.decode
    pkt = PKT
    buf = PUB
    first = PUB_FIRST
    end = PUB_LEN
    t0 = now()
    for _ in range(n):
        dec(pkt, first, buf, 2, end, 5)
    return elapsed_us(t0)


def loop_encode_puback(n):
    enc = publish.encode_ack
    buf = OUT
    t0 = now()
    for _ in range(n):
        enc(buf, 0, 5, PUBACK, PID)
    return elapsed_us(t0)


def loop_decode_puback(n):
    dec = control.decode
    pkt = PKT
    buf = ACK
    first = ACK_FIRST
    t0 = now()
    for _ in range(n):
        dec(pkt, first, buf, 2, 4, 5)
    return elapsed_us(t0)


OPS = (
    ("encode_publish", loop_encode_publish, PUB_LEN),
    ("decode_publish", loop_decode_publish, PUB_LEN),
    ("encode_puback", loop_encode_puback, ACK_LEN),
    ("decode_puback", loop_decode_puback, ACK_LEN),
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
          "mpy_loaded": str(getattr(publish, "__file__", "?")).endswith(".mpy")})
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
