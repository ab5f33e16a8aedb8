"""The device engine's hot paths allocate nothing (docs/codec.md "Allocation"):
frugalmqtt.session.Session (the sans-I/O core with receiving and aliases)
encoding PUBLISH at QoS 0/1/2 with properties and topic aliases, every ack
it sends and receives, PINGREQ, inbound QoS 1/2 dispatch with properties
read in place, and lite.Publisher's framing of whole packets (its poll()).

Under MicroPython no_alloc() locks the heap for the call, so any allocation
fails the test; under CPython the same calls just run (and their results are
still checked). Each path runs once before the locked call: the first call
may intern strings or warm caches. Everything shared is built here at module
level. Expected packets come from the host's encoders (frugalmqtt_host).
"""
from array import array
from _util import no_alloc, unhex
from _session_rig import frame, pub, ack, connack, Capture, Input
from frugalmqtt import session as S
from frugalmqtt import lite as L
from frugalmqtt.props import build
from frugalmqtt_host.ref import props as P

PUBACK = 4
PUBREC = 5
PUBREL = 6
PUBCOMP = 7
ACK_TYPES = (PUBACK, PUBREC, PUBREL, PUBCOMP)

TOPIC = b"sensors/livingroom/t1"
STR_TOPIC = "sensors/livingroom/t2"
PAYLOAD = b'{"t": 21.5, "rh": 40}'
PAIRS = [(P.MESSAGE_EXPIRY, 300), (P.CONTENT_TYPE, "application/json"),
         (P.USER_PROPERTY, ("unit", "C")), (P.USER_PROPERTY, ("src", "dev1")),
         (P.CORRELATION_DATA, b"\x01\x02\x03\x04")]
PROPS = build(PAIRS)  # built once, reused by every publish
ACK_PAIRS = [(P.REASON_STRING, "quota"), (P.USER_PROPERTY, ("k", "v"))]


NOW = [50000]


def clock():
    return NOW[0]


CAP = Capture(4096, 32)
IN = Input(1024)
DONE = array("i", bytes(4 * 8))  # pid, reason pairs
DN = [0]
GOT = array("i", bytes(4 * 12))  # what on_message read, see on_message()


def on_done(pid, reason):
    DONE[DN[0]] = pid
    DONE[DN[0] + 1] = reason
    DN[0] += 2


def on_message(m):
    """Reads the message and its properties in place, as an application may."""
    pr = m.props
    GOT[0] += 1
    GOT[1] = m.pid
    GOT[2] = m.qos
    GOT[3] = 1 if m.topic_is(TOPIC) else 0
    GOT[4] = m.payload_len
    GOT[5] = pr.get_int(P.MESSAGE_EXPIRY, -1)
    GOT[6] = pr.get_int(P.SUBSCRIPTION_ID, -1)
    GOT[7] = pr.get_int(P.TOPIC_ALIAS, -1)
    GOT[8] = 1 if pr.has(P.CONTENT_TYPE) else 0
    GOT[9] = 1 if pr.has(P.CORRELATION_DATA) else 0


def _session(v):
    s = S.Session("na%d" % v, v, clock=clock, slots=4)
    s.on_done = on_done
    s.on_message = on_message
    s.begin(CAP, True)
    IN.load(connack(v, props=[(P.TOPIC_ALIAS_MAXIMUM, 8), (P.RECEIVE_MAXIMUM, 20)]
                    if v == 5 else None))
    IN.drain(s)
    assert s.up
    CAP.take()
    return s


S5 = _session(5)
S4 = _session(4)
PIDS = array("i", [0, 0])


def _feed(s):
    IN.drain(s)


def _locked_feed(s, data):
    IN.load(data)
    no_alloc(_feed, s)
    return CAP.take()


def _publish(s, topic, qos, retain, props):
    PIDS[0] = s.publish(topic, PAYLOAD, qos, retain, props)


