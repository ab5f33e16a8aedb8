"""The hot path allocates nothing (docs/codec.md "Allocation").

Under MicroPython no_alloc() locks the heap for the call, so any allocation
fails the test; under CPython the same calls just run (and their results are
still checked). Each function is called once before the locked call: the
first call may intern strings or warm caches. Everything shared is built
here at module level.
"""
from _util import no_alloc, unhex
from frugalmqtt import codec, control, publish
from frugalmqtt import props as P
from frugalmqtt_host import codec as host
from frugalmqtt_host import server

BUF = bytearray(512)
PKT = publish.Packet()

TOPIC = b"sensors/livingroom/t1"
STR_TOPIC = "sensors/livingroom/t1"
PAYLOAD = b'{"t": 21.5, "rh": 40}'
PUB_PROPS = (
    (P.MESSAGE_EXPIRY, 300),
    (P.CONTENT_TYPE, b"application/json"),
    (P.USER_PROPERTY, (b"unit", b"C")),
    (P.USER_PROPERTY, (b"src", b"dev1")),
    (P.CORRELATION_DATA, b"\x01\x02\x03\x04"),
)
STR_PROPS = (
    (P.MESSAGE_EXPIRY, 300),
    (P.CONTENT_TYPE, "application/json"),
    (P.USER_PROPERTY, ("unit", "C")),
    (P.USER_PROPERTY, ("src", "dev1")),
    (P.CORRELATION_DATA, b"\x01\x02\x03\x04"),
)
ACK_PROPS = ((P.REASON_STRING, b"quota"), (P.USER_PROPERTY, (b"k", b"v")))
ACK_TYPES = (codec.PUBACK, codec.PUBREC, codec.PUBREL, codec.PUBCOMP)


def _pub_q0():
    return host.encode_publish(BUF, 0, 5, TOPIC, PAYLOAD, qos=0, props=PUB_PROPS, alias=3)


def _pub_q1():
    return host.encode_publish(BUF, 0, 5, TOPIC, PAYLOAD, qos=1, pid=7, props=PUB_PROPS,
                                  alias=3)


def _pub_q2():
    return host.encode_publish(BUF, 0, 5, TOPIC, PAYLOAD, qos=2, pid=0xFFFF, retain=True,
                                  dup=True, props=PUB_PROPS, alias=4)


def _pub_alias_only():
    return host.encode_publish(BUF, 0, 5, b"", PAYLOAD, qos=1, pid=8, props=PUB_PROPS, alias=3)


def _pub_v4_q1():
    return host.encode_publish(BUF, 0, 4, TOPIC, PAYLOAD, qos=1, pid=9)


def _pub_str():
    return host.encode_publish(BUF, 0, 5, STR_TOPIC, PAYLOAD, qos=1, pid=10, props=STR_PROPS)


def _locked_encode(fn):
    """Warm up, then encode with the heap locked; both runs must agree.
    Returns the packet."""
    n = fn()
    want = bytes(BUF[:n])
    BUF[0:n] = bytes(n)
    assert no_alloc(fn) == n
    assert bytes(BUF[:n]) == want
    return want


def _check_publish(data, v, qos, pid, alias, topic=TOPIC, props=PUB_PROPS):
    assert server.decode_packet(PKT, data, 0, len(data), v) == codec.PUBLISH
    assert PKT.qos == qos and PKT.pid == pid
    assert host.topic_bytes(PKT) == topic and host.payload_bytes(PKT) == PAYLOAD
    if v == 5:
        items = host.props_items(PKT.props)
        if alias:
            assert items[0] == (P.TOPIC_ALIAS, alias)
        assert PKT.props.get_int(P.MESSAGE_EXPIRY) == 300
        assert PKT.props.get_bytes(P.CONTENT_TYPE) == b"application/json"
        assert host.user_properties(PKT.props) == [("unit", "C"), ("src", "dev1")]
        assert PKT.props.get_bytes(P.CORRELATION_DATA) == b"\x01\x02\x03\x04"
        assert len(items) == len(props) + (1 if alias else 0)


