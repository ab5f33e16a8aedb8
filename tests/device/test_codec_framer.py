"""codec.Framer: assembling packets from a byte stream.

host.feed() (copies from a buffer), host.read_from() (a stream with
readinto, byte by byte) and Framer.read_packet() (what the clients use) must
yield the same packets whatever the split of the stream, refuse an oversize packet after reading only its fixed header, and
reject a remaining length longer than 4 bytes. Runs unchanged on CPython and
MicroPython.
"""
from _util import raises, unhex
from frugalmqtt import codec, control, publish
from frugalmqtt import props as P
from frugalmqtt_host import codec as host

PKT = publish.Packet()


def h(b):
    return " ".join("%02X" % x for x in b)


def _encode(fn, *args, **kw):
    b = bytearray(400)
    n = fn(b, 0, *args, **kw)
    return bytes(b[:n])


# A stream of 5.0 packets: a PUBLISH whose remaining length takes two bytes,
# an ack, a zero-length PINGRESP, a small PUBLISH, a SUBACK.
BIG_PAYLOAD = bytes(i & 0xFF for i in range(200))
P_BIG = _encode(host.encode_publish, 5, "sensors/t1", BIG_PAYLOAD, qos=1, pid=0x1234,
                props=((P.MESSAGE_EXPIRY, 300), (P.USER_PROPERTY, ("k", "v"))))
P_ACK = unhex("40 04 64 4A 10 00")
P_PING = unhex("D0 00")
P_SMALL = _encode(host.encode_publish, 5, "a/b", b"hi")
P_SUBACK = unhex("90 05 00 0A 00 01 80")
PACKETS = (P_BIG, P_ACK, P_PING, P_SMALL, P_SUBACK, P_BIG)
STREAM = b"".join(PACKETS)


def _split(packet):
    """(first byte, remaining length, body) of a whole packet."""
    c = codec.Cur()
    c.set(packet, 1, len(packet))
    rl = c.vbi()
    assert c.pos + rl == len(packet)
    return packet[0], rl, packet[c.pos:]


EXPECTED = [_split(p) for p in PACKETS]


def test_stream_fixture():
    assert P_BIG[1] & 0x80 and not P_BIG[2] & 0x80  # two-byte remaining length
    assert _split(P_BIG)[1] > 200
    assert len(STREAM) == sum(len(p) for p in PACKETS)


def _got(f):
    assert host.done(f)
    return (f.first, f.rl, bytes(f.buf[:f.rl]))


def _check_decodes(got):
    """Each assembled packet decodes to what was encoded."""
    assert got == EXPECTED, [(g[0], g[1]) for g in got]
    for first, rl, body in got:
        t = control.decode(PKT, first, body, 0, rl, 5)
        assert t == first >> 4
        if first == P_BIG[0]:
            assert PKT.pid == 0x1234 and host.topic_bytes(PKT) == b"sensors/t1"
            assert host.payload_bytes(PKT) == BIG_PAYLOAD
            assert PKT.props.get_int(P.MESSAGE_EXPIRY) == 300
            assert host.user_properties(PKT.props) == [("k", "v")]
        elif t == codec.PUBACK:
            assert PKT.pid == 0x644A and PKT.reason == 0x10


def _feed_chunks(f, data, sizes):
    """Feed data in chunks of the given sizes (cycled); collect packets."""
    got = []
    off = 0
    i = 0
    while off < len(data):
        end = off + sizes[i % len(sizes)]
        if end > len(data):
            end = len(data)
        i += 1
        while off < end:
            new = host.feed(f, data, off, end)
            assert off < new <= end
            off = new
            if host.done(f):
                got.append(_got(f))
    return got


def test_feed_one_byte_at_a_time():
    f = codec.Framer(512)
    got = []
    for i in range(len(STREAM)):
        assert host.feed(f, STREAM, i, i + 1) == i + 1
        if host.done(f):
            got.append(_got(f))
    _check_decodes(got)