def _locked_publish(s, topic, qos, retain=False, props=PROPS):
    """Warm up with the same call (topic aliases then known), then publish
    locked; returns (packet id, the packets written)."""
    _publish(s, topic, qos, retain, props)
    CAP.take()
    if qos:
        _free(s, PIDS[0], qos)
    no_alloc(_publish, s, topic, qos, retain, props)
    return PIDS[0], CAP.take()


def _free(s, pid, qos):
    """End a QoS 1/2 flow (unlocked)."""
    v = s.v
    if qos == 1:
        IN.load(ack(v, PUBACK, pid))
    else:
        IN.load(ack(v, PUBREC, pid) + ack(v, PUBCOMP, pid))
    IN.drain(s)
    CAP.take()
    DN[0] = 0


# ---- encode: PUBLISH -------------------------------------------------------------------------

def test_encode_publish_qos0_v5_alias_and_props():
    pid, got = _locked_publish(S5, TOPIC, 0)
    assert pid == 0 and got == [pub(5, b"", PAYLOAD, 0, props=PAIRS, alias=1)]


def test_encode_publish_qos1_v5_and_puback():
    pid, got = _locked_publish(S5, TOPIC, 1)
    assert pid > 0 and got == [pub(5, b"", PAYLOAD, 1, pid, props=PAIRS, alias=1)]
    assert _locked_feed(S5, ack(5, PUBACK, pid)) == []
    assert list(DONE[:DN[0]]) == [pid, 0]
    DN[0] = 0


def test_encode_publish_qos2_v5_retain_and_its_acks():
    pid, got = _locked_publish(S5, TOPIC, 2, True)
    assert got == [pub(5, b"", PAYLOAD, 2, pid, True, props=PAIRS, alias=1)]
    assert _locked_feed(S5, ack(5, PUBREC, pid)) == [ack(5, PUBREL, pid)]
    assert _locked_feed(S5, ack(5, PUBCOMP, pid)) == []
    assert list(DONE[:DN[0]]) == [pid, 0] and S5.pending() == 0
    DN[0] = 0


def test_encode_publish_new_alias_v5():
    # the topic with its new alias, in the locked call itself. TOPIC first:
    # it holds alias 1 whether or not this file's earlier tests ran first
    _publish(S5, TOPIC, 0, False, PROPS)
    CAP.take()
    _publish(S5, b"na/warm", 0, False, PROPS)
    no_alloc(_publish, S5, b"na/new", 0, False, PROPS)
    got = CAP.take()
    assert got[1:] == [pub(5, b"na/new", PAYLOAD, 0, props=PAIRS, alias=3)], got
    assert got[0] == pub(5, b"na/warm", PAYLOAD, 0, props=PAIRS, alias=2)


def test_encode_publish_qos1_v311():
    pid, got = _locked_publish(S4, TOPIC, 1, False, None)
    assert got == [pub(4, TOPIC, PAYLOAD, 1, pid)]
    assert got[0][:2] == bytes((0x32, 2 + len(TOPIC) + 2 + len(PAYLOAD)))
    _free(S4, pid, 1)


def test_encode_publish_str_topic_and_props():
    pid, got = _locked_publish(S4, STR_TOPIC, 1, False, None)
    assert got == [pub(4, STR_TOPIC, PAYLOAD, 1, pid)]
    _free(S4, pid, 1)
    pid, got = _locked_publish(S5, STR_TOPIC, 2, False, PROPS)
    assert got[0] in (pub(5, b"", PAYLOAD, 2, pid, props=PAIRS, alias=k) for k in range(1, 9))
    _free(S5, pid, 2)


# ---- encode: the acks we send, PINGREQ ---------------------------------------------------------

def test_encode_acks_v311():
    IN.load(pub(4, TOPIC, b"1", 1, 0x1234) + pub(4, TOPIC, b"2", 2, 0x1235))
    IN.drain(S4)  # warm
    IN.load(ack(4, PUBREL, 0x1235))
    IN.drain(S4)
    CAP.take()
    got = _locked_feed(S4, pub(4, TOPIC, b"1", 1, 0x1234) + pub(4, TOPIC, b"2", 2, 0x1235)
                       + ack(4, PUBREL, 0x1235) + ack(4, PUBREC, 0x1236))
    assert got == [unhex("40 02 12 34"), unhex("50 02 12 35"), unhex("70 02 12 35"),
                   unhex("62 02 12 36")]


