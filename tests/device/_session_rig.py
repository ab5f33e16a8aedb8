"""The scripted-broker rig shared by the session tests: broker packets built
by frugalmqtt_host.packets, fed through the session's framer, and a write()
that records every packet the session sends. Runs on CPython and MicroPython."""
from _util import raises
from frugalmqtt import codec
from frugalmqtt import props as PR
from frugalmqtt import publish as P
from frugalmqtt import session as S
from frugalmqtt.base import ClientBase
from frugalmqtt.codec import MQTTError
from frugalmqtt_host import codec as host
from frugalmqtt_host import packets
from frugalmqtt_host import server as SV
# The broker's packets, under the names the session tests use
from frugalmqtt_host.packets import ack, connack, suback  # noqa: F401
from frugalmqtt_host.packets import publish as pub  # noqa: F401

BOTH = (4, 5)
_PKT = P.Packet()


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


def alias_of(packet, v=5):
    """The Topic Alias a PUBLISH carries (0: none) and its topic length."""
    t = SV.decode_packet(_PKT, packet, 0, len(packet), v)
    assert t == codec.PUBLISH, h(packet)
    return _PKT.props.get_int(PR.TOPIC_ALIAS, 0), _PKT.topic_len


def disconnect(reason=0):
    """A 5.0 DISCONNECT from the broker."""
    return packets.disconnect(5, reason)


class Rig:
    """A Session wired to a scripted broker: a write() that records each
    packet, a fake millisecond clock, and callbacks that record."""

    def __init__(self, v=5, **sizes):
        self.v = v
        self.t = 1000
        self.out = []
        self.done = []
        self.msgs = []
        self.fail_writes = False  # write() raises OSError, as a dead link does
        self.s = S.Session("rig", self.write, v, clock=self.now, **sizes)
        self.s.on_done = self.on_done
        self.s.on_message = self.on_message

    def write(self, buf, off, n):
        if self.fail_writes:
            raise OSError("link down")
        self.out.append(bytes(buf[off:off + n]))

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

    def feed(self, data):
        """Bytes from the broker: every complete packet is handled in turn."""
        f = self.s.framer
        off = 0
        types = []
        while off < len(data):
            off = host.feed(f, data, off, len(data))
            if host.done(f):
                types.append(self.s.receive())
        return types

    def up(self, clean=True, sp=False, props=None, keepalive=60):
        """A new network connection: CONNECT, then the broker's CONNACK.
        Returns what the session sent after the CONNACK."""
        self.s.connect(keepalive, clean)
        sent = self.take()
        assert len(sent) == 1 and sent[0][0] == 0x10, hl(sent)
        self.feed(connack(self.v, sp, 0, props))
        assert self.s.connected
        return self.take()

    def protocol_error(self, data, reason):
        """Feed data that breaks the protocol: MQTTError(reason), DISCONNECT
        with that reason on 5.0, nothing on 3.1.1, the connection over."""
        e = raises(MQTTError, self.feed, data)
        assert e.reason == reason, "reason 0x%02X, want 0x%02X" % (e.reason, reason)
        want = [bytes((0xE0, 1, reason))] if self.v == 5 else []
        got = self.take()
        assert got == want, "v%d: %r" % (self.v, hl(got))
        assert not self.s.connected and not self.s.link
        return e


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


def client(v, max_packet=1024, client_id="dev", **sizes):
    """The full client's read path with no socket: a ClientBase whose session
    writes into the returned list. Feed it with read_all()."""
    c = ClientBase(client_id, "broker", version=v, max_packet=max_packet, **sizes)
    out = []
    c.s.write = lambda b, o, n: out.append(bytes(b[o:o + n]))
    return c, out


def read_all(c, data):
    """Server bytes through ClientBase._read (which answers what the framer
    refuses) and Session.receive, as client.MQTTClient._poll runs them."""
    st = Stream(data)
    while c.s.link and c._read(st):
        c.s.receive()