def test_feed_byte_by_byte_done_only_at_last_byte():
    f = codec.Framer(512)
    for i in range(len(P_BIG) - 1):
        host.feed(f, P_BIG, i, i + 1)
        assert not host.done(f), i
    host.feed(f, P_BIG, len(P_BIG) - 1, len(P_BIG))
    assert _got(f) == EXPECTED[0]


def test_feed_arbitrary_splits():
    f = codec.Framer(512)
    for sizes in ((2,), (3,), (7,), (64,), (1, 2, 3, 5, 8, 13), (250, 1), (len(STREAM),)):
        _check_decodes(_feed_chunks(f, STREAM, sizes))
    # pseudo-random chunk sizes (a fixed LCG, same on both runtimes)
    x = 12345
    for _ in range(5):
        sizes = []
        for _ in range(40):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            sizes.append(1 + (x >> 16) % 37)
        _check_decodes(_feed_chunks(f, STREAM, sizes))


def test_feed_every_two_way_split():
    f = codec.Framer(512)
    data = P_BIG + P_ACK
    for cut in range(1, len(data)):
        got = []
        for lo, hi in ((0, cut), (cut, len(data))):
            off = lo
            while off < hi:
                off = host.feed(f, data, off, hi)
                if host.done(f):
                    got.append(_got(f))
        assert got == EXPECTED[:2], cut


def test_feed_remaining_length_split_across_feeds():
    f = codec.Framer(512)
    first, rl, body = EXPECTED[0]
    assert host.feed(f, P_BIG, 0, 2) == 2  # type byte and the first remaining-length byte
    assert not host.done(f) and f.rl != rl
    assert host.feed(f, P_BIG, 2, 3) == 3  # second remaining-length byte
    assert not host.done(f) and f.rl == rl and f.first == first
    assert host.feed(f, P_BIG, 3, len(P_BIG)) == len(P_BIG)
    assert _got(f) == EXPECTED[0]


def test_feed_back_to_back_returns_offset_after_each_packet():
    f = codec.Framer(512)
    off = 0
    got = []
    for p in PACKETS:
        new = host.feed(f, STREAM, off, len(STREAM))
        assert new == off + len(p), (off, new, len(p))
        assert host.done(f)
        got.append(_got(f))
        off = new
    assert off == len(STREAM)
    _check_decodes(got)
    # feeding nothing after a complete packet starts a new, empty one
    assert host.feed(f, STREAM, off, off) == off and not host.done(f)


def test_feed_zero_length_body_completes_on_header():
    f = codec.Framer(16)
    assert host.feed(f, P_PING, 0, 2) == 2 and host.done(f) and f.rl == 0 and f.first == 0xD0
    assert control.decode(PKT, f.first, f.buf, 0, f.rl, 4) == codec.PINGRESP


def test_feed_oversize_refused_after_fixed_header():
    # 0x30, RL 200: 203 bytes, over a 100-byte maximum. The error comes with
    # the last remaining-length byte, before any body byte.
    data = unhex("30 C8 01") + bytes(200)
    f = codec.Framer(100)
    assert host.feed(f, data, 0, 1) == 1
    assert host.feed(f, data, 1, 2) == 2
    e = raises(codec.MQTTError, host.feed, f, data, 2, len(data))
    assert e.reason == 0x95
    # all at once: same
    e = raises(codec.MQTTError, host.feed, codec.Framer(100), data, 0, len(data))
    assert e.reason == 0x95