def test_encode_acks_v5_with_reason_codes():
    utf8 = [(P.PAYLOAD_FORMAT, 1)]
    data = (pub(5, TOPIC, b"\xff", 1, 0x1234, props=utf8) + pub(5, TOPIC, b"\xff", 2, 0x1235, props=utf8)
            + ack(5, PUBREL, 0x1236) + ack(5, PUBREC, 0x1237))
    IN.load(data)
    IN.drain(S5)  # warm
    CAP.take()
    assert _locked_feed(S5, data) == [unhex("40 03 12 34 99"), unhex("50 03 12 35 99"),
                                      unhex("70 03 12 36 92"), unhex("62 03 12 37 92")]


def _tick(s):
    PIDS[1] = s.tick()


def test_encode_pingreq():
    s = _session(5)
    NOW[0] += 60000
    _tick(s)  # warm
    IN.load(b"\xd0\x00")
    IN.drain(s)
    CAP.take()
    NOW[0] += 60000
    no_alloc(_tick, s)
    assert CAP.take() == [unhex("C0 00")] and PIDS[1] == 30000
    assert _locked_feed(s, b"\xd0\x00") == []


# ---- decode: what the server sends -------------------------------------------------------------

# A received 5.0 QoS 1 PUBLISH with properties (as a broker would send it:
# subscription identifiers too) and a new topic alias, then a QoS 2 one by
# that alias alone.
RX_PUB = (pub(5, TOPIC, PAYLOAD, 1, 0x4321, props=PAIRS + [(P.SUBSCRIPTION_ID, 200),
                                                            (P.SUBSCRIPTION_ID, 3)], alias=2)
          + pub(5, b"", PAYLOAD, 2, 0x4322, props=[(P.SUBSCRIPTION_ID, 7)], alias=2)
          + ack(5, PUBREL, 0x4322))


def test_decode_inbound_publish_with_properties():
    IN.load(RX_PUB)
    IN.drain(S5)  # warm
    CAP.take()
    for i in range(len(GOT)):
        GOT[i] = 0
    got = _locked_feed(S5, RX_PUB)
    assert got == [unhex("40 02 43 21"), unhex("50 02 43 22"), unhex("70 02 43 22")]
    # the second message, read by alias; the first message's reads below
    assert list(GOT[:10]) == [2, 0x4322, 2, 1, len(PAYLOAD), -1, 7, 2, 0, 0]


def _lookup():
    pr = S5.props
    return pr.get_int(P.MESSAGE_EXPIRY) + pr.get_int(P.TOPIC_ALIAS) + pr.get_int(P.SUBSCRIPTION_ID) \
        + (1 if pr.has(P.CONTENT_TYPE) else 0)


def test_props_integer_lookup():
    IN.load(RX_PUB[:len(RX_PUB) - len(pub(5, b"", PAYLOAD, 2, 0x4322, props=[(P.SUBSCRIPTION_ID, 7)],
                                          alias=2)) - 4])
    IN.drain(S5)
    CAP.take()
    assert GOT[5] == 300 and GOT[6] == 200 and GOT[7] == 2 and GOT[8] == GOT[9] == 1
    assert _lookup() == 300 + 2 + 200 + 1
    assert no_alloc(_lookup) == 503


def _ack_forms(v, t, pid):
    """Every accepted form of an ack."""
    f = (t << 4) | (2 if t == PUBREL else 0)
    rc = 0x92 if t >= PUBREL else 0x10
    hi = pid >> 8
    lo = pid & 0xFF
    if v == 4:
        return [bytes((f, 2, hi, lo))]
    return [bytes((f, 2, hi, lo)), bytes((f, 3, hi, lo, rc)), bytes((f, 4, hi, lo, rc, 0)),
            ack(5, t, pid, rc, ACK_PAIRS)]


