# Shared by the client benchmarks that run on the MicroPython unix port
# (started by bench/client_bench.py as `micropython -m NAME HOST PORT ...`,
# compiled to .mpy). Results are printed as lines "@@ key value...".
# With BENCH_LIB=<name> in the environment (`make compare`), client() is
# another library behind the adapter in mqttlibs.py, and frugalmqtt is not loaded.
import os
import sys

LIB = os.getenv("BENCH_LIB") or "frugalmqtt"
if LIB == "frugalmqtt":
    from frugalmqtt.client import MQTTClient
    from frugalmqtt import props as _p
    # One user property, built once and reused (sending it allocates nothing)
    PROPS5 = _p.build([(_p.USER_PROPERTY, ("k", "v"))])
    BATCH = 1000  # publishes between clock reads in throughput runs
else:
    PROPS5 = None
    BATCH = 50  # (some clients wait a round trip per QoS 1 publish)

HOST = sys.argv[1]
PORT = int(sys.argv[2])
ARGS = sys.argv[3:]

TOPIC = b"bench/t"
PAYLOAD = bytes(range(32))  # 32-byte payload

# Session sizes used unless a benchmark says otherwise
SLOTS = 8
SLOT_SIZE = 128
MAX_PACKET = 256
TX_SIZE = 256


def out(*a):
    print("@@", *a)


def fail(why):
    print("@@ error", why)
    sys.exit(2)


def client(cid, version, slots=SLOTS, inbound=8, aliases_in=4):
    if LIB != "frugalmqtt":
        from mqttlibs import connect
        return connect(LIB, cid, HOST, PORT)
    c = MQTTClient(cid, HOST, PORT, version, keepalive=60, reconnect=False, timeout_ms=5000,
                   slots=slots, slot_size=SLOT_SIZE, max_packet=MAX_PACKET, tx_size=TX_SIZE,
                   inbound=inbound, aliases_in=aliases_in)
    c.connect()
    return c


def publish_n(c, topic, payload, q, props, n):
    """n publishes; another library's adapter loops inside the library."""
    if LIB != "frugalmqtt":
        c.publish_many(topic, payload, q, props, n)
        return
    pub = c.publish
    i = 0
    while i < n:
        pub(topic, payload, q, False, props)
        i += 1


def flush(c):
    if not c.flush(10000):
        fail("no acknowledgement within 10 s")


class Counter:
    """on_message target that allocates nothing."""

    def __init__(self):
        self.n = 0

    def cb(self, msg):
        self.n += 1


def inbound_busy(c):
    """True while a received QoS 2 message still awaits its PUBREL."""
    i = 0
    while i < c.in_max:
        if c.in_pid[i]:
            return True
        i += 1
    return False
