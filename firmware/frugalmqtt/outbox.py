# Device-side persistence (optional: the clients work without it). A ring
# file of a fixed size holds every QoS 1/2 message not yet acknowledged, how
# far its flow got, and the QoS 2 packet ids received but not yet released,
# so a reboot or power loss loses nothing: the client reloads it on start and
# resumes the session. It also buffers while the link is down: messages
# beyond the session's slots wait in the file (the backlog) and move into a
# slot, in publish order, as slots free up.
#
# File: two superblocks of 16 bytes (generation, tail offset, tail seq,
# checksum; the newer valid one counts), then the ring. Records are appended
# at the head and never changed:
#   header 12 bytes: 0xB0|kind, flag, body length (2), seq (4), Adler-32 (4)
#   body: a PUBLISH packet (PUB) or 6 bytes: ref seq (4), packet id (2)
# seq goes up by one per record; the checksum covers header bytes 0..7 and
# the body. A reload walks from the superblock's tail while each record is
# whole and carries the next seq: a torn write (any prefix of a record over
# older bytes) fails the checksum or the seq, ends the walk, and the next
# record is written there. Records never wrap around the end: one that does
# not fit starts again at the ring's beginning, after a SKIP record when
# there is room for one. The tail is the oldest record still needed (a
# message in flight or in the backlog, an unreleased QoS 2 id); space behind
# it is reused, and the superblock is rewritten before the head overwrites
# what the stored tail points to.
#
# Attached to a client on lite.core (any driver: lite.Publisher,
# telem.Telemetry, client.MQTTClient) by attach(core): it reloads the file
# into the core's table (restore()) and sets itself in the core's
# state[_OB]; the core then calls put(i) before a new message in slot i is
# sent, push() when there is no slot (or a backlog already), update(i) at a
# PUBREC, done(i) when a flow ends; a recv.Receiver calls inbound(pid, add)
# for the inbound QoS 2 ids.
import sys
from array import array
from .lite import why as _why

try:
    from micropython import const
except ImportError:
    from .time import const  # CPython

STORED = const(-5)  # publish(): no slot, the message waits in the file (the backlog)
OUTBOX_FULL = const(-1)  # publish(): not stored, the file has no room (lite's FULL)

# Record kinds
_PUB = const(1)  # a PUBLISH; flag 1: in a session slot with its packet id, 0: backlog
_LOAD = const(2)  # backlog message `ref` moved into a slot with packet id `pid`
_GOTREC = const(3)  # PUBREC came for `ref`: its PUBREL is next (lite.py's _REC is a slot state)
_DONE = const(4)  # the flow of `ref` ended
_IN_ADD = const(5)  # QoS 2 `pid` received, PUBREC sent, PUBREL awaited
_IN_DEL = const(6)  # PUBREL for `pid` came
_IN_CLR = const(7)  # the server kept no session: no inbound ids
_SKIP = const(8)  # the next record is at the ring's beginning

# lite.py's: the state[...] indices, the slot layout (6 meta bytes: state,
# image start, size (2), packet id (2); 5 spare bytes before each body for
# its fixed header), two slot states
_N = const(0)
_PID = const(2)
_V = const(10)
_STRIDE = const(16)
_OB = const(19)
_SUBS = const(21)
_AL = const(23)
_ORD = const(26)
_M = const(6)
_HEAD = const(5)
_COMP = const(3)  # PUBREL sent, PUBCOMP awaited
_HOLD = const(4)  # not sent on this connection yet

_HDR = const(12)
_CTL = const(6)  # body of every record but PUB and SKIP
_C = const(18)  # a control record
_SB = const(16)  # one superblock
_DATA = const(32)  # the ring starts after two superblocks
_MASK = const(0x3FFFFFFF)  # seq stays a small int on 32-bit ports
_BLOCK = const(2000)  # bytes summed before the Adler sums are reduced


