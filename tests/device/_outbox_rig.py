"""Shared by the outbox tests: a session.Session (the core with receiving and
outbound aliases: client.MQTTClient without its socket) wired to a scripted
broker, with an outbox on a scratch file; "reboots" that build a
fresh core and reopen the same file; a description of the reloaded state to
compare; and a file wrapper that logs every write so a test can replay any
prefix of them (a write torn at any byte). Runs on CPython and MicroPython."""
import os

import _session_rig
from _session_rig import connack, hl
from frugalmqtt.session import Session
from frugalmqtt.outbox import Outbox

# lite.py's state[...] indices the rig reads (a const with a leading
# underscore is no module attribute on MicroPython)
_N = 0
_QUOTA = 1
_T = 14
_STRIDE = 16
_ORD = 26

try:
    _TAG = "".join("%02x" % b for b in os.urandom(4))
except (AttributeError, NotImplementedError):
    _TAG = "0"

_DIR = "/tmp"
_n = [0]


def scratch():
    """A path for a new outbox file (removed by drop())."""
    _n[0] += 1
    return "%s/frugal-outbox-%s-%d.bin" % (_DIR, _TAG, _n[0])


def drop(path):
    try:
        os.remove(path)
    except OSError:
        pass


class Rig(_session_rig.Rig):
    """A session.Session (client.MQTTClient's protocol parts without its
    socket) wired to a scripted broker: it is the session's stream (write()
    records each packet, or only counts them with record=False), a fake
    millisecond clock, and callbacks that record (now(), on_done(),
    on_message(), take(): the session rig's)."""

    def __init__(self, v=5, slots=2, inbound=2, slot_size=64, record=True):
        self.v = v
        self.t = 1000
        self.out = []
        self.sent = 0
        self.record = record
        self.done = []
        self.msgs = []
        self.s = Session("rig", v, max_packet=256, tx_size=256, slots=slots,
                         slot_size=slot_size, inbound=inbound, aliases_out=4, aliases_in=0,
                         clock=self.now)
        self.s.on_done = self.on_done
        self.s.on_message = self.on_message

    def write(self, buf, off, n):
        self.sent += 1
        if self.record:
            self.out.append(bytes(buf[off:off + n]))
        return n

    def close(self):
        pass

    def feed(self, data):
        """Bytes from the broker, framed as a driver does: each whole packet
        into data (its first byte in state[_T]), then input(). Allocates nothing."""
        s = self.s
        r = s.data
        o = 0
        end = len(data)
        while o < end:
            s.state[_T] = data[o]
            o += 1
            rl = 0
            sh = 0
            while True:
                c = data[o]
                o += 1
                rl |= (c & 0x7F) << sh
                sh += 7
                if c < 128:
                    break
            k = 0
            while k < rl:
                r[k] = data[o + k]
                k += 1
            o += rl
            s.input(rl)

    def up(self, clean=True, sp=False, props=None):
        """A new connection: CONNECT, then the broker's CONNACK. Returns what
        the core sent after the CONNACK."""
        self.s.begin(self, clean)
        sent = self.take()
        assert len(sent) == 1 and sent[0][0] == 0x10, hl(sent)
        self.feed(connack(self.v, sp, 0, props))
        assert self.s.state[_QUOTA]  # the server accepted the connection
        return self.take()


def boot(path, size, v=5, slots=2, inbound=2, slot_size=64, record=True):
    """A fresh core with the outbox at path attached (reloaded)."""
    r = Rig(v, slots, inbound, slot_size, record)
    ob = Outbox(path, size)
    ob.attach(r.s)
    return r, ob


def table(c):
    """The core's flows in publish order: (packet id, state, PUBLISH bytes).
    Slot i's bytes in c.buf from i * state[_STRIDE]: its state, the image's
    start (from the slot's), size (2), packet id (2), then the image."""
    res = []
    a = c.state
    b = c.buf
    for k in range(a[_N]):
        s = a[_ORD][k] * a[_STRIDE]
        t = s + b[s + 1]
        res.append((b[s + 4] << 8 | b[s + 5], b[s], bytes(b[t:t + (b[s + 2] << 8 | b[s + 3])])))
    return res


def state(r, ob):
    """What a reboot must keep: the table in publish order, the backlog
    (count, first record seq), the inbound ids."""
    return (table(r.s), ob.backlog, ob.bl_seq, sorted([p for p in r.s.in_pid if p]))


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def write_all(path, data):
    with open(path, "wb") as f:
        f.write(data)


class LogFile:
    """Wraps the outbox's file: every write is logged as (position, bytes);
    a flush marks a point the data was made durable."""

    def __init__(self, f):
        self.f = f
        self.log = []  # (pos, bytes) or None for a flush

    def seek(self, pos, whence=0):
        return self.f.seek(pos, whence)

    def write(self, buf, off=0, n=-1):
        if n < 0:
            n = len(buf) - off
        data = bytes(buf[off:off + n])
        self.log.append((self.f.tell(), data))
        return self.f.write(data)

    def readinto(self, buf, n=-1):
        if n < 0:
            return self.f.readinto(buf)
        tmp = bytearray(n)
        got = self.f.readinto(tmp)
        buf[:got] = tmp[:got]
        return got

    def flush(self):
        self.log.append(None)
        self.f.flush()

    def fileno(self):
        return self.f.fileno()

    def close(self):
        self.f.close()


def apply(image, log, k):
    """The file image after the first k bytes of the logged writes."""
    img = bytearray(image)
    for e in log:
        if k <= 0:
            break
        if e is None:
            continue
        pos, data = e
        m = min(k, len(data))
        img[pos:pos + m] = data[:m]
        k -= m
    return bytes(img)


def durable_points(log):
    """Byte counts (into the logged writes) at which a flush happened."""
    pts = [0]
    k = 0
    for e in log:
        if e is None:
            pts.append(k)
        else:
            k += len(e[1])
    return pts


def broker_drain(r, out=None):
    """Play the broker until the core sends nothing more: PUBACK each QoS 1
    PUBLISH, PUBREC each QoS 2 one, PUBCOMP each PUBREL. Returns the PUBLISH
    packets as (dup, qos, pid, topic, payload), in the order sent."""
    from _session_rig import ack, _PKT
    from frugalmqtt_host import codec as host
    from frugalmqtt_host import server as SV
    from frugalmqtt_host.ref.codec import PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP
    got = []
    if out is None:
        out = r.take()
    while out:
        for p in out:
            t = SV.decode_packet(_PKT, p, 0, len(p), r.v)
            if t == PUBLISH:
                got.append((_PKT.dup, _PKT.qos, _PKT.pid, bytes(host.topic_bytes(_PKT)),
                            bytes(host.payload_bytes(_PKT))))
                r.feed(ack(r.v, PUBACK if _PKT.qos == 1 else PUBREC, _PKT.pid))
            elif t == PUBREL:
                r.feed(ack(r.v, PUBCOMP, _PKT.pid))
        out = r.take()
    return got
