# Shared by the client benchmarks that run on the MicroPython unix port
# (started by bench/client_bench.py as `micropython -m NAME HOST PORT ...`,
# compiled to .mpy). Results are printed as lines "@@ key value...".
import sys

from frugalmqtt.client import MQTTClient
from frugalmqtt import props as _p

HOST = sys.argv[1]
PORT = int(sys.argv[2])
ARGS = sys.argv[3:]

TOPIC = b"bench/t"
PAYLOAD = bytes(range(32))  # 32-byte payload
# One user property, built once and reused (encoding it allocates nothing)
PROPS5 = [(_p.USER_PROPERTY, ("k", "v"))]

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
    c = MQTTClient(cid, HOST, PORT, version, keepalive=60, reconnect=False, timeout_ms=5000,
                   slots=slots, slot_size=SLOT_SIZE, max_packet=MAX_PACKET, tx_size=TX_SIZE,
                   inbound=inbound, aliases_in=aliases_in)
    c.connect()
    return c


def flush(c):
    if not c.flush(10000):
        fail("no acknowledgement within 10 s")


class Counter:
    """on_message target that allocates nothing."""

    def __init__(self):
        self.n = 0

    def cb(self, msg):
        self.n += 1


def inbound_busy(s):
    """True while a received QoS 2 message still awaits its PUBREL."""
    i = 0
    while i < s.inbound:
        if s.in_pid[i]:
            return True
        i += 1
    return False