def test_decode_each_ack():
    # Each form of each ack ends (or moves) a real flow, locked
    n = 0
    for s in (S4, S5):
        v = s.v
        for t in ACK_TYPES:
            for data in _ack_forms(v, t, 1):
                if t == PUBREL:  # an inbound QoS 2 message waits for it
                    pid = 0x777
                    IN.load(pub(v, TOPIC, b"x", 2, pid))
                    IN.drain(s)
                    want = [ack(v, PUBCOMP, pid)]
                else:
                    pid = s.publish(TOPIC, PAYLOAD, 1 if t == PUBACK else 2)
                    if t == PUBCOMP:
                        IN.load(ack(v, PUBREC, pid))
                        IN.drain(s)
                    want = [ack(v, PUBREL, pid)] if t == PUBREC else []
                CAP.take()
                b = bytearray(data)
                b[2] = pid >> 8
                b[3] = pid & 0xFF
                DN[0] = 0
                got = _locked_feed(s, bytes(b))
                assert got == want, (v, t, data)
                if t == PUBACK or t == PUBCOMP:
                    assert list(DONE[:2]) == [pid, data[4] if len(data) > 4 else 0]
                elif t == PUBREC:
                    _free(s, pid, 2)  # its PUBCOMP, unlocked
                n += 1
    assert n == 4 + 16 and S4.pending() == 0 and S5.pending() == 0


# ---- lite.Publisher's framing --------------------------------------------------------------

class Preloaded:
    """A blocking stream over preloaded bytes: readinto copies byte by byte
    (no slices, no new objects); write() discards. It is its own poller:
    ipoll() says readable once per grant (the test grants one packet per
    poll), a tuple made once (no allocation, as MicroPython's ipoll)."""

    def __init__(self, data):
        self.data = bytearray(data)
        self.pos = 0
        self.grants = 0
        self.ready = (self,)

    def readinto(self, buf, n=-1):
        if n < 0 or n > len(buf):
            n = len(buf)
        k = len(self.data) - self.pos
        if k > n:
            k = n
        d = self.data
        p = self.pos
        i = 0
        while i < k:
            buf[i] = d[p + i]
            i += 1
        self.pos = p + k
        return k

    def write(self, buf, off, n):
        return n

    def close(self):
        pass

    def ipoll(self, ms):
        if self.grants:
            self.grants -= 1
            return self.ready
        return ()


class _Lite(L.Publisher):
    """lite.Publisher recording the body length of each packet its poll()
    framed (what the old _read() returned)."""

    def input(self, n):
        LITE_T[1] = n
        return L.Publisher.input(self, n)


LITE = _Lite("na", "broker", rx_size=128, clock=clock)
LITE_T = array("i", [0, 0])
LITE_LENS = (len(ack(5, PUBACK, 1, 0x10)) - 2, 0, 100 + 2 + 1 + 2 + 1, 2)


def _lite_stream(pid):
    return Preloaded(ack(5, PUBACK, pid, 0x10) + b"\xd0\x00" + pub(5, b"t", bytes(100), 1, 9)
                     + ack(5, PUBREL, 3))


def _lite_read():
    # lite's poll() frames one packet (one grant of the stream) and hands it to input()
    LITE.sock.grants = 1
    assert LITE.poll(0)


def test_lite_read_whole_packets_allocates_nothing():
    # a PUBACK with a reason code, PINGRESP, a QoS 1 PUBLISH, a PUBREL:
    # framed by lite's poll() and handled, once unlocked, then locked
    from frugalmqtt import lconn
    for locked in (False, True):
        LITE.close()
        LITE.poller = s = Preloaded(connack(5))
        lconn.start(LITE, s, True)  # the CONNECT: lite's connect() without its wait
        _lite_read()
        assert LITE.quota  # the CONNACK came
        pid = LITE.publish(b"t", b"x", 1)
        LITE.sock = LITE.poller = _lite_stream(pid)  # the same connection's next bytes
        for k in range(4):
            if locked:
                no_alloc(_lite_read)
            else:
                _lite_read()
            assert LITE_T[1] == LITE_LENS[k], (k, LITE_T[1])
        assert LITE.pending() == 0 and LITE.quota