def test_max_packet_boundary():
    # the limit is on the whole packet (fixed header included)
    f = codec.Framer(len(P_ACK))
    assert host.feed(f, P_ACK, 0, len(P_ACK)) == len(P_ACK) and _got(f) == EXPECTED[1]
    f = codec.Framer(len(P_ACK) - 1)
    assert raises(codec.MQTTError, host.feed, f, P_ACK, 0, len(P_ACK)).reason == 0x95
    f = codec.Framer(len(P_BIG))
    assert host.feed(f, P_BIG, 0, len(P_BIG)) == len(P_BIG) and _got(f) == EXPECTED[0]
    f = codec.Framer(len(P_BIG) - 1)
    assert raises(codec.MQTTError, host.feed, f, P_BIG, 0, len(P_BIG)).reason == 0x95
    # the largest remaining length is a valid header, just too large
    f = codec.Framer(1000)
    assert raises(codec.MQTTError, host.feed, f, unhex("30 FF FF FF 7F"), 0, 5).reason == 0x95


def test_remaining_length_five_bytes_malformed():
    data = unhex("30 FF FF FF FF 7F 00")
    f = codec.Framer(1000)
    e = None
    consumed = 0
    for i in range(len(data)):
        try:
            host.feed(f, data, i, i + 1)
        except codec.MQTTError as err:
            e = err
            consumed = i + 1
            break
    assert e is not None and e.reason == 0x81
    assert consumed <= 6  # detected at the fourth or fifth length byte, never later
    s = Stream([unhex("30 80 80 80 80 01")])
    e = raises(codec.MQTTError, host.read_from, codec.Framer(1000), s)
    assert e.reason == 0x81 and s.consumed <= 6


def test_remaining_length_non_minimal_malformed():
    for hx in ("30 80 00", "30 FF 00", "40 82 00 00 0A", "C0 80 80 00"):
        data = unhex(hx)
        e = raises(codec.MQTTError, host.feed, codec.Framer(100), data, 0, len(data))
        assert e.reason == 0x81, hx
        e = raises(codec.MQTTError, host.read_from, codec.Framer(100), Stream([data]))
        assert e.reason == 0x81, hx


# ---- read_from ----------------------------------------------------------------------------

class Stream:
    """A fake non-blocking socket. `chunks` become readable one after the
    other: a bytes chunk is read (possibly over several calls); a None chunk
    makes one readinto() return None (nothing available now); after the last
    chunk readinto() returns 0 (peer closed), or None if eof is False.
    Records every request and how many bytes were handed out."""

    def __init__(self, chunks, eof=True):
        self.chunks = list(chunks)
        self.cur = b""
        self.pos = 0
        self.eof = eof
        self.requests = []  # bytes asked for, per call
        self.consumed = 0
        self.nones = 0

    def readinto(self, buf, n=-1):
        want = len(buf) if n < 0 else min(n, len(buf))
        self.requests.append(want)
        while self.pos >= len(self.cur):
            if not self.chunks:
                if self.eof:
                    return 0
                self.nones += 1
                return None
            c = self.chunks.pop(0)
            if c is None:
                self.nones += 1
                return None
            self.cur = c
            self.pos = 0
        k = min(want, len(self.cur) - self.pos)
        buf[0:k] = self.cur[self.pos:self.pos + k]
        self.pos += k
        self.consumed += k
        return k


def _read_all(f, s, packet=False):
    """host.read_from (f.read_packet if packet) until EOF; returns (packets,
    number of False returns)."""
    got = []
    falses = 0
    while True:
        try:
            r = f.read_packet(s) if packet else host.read_from(f, s)
        except EOFError:
            return got, falses
        if r:
            got.append(_got_at(f) if packet else _got(f))
        else:
            assert r is False
            falses += 1
            assert falses < 10000


def test_read_from_whole_stream():
    f = codec.Framer(512)
    got, falses = _read_all(f, Stream([STREAM]))
    assert falses == 0
    _check_decodes(got)


def test_read_from_reads_header_bytewise_and_body_at_once():
    s = Stream([STREAM])
    f = codec.Framer(512)
    assert host.read_from(f, s) is True
    first, rl, body = EXPECTED[0]
    # type byte, two remaining-length bytes, then the body in one request
    assert s.requests == [1, 1, 1, rl], s.requests
    assert s.consumed == len(P_BIG)  # nothing of the next packet was read
    assert _got(f) == EXPECTED[0]
    assert host.read_from(f, s) is True and s.consumed == len(P_BIG) + len(P_ACK)
    assert _got(f) == EXPECTED[1]