def test_encode_publish_qos0_v5():
    _check_publish(_locked_encode(_pub_q0), 5, 0, 0, 3)


def test_encode_publish_qos1_v5():
    _check_publish(_locked_encode(_pub_q1), 5, 1, 7, 3)


def test_encode_publish_qos2_v5():
    data = _locked_encode(_pub_q2)
    _check_publish(data, 5, 2, 0xFFFF, 4)
    assert data[0] == 0x3D


def test_encode_publish_alias_without_topic_v5():
    _check_publish(_locked_encode(_pub_alias_only), 5, 1, 8, 3, topic=b"")


def test_encode_publish_qos1_v311():
    data = _locked_encode(_pub_v4_q1)
    _check_publish(data, 4, 1, 9, 0)
    assert data[:2] == bytes((0x32, 2 + len(TOPIC) + 2 + len(PAYLOAD)))


def test_encode_publish_str_topic_and_props():
    data = _locked_encode(_pub_str)
    _check_publish(data, 5, 1, 10, 0, props=STR_PROPS)


def _ack(v, ptype):
    return publish.encode_ack(BUF, 0, v, ptype, 0x1234)


def _ack_reason(ptype, reason):
    return publish.encode_ack(BUF, 0, 5, ptype, 0x1234, reason)


def _ack_props(ptype, reason):
    return publish.encode_ack(BUF, 0, 5, ptype, 0x1234, reason, ACK_PROPS)


def test_encode_acks_v311():
    for ptype in ACK_TYPES:
        _ack(4, ptype)
        assert no_alloc(_ack, 4, ptype) == 4
        assert bytes(BUF[:4]) == bytes((_first(ptype), 2, 0x12, 0x34))


def test_encode_acks_v5_with_reason_codes_and_props():
    for ptype in ACK_TYPES:
        rc = 0x92 if ptype >= codec.PUBREL else 0x97
        first = _first(ptype)
        _ack(5, ptype)
        assert no_alloc(_ack, 5, ptype) == 4
        _ack_reason(ptype, rc)
        assert no_alloc(_ack_reason, ptype, rc) == 5
        assert bytes(BUF[:5]) == bytes((first, 3, 0x12, 0x34, rc))
        for reason in (0, rc):
            n = _ack_props(ptype, reason)
            assert no_alloc(_ack_props, ptype, reason) == n
            assert server.decode_packet(PKT, BUF, 0, n, 5) == ptype
            assert PKT.pid == 0x1234 and PKT.reason == reason
            assert PKT.props.get_bytes(P.REASON_STRING) == b"quota"
            assert host.user_properties(PKT.props) == [("k", "v")]


def test_encode_pingreq():
    control.encode_ping(BUF, 0, codec.PINGREQ)
    assert no_alloc(control.encode_ping, BUF, 0, codec.PINGREQ) == 2
    assert bytes(BUF[:2]) == unhex("C0 00")


# ---- decode --------------------------------------------------------------------------------

def _build(fn, *args, **kw):
    b = bytearray(300)
    n = fn(b, 0, *args, **kw)
    return b, n


# A received 5.0 QoS 1 PUBLISH with properties (as a broker would send it:
# a subscription identifier too), and received acks, each a whole packet.
RX_PUB, RX_PUB_N = _build(host.encode_publish, 5, TOPIC, PAYLOAD, qos=1, pid=0x4321,
                          props=PUB_PROPS + ((P.SUBSCRIPTION_ID, 200), (P.SUBSCRIPTION_ID, 3)),
                          alias=2)


def _first(t):
    return (t << 4) | (2 if t == codec.PUBREL else 0)


