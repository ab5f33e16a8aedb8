"""Shared by the outbox tests: a session (the scripted-broker Rig) with an
outbox on a scratch file, "reboots" that build a fresh session and reopen the
same file, a description of the reloaded state to compare, and a file
wrapper that logs every write so a test can replay any prefix of them (a
write torn at any byte). Runs on CPython and MicroPython."""
import os

from _session_rig import Rig
from frugalmqtt.outbox import Outbox

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


def boot(path, size, v=5, slots=2, inbound=2, slot_size=64):
    """A fresh session with the outbox at path attached (reloaded)."""
    r = Rig(v, slots=slots, inbound=inbound, slot_size=slot_size)
    ob = Outbox(path, size)
    ob.attach(r.s)
    return r, ob


def state(r, ob):
    """What a reboot must keep: slots in publish order as (packet id, state,
    PUBLISH bytes), the backlog (count, first record seq), inbound ids."""
    s = r.s
    live = []
    for i in range(s.slots):
        if s.s_state[i]:
            o = i * s.slot_size
            live.append((s.s_seq[i], s.s_pid[i], s.s_state[i], bytes(s.store[o:o + s.s_len[i]])))
    live.sort()
    return ([x[1:] for x in live], ob.backlog, ob.bl_seq, sorted([p for p in s.in_pid if p]))


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
    """Play the broker until the session sends nothing more: PUBACK each QoS 1
    PUBLISH, PUBREC each QoS 2 one, PUBCOMP each PUBREL. Returns the PUBLISH
    packets as (dup, qos, pid, topic, payload), in the order sent."""
    from _session_rig import ack, _PKT
    from frugalmqtt_host import codec as host
    from frugalmqtt_host import server as SV
    from frugalmqtt.codec import PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP
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