def test_read_from_nonblocking_chunks_same_packets():
    f = codec.Framer(512)
    for size in (1, 2, 3, 5, 17, 100):
        chunks = []
        for i in range(0, len(STREAM), size):
            chunks.append(STREAM[i:i + size])
            chunks.append(None)  # EAGAIN between every chunk
        s = Stream(chunks)
        got, falses = _read_all(f, s)
        assert falses == s.nones and falses == len(chunks) // 2, size
        _check_decodes(got)


def test_read_from_body_split_across_reads():
    first, rl, body = EXPECTED[0]
    head = len(P_BIG) - rl
    a = head + 10
    b = head + 150
    s = Stream([P_BIG[:a], None, P_BIG[a:b], None, None, P_BIG[b:]], eof=False)
    f = codec.Framer(512)
    assert host.read_from(f, s) is False and not host.done(f)
    assert f.got == 10 and s.consumed == a
    assert host.read_from(f, s) is False and f.got == 150
    assert host.read_from(f, s) is False and f.got == 150
    assert host.read_from(f, s) is True
    assert _got(f) == EXPECTED[0] and s.consumed == len(P_BIG)
    # after the packet: nothing available now, then the peer closes
    assert host.read_from(f, s) is False and not host.done(f)
    s.eof = True
    raises(EOFError, host.read_from, f, s)


def test_read_from_remaining_length_split_across_reads():
    s = Stream([P_BIG[:2], None, P_BIG[2:]])
    f = codec.Framer(512)
    assert host.read_from(f, s) is False and not host.done(f)
    assert host.read_from(f, s) is True and _got(f) == EXPECTED[0]


def test_read_from_eof():
    raises(EOFError, host.read_from, codec.Framer(64), Stream([]))
    # closed in the middle of the header or the body
    raises(EOFError, host.read_from, codec.Framer(512), Stream([P_BIG[:2]]))
    raises(EOFError, host.read_from, codec.Framer(512), Stream([P_BIG[:50]]))
    f = codec.Framer(512)
    s = Stream([P_ACK + P_BIG[:1]])
    assert host.read_from(f, s) is True and _got(f) == EXPECTED[1]
    raises(EOFError, host.read_from, f, s)


def test_read_from_oversize_refused_before_body():
    data = unhex("30 C8 01") + bytes(200)
    s = Stream([data])
    e = raises(codec.MQTTError, host.read_from, codec.Framer(100), s)
    assert e.reason == 0x95
    assert s.consumed == 3  # the fixed header only
    assert s.requests == [1, 1, 1]  # no request for the body
    # the same with an oversize PUBLISH that would otherwise fit in a bigger framer
    s = Stream([P_BIG])
    e = raises(codec.MQTTError, host.read_from, codec.Framer(len(P_BIG) - 1), s)
    assert e.reason == 0x95 and s.consumed == 3 and max(s.requests) == 1


def test_read_from_decode_in_place():
    # The device path: read_from, then decode the body where it lies.
    f = codec.Framer(512)
    s = Stream([P_SMALL + P_ACK])
    assert host.read_from(f, s)
    assert control.decode(PKT, f.first, f.buf, 0, f.rl, 5) == codec.PUBLISH
    assert PKT.buf is f.buf and bytes(f.buf[PKT.topic:PKT.topic + PKT.topic_len]) == b"a/b"
    assert host.payload_bytes(PKT) == b"hi"
    assert host.read_from(f, s)
    assert control.decode(PKT, f.first, f.buf, 0, f.rl, 5) == codec.PUBACK
    assert PKT.pid == 0x644A and PKT.reason == 0x10


# ---- read_packet ---------------------------------------------------------------------------
# The clients' reader: one read takes what the stream has (up to f.c bytes, or the
# rest of a packet larger than that); the packets in it come out of the following
# calls without reading; a packet split across reads is joined. Body at buf[off:].