# (protocol level, type, whole packet): every ack in every accepted form
RX_ACKS = []
for _t in ACK_TYPES:
    _rc = 0x92 if _t >= codec.PUBREL else 0x10
    _f = _first(_t)
    RX_ACKS.append((4, _t, bytearray(unhex("%02X 02 12 34" % _f))))
    RX_ACKS.append((5, _t, bytearray(unhex("%02X 02 12 34" % _f))))
    RX_ACKS.append((5, _t, bytearray(unhex("%02X 03 12 34 %02X" % (_f, _rc)))))
    RX_ACKS.append((5, _t, bytearray(unhex("%02X 04 12 34 %02X 00" % (_f, _rc)))))
    _b, _n = _build(publish.encode_ack, 5, _t, 0x1234, _rc, ACK_PROPS)
    RX_ACKS.append((5, _t, _b[:_n]))


def _header_len(buf):
    c = codec.Cur()
    c.set(buf, 1, len(buf))
    rl = c.vbi()
    return c.pos, rl


def test_decode_publish_with_properties():
    off, rl = _header_len(RX_PUB[:RX_PUB_N])
    end = off + rl
    first = RX_PUB[0]
    assert control.decode(PKT, first, RX_PUB, off, end, 5) == codec.PUBLISH
    assert no_alloc(control.decode, PKT, first, RX_PUB, off, end, 5) == codec.PUBLISH
    assert PKT.pid == 0x4321 and PKT.qos == 1
    assert bytes(RX_PUB[PKT.topic:PKT.topic + PKT.topic_len]) == TOPIC
    assert bytes(RX_PUB[PKT.data:PKT.data + PKT.data_len]) == PAYLOAD
    assert PKT.props.n_user == 2 and PKT.props.n_subid == 2
    assert PKT.props.get_int(P.TOPIC_ALIAS) == 2 and PKT.props.get_int(P.SUBSCRIPTION_ID) == 200
    assert PKT.props.get_bytes(P.CORRELATION_DATA) == b"\x01\x02\x03\x04"


def _props_lookup():
    # Reading integer properties of the decoded packet does not allocate either.
    pr = PKT.props
    return pr.get_int(P.MESSAGE_EXPIRY) + pr.get_int(P.TOPIC_ALIAS) + (1 if pr.has(P.CONTENT_TYPE) else 0)


def test_props_integer_lookup():
    off, rl = _header_len(RX_PUB[:RX_PUB_N])
    control.decode(PKT, RX_PUB[0], RX_PUB, off, off + rl, 5)
    assert _props_lookup() == 303
    assert no_alloc(_props_lookup) == 303


def test_decode_each_ack():
    assert len(RX_ACKS) == 20
    for v, ptype, data in RX_ACKS:
        end = len(data)
        off = 2
        assert control.decode(PKT, data[0], data, off, end, v) == ptype
        assert no_alloc(control.decode, PKT, data[0], data, off, end, v) == ptype
        assert PKT.pid == 0x1234
        if end > 4:
            assert PKT.reason == (0x92 if ptype >= codec.PUBREL else 0x10)
        if end > 8:
            assert PKT.props.get_bytes(P.REASON_STRING) == b"quota"


# ---- host.read_from (a Framer) ---------------------------------------------------------------

class PreloadedStream:
    """A stream over a preloaded bytearray whose readinto copies byte by byte
    (no slices, no new objects)."""

    def __init__(self, data):
        self.data = bytearray(data)
        self.end = len(self.data)
        self.pos = 0

    def rewind(self):
        self.pos = 0

    def readinto(self, buf, n=-1):
        if n < 0 or n > len(buf):
            n = len(buf)
        p = self.pos
        k = self.end - p
        if k <= 0:
            return None
        if k > n:
            k = n
        d = self.data
        i = 0
        while i < k:
            buf[i] = d[p + i]
            i += 1
        self.pos = p + k
        return k


RX_STREAM = PreloadedStream(bytes(RX_PUB[:RX_PUB_N]) + unhex("40 03 12 34 10") + unhex("D0 00"))
FRAMER = codec.Framer(256)


def _read():
    return host.read_from(FRAMER, RX_STREAM)


