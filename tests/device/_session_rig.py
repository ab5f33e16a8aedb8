"""The scripted-broker rig shared by the session tests: a sans-I/O
frugalmqtt.session.Session driven as a driver does it. Broker packets are
built by frugalmqtt_host.packets and framed here, on the host side, into the
session's rx (first byte in `first`) before packet(rl); the rig itself is the
stream, its write() recording every packet the session sends. Runs on
CPython and MicroPython.

ref_client()/ref_read_all() keep the reference stack (frugalmqtt_host.ref,
the old implementation) runnable the same way, for the differential test."""
from array import array
from _util import raises
from frugalmqtt import session as S
from frugalmqtt.props import build
from frugalmqtt.err import MQTTError
from frugalmqtt_host.ref import codec
from frugalmqtt_host.ref import props as PR
from frugalmqtt_host.ref import publish as P
from frugalmqtt_host.ref.base import ClientBase
from frugalmqtt_host import packets
from frugalmqtt_host import server as SV
# The broker's packets, under the names the session tests use
from frugalmqtt_host.packets import ack, connack, suback  # noqa: F401
from frugalmqtt_host.packets import publish as pub  # noqa: F401

BOTH = (4, 5)
_PKT = P.Packet()
_HOLD = 4  # lite._HOLD: a stored message not sent on this connection
# lite.py's state[...] indices the rig reads
_N = 0
_QUOTA = 1
_V = 10
_T = 14
_STRIDE = 16
_ORD = 26
_HELLO = 27


def fail(s, reason):
    """A protocol error the driver finds while framing (as lite.Publisher.poll
    answers it): DISCONNECT with the reason on 5.0, close on 3.1.1; the
    MQTTError to raise."""
    if s.state[_V] == 5:
        s.disconnect(reason)
    else:
        s.close()
    e = MQTTError(reason)
    e.reason = reason
    return e


def keepalive_of(s):
    """The Keep Alive the session's CONNECT carries."""
    h = s.state[_HELLO]
    return h[13] << 8 | h[14]


def h(b):
    """bytes -> 'AA BB' for assertion messages."""
    return " ".join("%02X" % x for x in b)


def hl(raws):
    return [h(p) for p in raws]


def u16(n):
    return bytes(((n >> 8) & 0xFF, n & 0xFF))


def rel(pid):
    """PUBREL as both versions send it on success (short form) [MQTT-3.6.1-1]."""
    return b"\x62\x02" + u16(pid)


def props(pairs, where=3):
    """(id, value) pairs -> the raw property bytes the session takes."""
    return build(pairs, where) if pairs else None


def alias_of(packet, v=5):
    """The Topic Alias a PUBLISH carries (0: none) and its topic length."""
    t = SV.decode_packet(_PKT, packet, 0, len(packet), v)
    assert t == codec.PUBLISH, h(packet)
    return _PKT.props.get_int(PR.TOPIC_ALIAS, 0), _PKT.topic_len


def disconnect(reason=0):
    """A 5.0 DISCONNECT from the broker."""
    return packets.disconnect(5, reason)


def in_flight(s):
    """QoS 1/2 messages sent on this connection and not yet acknowledged
    (the table's flows that are not held back)."""
    a = s.state
    k = 0
    for j in range(a[_N]):
        if s.buf[a[_ORD][j] * a[_STRIDE]] != _HOLD:
            k += 1
    return k


def frame(s, data, off, end):
    """Frame the packet at data[off:end] into s.data / s.state[_T] and hand it
    to s.input(), as a driver does (lite.Publisher.poll): a packet over our
    Maximum Packet Size (fixed header counted) is refused before its body is
    read [MQTT-3.1.2-24]. Returns the offset after it, or -1 when data holds
    only part of it (a driver waits for more). Allocates nothing itself."""
    if off + 2 > end:
        return -1
    first = data[off]
    rl = 0
    sh = 0
    o = off + 1
    while True:
        if o >= end:
            return -1
        c = data[o]
        o += 1
        rl |= (c & 0x7F) << sh
        sh += 7
        if c < 0x80:
            break
        if sh == 28:
            raise fail(s, 0x81)  # a Variable Byte Integer has 4 bytes at most
    if rl + o - off > len(s.data):
        raise fail(s, 0x95)
    if o + rl > end:
        return -1
    s.state[_T] = first
    r = s.data
    i = 0
    while i < rl:
        r[i] = data[o + i]
        i += 1
    s.input(rl)
    return o + rl


class Capture:
    """A session's stream for the heap-locked tests: write() copies each
    packet into one fixed buffer (no new objects)."""

    def __init__(self, size, count):
        self.buf = bytearray(size)
        self.ends = array("H", bytes(2 * count))
        self.n = 0
        self.used = 0

    def write(self, buf, off, n):
        b = self.buf
        o = self.used
        i = 0
        while i < n:
            b[o + i] = buf[off + i]
            i += 1
        self.used = o + n
        self.ends[self.n] = o + n
        self.n += 1
        return n

    def close(self):
        pass

    def clear(self):
        self.n = 0
        self.used = 0

    def packets(self):
        out = []
        start = 0
        for i in range(self.n):
            out.append(bytes(self.buf[start:self.ends[i]]))
            start = self.ends[i]
        return out

    def take(self):
        out = self.packets()
        self.clear()
        return out