def _got_at(f):
    assert host.done(f)
    return (f.first, f.rl, bytes(f.buf[f.off:f.off + f.rl]))


def test_read_packet_whole_stream():
    f = codec.Framer(512)
    s = Stream([STREAM])
    got, falses = _read_all(f, s, True)
    assert falses == 0
    _check_decodes(got)
    # f.c bytes at a time, or the rest of the large packet: far fewer reads
    # than packets' header bytes
    assert max(s.requests) <= 512 and len(s.requests) <= 6, s.requests


def test_read_packet_many_packets_from_one_read():
    acks = b"".join(unhex("40 02 00") + bytes((i + 1,)) for i in range(20))
    s = Stream([acks], eof=False)
    f = codec.Framer(256)
    for i in range(20):
        assert f.read_packet(s) is True
        assert f.first == 0x40 and f.rl == 2 and f.buf[f.off + 1] == i + 1
        assert len(s.requests) == 1  # all twenty came with the first read
    assert f.read_packet(s) is False and not host.done(f)
    assert s.consumed == len(acks)


def test_read_packet_nonblocking_chunks_same_packets():
    f = codec.Framer(512)
    for size in (1, 2, 3, 5, 17, 100, 127, 128, 129, 300):
        chunks = []
        for i in range(0, len(STREAM), size):
            chunks.append(STREAM[i:i + size])
            chunks.append(None)  # EAGAIN between every chunk
        got, falses = _read_all(f, Stream(chunks), True)
        _check_decodes(got)
        f.reset()


def test_read_packet_every_two_way_split():
    f = codec.Framer(512)
    data = P_SMALL + P_BIG + P_ACK + P_PING
    want = [_split(p) for p in (P_SMALL, P_BIG, P_ACK, P_PING)]
    for cut in range(1, len(data)):
        f.reset()
        got, falses = _read_all(f, Stream([data[:cut], None, data[cut:]]), True)
        assert got == want, cut


def test_read_packet_every_three_way_split_small_framer():
    # max_packet 40: f.c is 40, so P_SMALL and the acks are small, a 40-byte
    # PUBLISH is not (its rest is asked for on its own)
    big = _encode(host.encode_publish, 5, "a/b", bytes(range(32)))
    assert len(big) == 40
    data = P_ACK + big + P_SMALL + big + P_PING
    want = [_split(p) for p in (P_ACK, big, P_SMALL, big, P_PING)]
    f = codec.Framer(40)
    assert f.c == 40
    for a in range(1, len(data), 3):
        for b in range(a + 1, len(data), 5):
            f.reset()
            got, falses = _read_all(f, Stream([data[:a], None, data[a:b], None, data[b:]]), True)
            assert got == want, (a, b)


def test_read_packet_large_packet_in_many_pieces():
    # P_BIG is larger than f.c: after its head, its rest is asked for at
    # once; when the network gives it in pieces, they are gathered in place.
    f = codec.Framer(512)
    assert len(P_BIG) > f.c
    for step in (1, 7, 50, 100, 129):
        chunks = []
        data = P_ACK + P_BIG + P_SMALL + P_BIG
        for i in range(0, len(data), step):
            chunks.append(data[i:i + step])
            chunks.append(None)
        f.reset()
        got, falses = _read_all(f, Stream(chunks), True)
        assert got == [_split(p) for p in (P_ACK, P_BIG, P_SMALL, P_BIG)], step


def test_read_packet_reads_no_further_than_a_large_packet():
    f = codec.Framer(512)
    s = Stream([P_BIG + P_ACK], eof=False)
    assert f.read_packet(s) is True and _got_at(f) == EXPECTED[0]
    assert s.requests == [f.c, len(P_BIG) - f.c]  # a chunk, then exactly the rest
    assert s.consumed == len(P_BIG)
    assert f.read_packet(s) is True and _got_at(f) == EXPECTED[1]