def _decode_framed():
    f = FRAMER
    return control.decode(PKT, f.first, f.buf, 0, f.rl, 5)


def test_framer_read_from_and_decode():
    # warm-up pass over the whole stream
    for t in (codec.PUBLISH, codec.PUBACK, codec.PINGRESP):
        assert _read() is True and _decode_framed() == t
    assert _read() is False
    RX_STREAM.rewind()
    # locked pass
    assert no_alloc(_read) is True
    assert no_alloc(_decode_framed) == codec.PUBLISH
    assert PKT.pid == 0x4321 and bytes(FRAMER.buf[PKT.data:PKT.data + PKT.data_len]) == PAYLOAD
    assert no_alloc(_read) is True
    assert no_alloc(_decode_framed) == codec.PUBACK
    assert PKT.pid == 0x1234 and PKT.reason == 0x10
    assert no_alloc(_read) is True
    assert no_alloc(_decode_framed) == codec.PINGRESP
    assert no_alloc(_read) is False  # nothing more available now
    RX_STREAM.rewind()


# ---- Framer.read_packet ----------------------------------------------------------------------

class PiecewiseStream(PreloadedStream):
    """Like PreloadedStream, but the data becomes readable in pieces: at each
    cut, readinto returns None once (nothing available now)."""

    def __init__(self, data, cuts):
        PreloadedStream.__init__(self, data)
        self.cuts = bytearray(cuts)  # offsets < 256
        self.k = 0
        self.paused = False

    def rewind(self):
        self.pos = 0
        self.k = 0
        self.paused = False

    def readinto(self, buf, n=-1):
        if n < 0 or n > len(buf):
            n = len(buf)
        if self.k < len(self.cuts):
            stop = self.cuts[self.k]
            if self.pos == stop:
                if not self.paused:
                    self.paused = True
                    return None
                self.paused = False
                self.k += 1
                if self.k < len(self.cuts):
                    stop = self.cuts[self.k]
                else:
                    stop = self.end
            if n > stop - self.pos:
                n = stop - self.pos
        return PreloadedStream.readinto(self, buf, n)


BIG_PUB, BIG_PUB_N = _build(host.encode_publish, 5, TOPIC, bytes(range(120)), qos=1,
                            pid=0x4321)
# max_packet 200: chunks of 128 bytes, so BIG_PUB (more than 128) is read
# head first, then its rest; cut in pieces it is gathered at buf[0:]
PW_DATA = (unhex("40 02 00 01") + bytes(BIG_PUB[:BIG_PUB_N]) + unhex("40 02 00 02")
           + bytes(RX_PUB[:RX_PUB_N]) + unhex("D0 00"))
PW_STREAM = PiecewiseStream(PW_DATA, (2, 30, 60, 61, 140, 150))
PW_FRAMER = codec.Framer(200)
PW_TYPES = (codec.PUBACK, codec.PUBLISH, codec.PUBACK, codec.PUBLISH, codec.PINGRESP)


def _pw_take():
    """read_packet until the next packet; None when the stream ran dry."""
    while True:
        if PW_FRAMER.read_packet(PW_STREAM):
            f = PW_FRAMER
            return control.decode(PKT, f.first, f.buf, f.off, f.off + f.rl, 5)
        if PW_STREAM.pos == PW_STREAM.end:
            return None


def test_framer_read_packet_allocates_nothing():
    assert BIG_PUB_N > PW_FRAMER.c
    for locked in (False, True):
        PW_STREAM.rewind()
        PW_FRAMER.reset()
        for t in PW_TYPES:
            assert (no_alloc(_pw_take) if locked else _pw_take()) == t
            if t == codec.PUBLISH and PKT.pid == 0x4321 and PKT.data_len == 120:
                assert bytes(PKT.buf[PKT.data:PKT.data + PKT.data_len]) == bytes(range(120))
        assert (no_alloc(_pw_take) if locked else _pw_take()) is None