class Input:
    """Server bytes in one fixed buffer, framed into a session by drain()
    without allocating."""

    def __init__(self, size):
        self.data = bytearray(size)
        self.len = 0

    def load(self, data):
        self.data[0:len(data)] = data
        self.len = len(data)

    def drain(self, s):
        o = 0
        while 0 <= o < self.len:
            o = frame(s, self.data, o, self.len)
        self.len = 0


class Rig:
    """A Session wired to a scripted broker: the rig is its stream (write()
    records each packet, close() counts), a fake millisecond clock, and
    callbacks that record. keepalive and the sizes go to the Session, which
    builds its CONNECT once."""

    def __init__(self, v=5, keepalive=60, client_id="rig", **sizes):
        self.v = v
        self.t = 1000
        self.out = []
        self.done = []
        self.msgs = []
        self.closed = 0
        self.connects = 0
        self.fail_writes = False  # write() raises OSError, as a dead link does
        self.client_id = client_id
        self.sizes = sizes
        self.make(keepalive)

    def make(self, keepalive):
        s = self.s = S.Session(self.client_id, self.v, keepalive=keepalive, clock=self.now,
                               **self.sizes)
        s.on_done = self.on_done
        s.on_message = self.on_message

    def write(self, buf, off, n):
        if self.fail_writes:
            raise OSError("link down")
        self.out.append(bytes(buf[off:off + n]))
        return n

    def close(self):
        self.closed += 1

    def now(self):
        return self.t

    def on_done(self, pid, reason):
        self.done.append((pid, reason))

    def on_message(self, m):
        self.msgs.append((bytes(m.topic), bytes(m.payload), m.qos, m.dup, m.retain, m.pid))

    def take(self):
        out = self.out
        self.out = []
        return out

    def in_flight(self):
        return in_flight(self.s)

    def quota_left(self):
        """Send quota left: the server's Receive Maximum (bounded by the
        table) less the flows sent on this connection [MQTT-4.9.0-2]."""
        return self.s.quota - in_flight(self.s)

    def begin(self, clean=True):
        """A new network connection: the session sends CONNECT."""
        self.connects += 1
        self.s.begin(self, clean)

    def feed(self, data):
        """Bytes from the broker: every complete packet is handled in turn,
        while the connection is open (a driver reads nothing from a closed
        stream)."""
        off = 0
        while off >= 0 and off < len(data) and self.s.sock is not None:
            off = frame(self.s, data, off, len(data))

    def up(self, clean=True, sp=False, props=None, keepalive=None):
        """A new network connection: CONNECT, then the broker's CONNACK.
        Returns what the session sent after the CONNACK. A keep-alive other
        than the session's is only possible before its first connection."""
        if keepalive is not None and keepalive != keepalive_of(self.s):
            assert not self.connects, "keepalive is fixed once connected"
            m = self.s.manual_ack
            self.make(keepalive)
            self.s.manual_ack = m
        self.begin(clean)
        sent = self.take()
        assert len(sent) == 1 and sent[0][0] == 0x10, hl(sent)
        self.feed(connack(self.v, sp, 0, props))
        assert self.s.up
        return self.take()

    def protocol_error(self, data, reason):
        """Feed data that breaks the protocol: MQTTError(reason), DISCONNECT
        with that reason on 5.0, nothing on 3.1.1, the connection over."""
        e = raises(MQTTError, self.feed, data)
        assert e.reason == reason, "reason 0x%02X, want 0x%02X" % (e.reason, reason)
        want = [bytes((0xE0, 1, reason))] if self.v == 5 else []
        got = self.take()
        assert got == want, "v%d: %r" % (self.v, hl(got))
        assert not self.s.up and self.s.sock is None
        return e


def client(v, max_packet=1024, client_id="dev", **sizes):
    """The new Session as a driver runs it, writing into the returned list:
    (rig, rig.out). Feed it with read_all()."""
    r = Rig(v, client_id=client_id, max_packet=max_packet, **sizes)
    return r, r.out


def read_all(c, data):
    """Server bytes framed into the Session, as a driver reads them."""
    c.feed(data)


class Stream:
    """A non-blocking stream of scripted server bytes (None: nothing now)."""

    def __init__(self, data):
        self.data = data
        self.pos = 0

    def readinto(self, buf, n=0):
        n = min(n or len(buf), len(self.data) - self.pos)
        if not n:
            return None
        i = 0
        while i < n:
            buf[i] = self.data[self.pos + i]
            i += 1
        self.pos += n
        return n


def ref_client(v, max_packet=1024, client_id="dev", **sizes):
    """The reference stack's read path with no socket: a ClientBase whose
    session writes into the returned list. Feed it with ref_read_all()."""
    c = ClientBase(client_id, "broker", version=v, max_packet=max_packet, **sizes)
    out = []
    c.s.write = lambda b, o, n: out.append(bytes(b[o:o + n]))
    return c, out


def ref_read_all(c, data):
    """Server bytes through ClientBase._read (which answers what the framer
    refuses) and Session.receive, as the old client ran them."""
    st = Stream(data)
    while c.s.link and c._read(st):
        c.s.receive()
