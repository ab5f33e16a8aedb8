# frugalmqtt.replay: an outbox's reload into the core's table, run once when
# it attaches (outbox.Outbox.attach), which drops this module again: the
# code of a walk a device makes at boot is not kept in its heap after it.
# The record kinds and sizes are outbox.py's (const() names are private to
# their module; tests/test_device_imports.py checks the copies). It imports
# nothing of outbox.py's: the outbox calls it.
from .lite import why as _why

try:
    from micropython import const
except ImportError:
    from .time import const  # CPython

_ORD = const(26)  # lite.py's state[_ORD]: the slot numbers (its length: the slots)

_PUB = const(1)
_LOAD = const(2)
_GOTREC = const(3)
_DONE = const(4)
_IN_ADD = const(5)
_IN_DEL = const(6)
_IN_CLR = const(7)
_HDR = const(12)
_C = const(18)
_MASK = const(0x3FFFFFFF)


def replay(ob):
    """Walk outbox ob's records from the tail; the messages still in flight
    go into the core's table, in the order they took their slots."""
    c = ob.c
    pos = 0 if ob.ring - ob.sb_off < _HDR else ob.sb_off
    seq = ob.sb_seq
    ob.backlog = 0
    ob.bl_seq = ob.bl_off = -1
    live = []  # [PUB seq, PUB offset, packet id (0: in the record), REC seen, no REC owed]
    ids = []  # [pid, IN_ADD seq, IN_ADD offset]
    while True:
        ob.head = pos  # (bounds _next_backlog's walk)
        k = ob._valid(pos, seq)
        if not k:
            break
        b = ob.buf
        ref = b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3]
        pid = b[4] << 8 | b[5]
        if k == _PUB:
            q1 = (b[0] >> 1) & 3 == 1
            if ob.hdr[1]:
                live.append([seq, pos, 0, 0, q1])
                ob.owed += _C * (1 if q1 else 2)
            else:
                ob.owed += _C * (2 if q1 else 3)
                ob.backlog += 1
                if ob.bl_seq < 0:
                    ob.bl_seq = seq
                    ob.bl_off = pos
        elif k == _LOAD and ref == ob.bl_seq:  # else its PUB is behind the tail: done
            ob._kind(ob.bl_off)
            ob.f.readinto(b, 1)
            live.append([ref, ob.bl_off, pid, 0, (b[0] >> 1) & 3 == 1])
            ob.owed -= _C
            ob._next_backlog()
            ob._kind(pos)  # the walk goes on from this record
        elif k == _GOTREC or k == _DONE:
            for e in live:
                if e[0] == ref:
                    if k == _GOTREC:
                        e[3] = 1
                        e[4] = 1
                        ob.owed -= _C
                    else:
                        ob.owed -= _C * (2 - e[4])  # a REC never written is not owed
                        live.remove(e)
                    break
        elif k == _IN_ADD:
            ids.append([pid, seq, pos])
        elif k == _IN_DEL or k == _IN_CLR:
            ids = [x for x in ids if k == _IN_DEL and x[0] != pid]
        if len(live) > len(c.state[_ORD]):
            raise _why("outbox_slots", len(c.state[_ORD]))
        if len(ids) > ob.nin:
            raise _why("outbox_inbound", ob.nin)
        pos = ob._after(pos)
        seq = (seq + 1) & _MASK
    ob.head = pos
    ob.seq = seq
    for e in live:
        b = ob.buf
        ob._kind(e[1])
        n = ob.hdr[2] << 8 | ob.hdr[3]
        ob.f.readinto(b, n)
        if e[2]:
            ob._set_pid(b, e[2])  # a backlog message: the id its LOAD gave it
        b[0] |= 8  # it may have gone before the reboot [MQTT-3.3.1-1]
        i = ob.restore(b, n, e[3])
        ob.o_seq[i] = e[0]
        ob.o_off[i] = e[1]
        ob.o_rec[i] = e[4]
    j = 0
    for x in ids:
        c.in_pid[j] = x[0]
        ob.i_seq[j] = x[1]
        ob.i_off[j] = x[2]
        j += 1
    ob.t_off = 0 if ob.ring - ob.sb_off < _HDR else ob.sb_off
    ob.t_seq = ob.sb_seq
    ob._retail()
    d = (pos - ob.sb_off) % ob.ring
    ob.sb_used = d if d or seq == ob.sb_seq else ob.ring