def test_read_packet_oversize_refused_before_reading_more():
    data = unhex("30 C8 01") + bytes(200)
    # the fixed header arrives alone: refused with no further request
    s = Stream([data[:3], None, data[3:]])
    f = codec.Framer(100)
    e = raises(codec.MQTTError, f.read_packet, s)
    assert e.reason == 0x95 and s.consumed == 3
    # with more behind it in the same read: nothing read after that read
    s = Stream([data])
    e = raises(codec.MQTTError, codec.Framer(100).read_packet, s)
    assert e.reason == 0x95 and len(s.requests) == 1 and s.consumed <= 100
    # exactly the maximum is accepted, one byte over is not
    f = codec.Framer(len(P_BIG))
    assert f.read_packet(Stream([P_BIG])) is True and _got_at(f) == EXPECTED[0]
    e = raises(codec.MQTTError, codec.Framer(len(P_BIG) - 1).read_packet, Stream([P_BIG]))
    assert e.reason == 0x95


def test_read_packet_malformed_remaining_length():
    for hx in ("30 80 80 80 80 01", "30 FF FF FF FF 7F 00"):
        e = raises(codec.MQTTError, codec.Framer(1000).read_packet, Stream([unhex(hx)]))
        assert e.reason == 0x81, hx
    for hx in ("30 80 00", "30 FF 00", "40 82 00 00 0A", "C0 80 80 00"):
        data = unhex(hx)
        e = raises(codec.MQTTError, codec.Framer(100).read_packet, Stream([data]))
        assert e.reason == 0x81, hx
        # the same with the length bytes split across reads
        s = Stream([data[:2], None, data[2:]])
        f = codec.Framer(100)
        assert f.read_packet(s) is False
        e = raises(codec.MQTTError, f.read_packet, s)
        assert e.reason == 0x81, hx


def test_read_packet_eof():
    raises(EOFError, codec.Framer(64).read_packet, Stream([]))
    raises(EOFError, codec.Framer(512).read_packet, Stream([P_BIG[:2]]))
    raises(EOFError, codec.Framer(512).read_packet, Stream([P_BIG[:50]]))
    raises(EOFError, codec.Framer(512).read_packet, Stream([P_BIG[:150]]))
    f = codec.Framer(512)
    s = Stream([P_ACK + P_BIG[:1]])
    assert f.read_packet(s) is True and _got_at(f) == EXPECTED[1]
    raises(EOFError, f.read_packet, s)


def test_read_packet_tiny_max_packet():
    f = codec.Framer(4)
    got, falses = _read_all(f, Stream([P_PING + unhex("40 02 00 07") + P_PING]), True)
    assert got == [(0xD0, 0, b""), (0x40, 2, b"\x00\x07"), (0xD0, 0, b"")]
    raises(codec.MQTTError, codec.Framer(4).read_packet, Stream([P_ACK]))


def test_read_packet_reset_drops_buffered_bytes():
    f = codec.Framer(512)
    s = Stream([P_ACK + P_SMALL[:5]], eof=False)
    assert f.read_packet(s) is True
    assert f.read_packet(s) is False  # half of P_SMALL buffered
    f.reset()  # a new connection
    s = Stream([P_PING])
    assert f.read_packet(s) is True and _got_at(f) == EXPECTED[2]


def test_read_packet_decode_in_place():
    f = codec.Framer(512)
    s = Stream([P_SMALL + P_ACK])
    assert f.read_packet(s)
    assert control.decode(PKT, f.first, f.buf, f.off, f.off + f.rl, 5) == codec.PUBLISH
    assert PKT.buf is f.buf and bytes(f.buf[PKT.topic:PKT.topic + PKT.topic_len]) == b"a/b"
    assert host.payload_bytes(PKT) == b"hi"
    assert f.read_packet(s)
    assert control.decode(PKT, f.first, f.buf, f.off, f.off + f.rl, 5) == codec.PUBACK
    assert PKT.pid == 0x644A and PKT.reason == 0x10