class Outbox:
    """A ring file of `size` bytes at `path`, created or reopened. Give it to
    a client: MQTTClient(..., outbox=Outbox("/outbox.bin", 16384)). The file
    belongs to the outbox: one that is not an outbox file (no valid
    superblock) is started afresh; an outbox of another size is refused.
    `path` may also be an open file object of its own (wake.Store)."""

    def __init__(self, path, size):
        if size < _DATA + 256:
            raise _why("outbox_size", size)
        self.ring = size - _DATA
        self.hdr = bytearray(_HDR)
        self.ctl = bytearray(_CTL)
        self.sbuf = bytearray(_SB)
        self.ca = 1  # Adler-32 sums being computed
        self.cb = 0
        self.c = None
        if type(path) is not str:
            f = path  # a file object of its own (wake.Store: RTC memory)
        else:
            try:
                f = open(path, "r+b")
            except OSError:
                f = open(path, "w+b")
            if sys.implementation.name != "micropython":
                from .time import File
                f = File(f)  # the stream calls MicroPython files have
        self.f = f
        self.gen = 0
        self.sb_off = self.sb_seq = 0
        end = f.seek(0, 2)
        g = self._read_sb(0) if end >= _DATA else -1
        g1 = self._read_sb(_SB) if end >= _DATA else -1
        if end != size and (end > size or g >= 0 or g1 >= 0):
            f.close()  # its records would be read at the wrong wrap point
            raise _why("outbox_other", end, size)
        if end < size:  # new, or its creation was cut short
            z = bytes(256)
            f.seek(end)
            while end < size:
                n = min(256, size - end)
                f.write(z, 0, n)
                end += n
            f.flush()
        if g < 0 and g1 < 0:
            self._write_sb(0, 0)  # a new outbox
        elif g < 0 or (g1 >= 0 and ((g1 - g) & _MASK) < 0x20000000):
            self._read_sb(_SB)
        else:
            self._read_sb(0)

    # ---- checksum, superblock, records ----------------------------------

    def _sum(self, buf, off, n):
        """Adler-32 of buf[off:off+n] into ca/cb, without allocating."""
        a = self.ca
        b = self.cb
        end = off + n
        while off < end:
            stop = min(off + _BLOCK, end)
            while off < stop:
                a += buf[off]
                b += a
                off += 1
            a %= 65521
            b %= 65521
        self.ca = a
        self.cb = b

    def _sums(self, buf, o, put):
        """put: store the sums in the 4 bytes at buf[o]; else compare them:
        True if equal."""
        # two halves: cb << 16 would not be a small int on a 32-bit port
        if put:
            buf[o] = self.cb >> 8
            buf[o + 1] = self.cb & 0xFF
            buf[o + 2] = self.ca >> 8
            buf[o + 3] = self.ca & 0xFF
        return (buf[o] << 8 | buf[o + 1]) == self.cb and (buf[o + 2] << 8 | buf[o + 3]) == self.ca

    def _read_sb(self, at):
        """Read the superblock at `at`; its generation, or -1 if not valid."""
        b = self.sbuf
        self.f.seek(at)
        if self.f.readinto(b, _SB) != _SB:
            return -1
        self.ca = 1
        self.cb = 0
        self._sum(b, 0, 12)
        if not self._sums(b, 12, False):
            return -1
        self.gen = _u32(b, 0)
        self.sb_off = _u32(b, 4)
        self.sb_seq = _u32(b, 8)
        if self.sb_off >= self.ring:
            return -1
        return self.gen

    def _write_sb(self, off, seq):
        """Persist a new tail in the older superblock (the newer one stays
        valid if this write is torn)."""
        self.gen = (self.gen + 1) & _MASK
        b = self.sbuf
        _put32(b, 0, self.gen)
        _put32(b, 4, off)
        _put32(b, 8, seq)
        self.ca = 1
        self.cb = 0
        self._sum(b, 0, 12)
        self._sums(b, 12, True)
        self.f.seek(_SB * (self.gen & 1))
        self.f.write(b, 0, _SB)
        self.f.flush()
        self.sb_off = off
        self.sb_seq = seq

    def _kind(self, pos):
        """Read the header at pos into self.hdr; its kind, or 0 if no magic."""
        h = self.hdr
        self.f.seek(_DATA + pos)
        if self.f.readinto(h, _HDR) != _HDR or h[0] & 0xF0 != 0xB0:
            return 0
        return h[0] & 0x0F

    def _after(self, pos):
        """Position of the record after the one whose header is in self.hdr."""
        h = self.hdr
        if h[0] & 0x0F == _SKIP:
            return 0
        pos += _HDR + (h[2] << 8 | h[3])
        return 0 if self.ring - pos < _HDR else pos  # none starts within a header of the end

    def _valid(self, pos, seq):
        """Read and check the record at pos (body into self.buf): its kind,
        or 0 when it is not the whole record numbered seq."""
        k = self._kind(pos)
        h = self.hdr
        n = h[2] << 8 | h[3]
        if not k or k > _SKIP or _u32(h, 4) != seq or pos + _HDR + n > self.ring:
            return 0
        if k == _PUB:
            if not 0 < n <= len(self.buf):
                return 0
        elif n != (0 if k == _SKIP else _CTL):
            return 0
        if n and self.f.readinto(self.buf, n) != n:
            return 0
        self.ca = 1
        self.cb = 0
        self._sum(h, 0, 8)
        self._sum(self.buf, 0, n)
        return k if self._sums(h, 8, False) else 0

    def _append(self, kind, flag, buf, off, n, keep):
        """Append one record, leaving `keep` bytes free for the control
        records of messages already stored; False when it does not fit."""
        size = _HDR + n
        head = self.head
        need = size
        if head + size > self.ring:
            need += self.ring - head
        if self.sb_used + need + keep > self.ring:
            used = self._retail()
            if used + need + keep > self.ring:
                return False
            self._write_sb(self.t_off, self.t_seq)
            self.sb_used = used
        if head + size > self.ring:
            if self.ring - head >= _HDR:
                self._record(head, _SKIP, 0, buf, off, 0)
            head = 0
        self._record(head, kind, flag, buf, off, n)
        self.last_off = head
        self.last_seq = (self.seq - 1) & _MASK
        self.head = head + size
        self.sb_used += need
        return True

    def _record(self, pos, kind, flag, buf, off, n):
        h = self.hdr
        h[0] = 0xB0 | kind
        h[1] = flag
        h[2] = n >> 8
        h[3] = n & 0xFF
        _put32(h, 4, self.seq)
        self.ca = 1
        self.cb = 0
        self._sum(h, 0, 8)
        self._sum(buf, off, n)
        self._sums(h, 8, True)
        f = self.f
        f.seek(_DATA + pos)
        f.write(h, 0, _HDR)
        if n:
            f.write(buf, off, n)
        f.flush()
        self.seq = (self.seq + 1) & _MASK

    def _control(self, kind, ref, pid):
        """Append a control record (it may use the reserve kept for it)."""
        c = self.ctl
        _put32(c, 0, ref)
        c[4] = pid >> 8
        c[5] = pid & 0xFF
        if not self._append(kind, 0, c, 0, _CTL, 0):
            raise _why("outbox_full")

    # ---- the tail ---------------------------------------------------------

    def _retail(self):
        """Move the tail to the oldest record still needed; returns the bytes
        used from there to the head."""
        c = self.c
        base = self.t_seq
        best = -1
        off = 0
        i = 0
        st = c.state[_STRIDE]
        while i < len(self.o_rec):
            if c.buf[i * st]:  # slot i in use
                d = (self.o_seq[i] - base) & _MASK
                if best < 0 or d < best:
                    best = d
                    off = self.o_off[i]
            i += 1
        i = 0
        while i < self.nin:
            if c.in_pid[i]:
                d = (self.i_seq[i] - base) & _MASK
                if best < 0 or d < best:
                    best = d
                    off = self.i_off[i]
            i += 1
        if self.backlog:
            d = (self.bl_seq - base) & _MASK
            if best < 0 or d < best:
                best = d
                off = self.bl_off
        if best < 0:
            self.t_off = self.head
            self.t_seq = self.seq
            return 0
        self.t_off = off
        self.t_seq = (base + best) & _MASK
        d = (self.head - off) % self.ring
        return d if d else self.ring

    def free(self):
        """Bytes a new message (with its header) may still take, before the
        space owed to the control records of the messages already stored."""
        return max(0, self.ring - self._retail() - self.reserve - self.owed)

    # ---- attaching to a core, reloading -------------------------------------

    def attach(self, core):
        """Reload into `core` (at client construction, before connecting):
        messages that were in slots come back in publish order as possibly
        sent (DUP=1 on a resumed session, new messages without one; the core
        decides at the CONNACK), QoS 2 flows past PUBREC as awaiting PUBCOMP,
        inbound QoS 2 ids (a recv.Receiver's) as awaiting PUBREL; free slots
        take backlog messages. Then the core calls the hooks below."""
        c = core
        a = c.state
        if a[_N]:
            raise _why("outbox_late")
        self.c = c
        n = len(a[_ORD])  # slots
        ss = a[_STRIDE] - _M  # a slot's image: the largest PUBLISH stored
        # (the core writes a PUBLISH for the file as into a slot: after 6 meta bytes)
        self.buf = bytearray(max(ss + _M, _CTL))
        self.nin = getattr(c, "in_max", 0)  # a core without recv.Receiver keeps no ids
        self.o_seq = array("i", bytes(4 * n))  # PUB record of each slot
        self.o_off = array("i", bytes(4 * n))
        self.i_seq = array("i", bytes(4 * self.nin))  # IN_ADD record of each inbound id
        self.i_off = array("i", bytes(4 * self.nin))
        self.o_rec = bytearray(n)  # 1: no REC owed (QoS 1, or written)
        # Draining a full store writes control records (LOAD, REC, DONE)
        # before the space of the messages drained comes free: every stored
        # message owes them (`owed` bytes) and new messages leave that room.
        # Besides, a fixed reserve for two skipped ends of the ring and the
        # inbound QoS 2 ids.
        self.owed = 0
        self.reserve = 2 * (_HDR + ss) + (2 * self.nin + 2) * _C
        if self.reserve + 4 * _C + _HDR + ss > self.ring:
            raise _why("outbox_small", self.ring + _DATA, self.reserve + 4 * _C + _HDR + ss + _DATA)
        # The reload runs once per attach: its code (replay.py) is loaded
        # for it and dropped again, so a device does not keep it after boot
        from . import replay
        replay.replay(self)
        if sys.implementation.name == "micropython":  # (CPython: threads may import it)
            del sys.modules[replay.__name__]
            delattr(sys.modules["frugalmqtt"], "replay")
        a[_OB] = self
        self._fill()

    def restore(self, b, n, rec):
        """Put a stored QoS 1/2 PUBLISH b[0:n] in a free slot of the core,
        waiting to go (rec: past its PUBREC, PUBREL next); packet id 0 in it
        is replaced by a new one. Returns the slot. No allocation."""
        c = self.c
        a = c.state
        m = c.buf
        st = a[_STRIDE]
        i = 0
        while m[i * st]:
            i += 1
        o = 1
        while b[o] & 0x80:  # the remaining length
            o += 1
        s = i * st
        t = s + _M + _HEAD - 1 - o  # the body where the core puts it
        k = 0
        while k < n:
            m[t + k] = b[k]
            k += 1
        o += 3 + (b[o + 1] << 8 | b[o + 2])  # the packet id, after the topic
        p = b[o] << 8 | b[o + 1]
        if not p:
            p = self._pid()
            m[t + o] = p >> 8
            m[t + o + 1] = p & 0xFF
        m[s + 1] = t - s
        m[s + 2] = n >> 8
        m[s + 3] = n & 0xFF
        m[s + 4] = p >> 8
        m[s + 5] = p & 0xFF
        if a[_AL] and a[_V] == 5:  # alias.Aliases counts its expiry down
            a[_AL].start(i)
        m[s] = _COMP if rec else _HOLD
        a[_ORD][a[_N]] = i
        a[_N] += 1
        return i

    def _pid(self):
        """A packet id for a message taking a slot, as the core's publish()
        gives one: non-zero, unused by the table and by a SUBSCRIBE in
        flight [MQTT-2.2.1-3]."""
        c = self.c
        a = c.state
        b = c.buf
        d = a[_ORD]
        st = a[_STRIDE]
        x = a[_SUBS]
        while True:
            n = a[_PID] % 65535 + 1
            a[_PID] = n
            if x and n in x:
                continue
            for k in range(a[_N]):
                i = d[k] * st
                if b[i + 4] << 8 | b[i + 5] == n:
                    break
            else:
                return n

    def _set_pid(self, b, pid):
        """Put pid in the PUBLISH at b[0]."""
        p = 1
        while b[p] & 0x80:  # remaining length
            p += 1
        p += 3 + (b[p + 1] << 8 | b[p + 2])  # after the topic
        b[p] = pid >> 8
        b[p + 1] = pid & 0xFF

    def _next_backlog(self):
        """The backlog's first message was loaded: find the next one."""
        self.backlog -= 1
        if not self.backlog:
            self.bl_seq = self.bl_off = -1
            return
        pos = self.bl_off
        seq = self.bl_seq
        self._kind(pos)
        while True:
            pos = self._after(pos)
            seq = (seq + 1) & _MASK
            if pos == (0 if self.ring - self.head < _HDR else self.head):
                raise _why("outbox_backlog")
            if self._kind(pos) == _PUB and not self.hdr[1]:
                self.bl_off = pos
                self.bl_seq = seq
                return

    def _fill(self):
        """Free slots take backlog messages, oldest first: each gets a new
        packet id in the core, recorded (LOAD) before the core may send it."""
        a = self.c.state
        while self.backlog and a[_N] < len(a[_ORD]):
            self._kind(self.bl_off)
            n = self.hdr[2] << 8 | self.hdr[3]
            self.f.readinto(self.buf, n)
            self._set_pid(self.buf, 0)  # the core gives it an id
            i = self.restore(self.buf, n, False)
            self._control(_LOAD, self.bl_seq, self._id(i))  # room kept for it (owed)
            self.owed -= _C
            self.o_seq[i] = self.bl_seq
            self.o_off[i] = self.bl_off
            self.o_rec[i] = (self.buf[0] >> 1) & 3 == 1
            self._next_backlog()

    def _id(self, i):
        """Slot i's packet id."""
        b = self.c.buf
        s = i * self.c.state[_STRIDE]
        return b[s + 4] << 8 | b[s + 5]

    # ---- hooks called by the core -------------------------------------------

    def put(self, i):
        """Slot i holds a new QoS 1/2 message (not sent yet): record it.
        False when the file has no room."""
        b = self.c.buf
        s = i * self.c.state[_STRIDE]
        t = s + b[s + 1]
        q1 = (b[t] >> 1) & 3 == 1
        cost = _C if q1 else 2 * _C  # DONE, REC
        # the room it leaves: the fixed reserve, and the control records owed
        # by every stored message and by this one
        if not self._append(_PUB, 1, b, t, b[s + 2] << 8 | b[s + 3],
                            self.reserve + self.owed + cost):
            return False
        self.owed += cost
        self.o_rec[i] = q1
        self.o_seq[i] = self.last_seq
        self.o_off[i] = self.last_off
        return True

    def push(self, off, n):
        """No slot (or older messages wait): keep the PUBLISH of n bytes at
        self.buf[off] in the file (its packet id comes when it moves into a
        slot). STORED, or OUTBOX_FULL when the file has no room."""
        cost = (3 if (self.buf[off] >> 1) & 3 == 2 else 2) * _C  # LOAD, DONE, REC
        if not self._append(_PUB, 0, self.buf, off, n, self.reserve + self.owed + cost):
            return OUTBOX_FULL
        self.owed += cost
        if not self.backlog:
            self.bl_seq = self.last_seq
            self.bl_off = self.last_off
        self.backlog += 1
        return STORED

    def update(self, i):
        """PUBREC came for slot i; recorded before the PUBREL goes out."""
        self._control(_GOTREC, self.o_seq[i], self._id(i))
        self.o_rec[i] = 1
        self.owed -= _C

    def done(self, i):
        """The flow of slot i ended (the core freed it): retire its record
        and move the next backlog message into a slot."""
        self._control(_DONE, self.o_seq[i], self._id(i))
        self.owed -= _C * (2 - self.o_rec[i])  # a REC never written is not owed
        self._fill()

    def inbound(self, pid, add):
        """A QoS 2 id was recorded (add) or released; pid 0 with add False:
        all inbound ids are being dropped. Recorded before PUBREC / PUBCOMP."""
        c = self.c
        if add:
            self._control(_IN_ADD, 0, pid)
            j = 0
            while j < self.nin:
                if c.in_pid[j] == pid:
                    self.i_seq[j] = self.last_seq
                    self.i_off[j] = self.last_off
                j += 1
        elif pid:
            self._control(_IN_DEL, 0, pid)
        else:  # called before the receiver clears its ids
            j = 0
            while j < self.nin and not c.in_pid[j]:
                j += 1
            if j < self.nin:
                self._control(_IN_CLR, 0, 0)

    def close(self):
        self.f.close()


def _u32(b, o):
    return (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]


def _put32(b, o, v):
    b[o] = (v >> 24) & 0xFF
    b[o + 1] = (v >> 16) & 0xFF
    b[o + 2] = (v >> 8) & 0xFF
    b[o + 3] = v & 0xFF
