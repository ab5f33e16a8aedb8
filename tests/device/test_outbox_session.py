"""frugalmqtt.outbox with the Session: what a reboot resumes (MQTT 3.1.1 and
5.0), the inbound QoS 2 ids, and publishing through the outbox without heap
allocation. A "reboot" is a fresh Session plus Outbox(path) on the same file.
Runs unchanged on CPython and on the MicroPython unix port."""
from array import array

from _util import IS_MICROPYTHON, no_alloc
from _session_rig import BOTH, ack, pub, rel, hl
from _outbox_rig import scratch, drop, boot, broker_drain
from test_session_flows import _Stream
from frugalmqtt import session as S
from frugalmqtt.codec import PUBACK, PUBREC, PUBREL, PUBCOMP
from frugalmqtt_host import codec as host

SIZE = 2048


def test_resume_with_session_resends_dup_and_pubrel():
    # [MQTT-4.4.0-1] after a reboot as after a reconnect: PUBREL for the flow
    # past PUBREC, the others' PUBLISH with DUP=1 and their packet ids, in order
    for v in BOTH:
        path = scratch()
        try:
            r, ob = boot(path, SIZE, v, slots=3)
            r.up(clean=False)
            p1 = r.s.publish(b"r/1", b"one", 2)
            p2 = r.s.publish(b"r/2", b"two", 1)
            p3 = r.s.publish(b"r/3", b"three", 2)
            r.feed(ack(v, PUBREC, p1))
            ob.close()  # power off; nothing acknowledged but p1's PUBREC
            r, ob = boot(path, SIZE, v, slots=3)
            got = r.up(clean=False, sp=True)
            assert got == [rel(p1), pub(v, b"r/2", b"two", 1, p2, dup=True),
                           pub(v, b"r/3", b"three", 2, p3, dup=True)], "v%d %r" % (v, hl(got))
            r.feed(ack(v, PUBCOMP, p1) + ack(v, PUBACK, p2) + ack(v, PUBREC, p3))
            assert r.take() == [rel(p3)]
            r.feed(ack(v, PUBCOMP, p3))
            assert r.done == [(p1, 0), (p2, 0), (p3, 0)], r.done
            assert ob.owed == 0
            ob.close()
            r, ob = boot(path, SIZE, v, slots=3)  # nothing left
            assert r.s.pending() == 0 and r.up(clean=False, sp=True) == []
            ob.close()
        finally:
            drop(path)


def test_resume_without_session_sends_new_and_reports_lost_release():
    # [MQTT-3.2.2-5] the server kept no session: unacknowledged messages go
    # again as new ones (DUP=0); a QoS 2 flow past PUBREC is SESSION_LOST
    for v in BOTH:
        path = scratch()
        try:
            r, ob = boot(path, SIZE, v, slots=3)
            r.up(clean=False)
            p1 = r.s.publish(b"n/1", b"one", 2)
            p2 = r.s.publish(b"n/2", b"two", 1)
            r.feed(ack(v, PUBREC, p1))
            ob.close()
            r, ob = boot(path, SIZE, v, slots=3)
            got = r.up(clean=False, sp=False)
            assert got == [pub(v, b"n/2", b"two", 1, p2)], hl(got)
            assert r.done == [(p1, S.SESSION_LOST)], r.done
            r.feed(ack(v, PUBACK, p2))
            assert r.s.pending() == 0 and ob.owed == 0
            ob.close()
        finally:
            drop(path)


def test_inbound_qos2_not_delivered_twice_across_reboot():
    # [MQTT-4.3.3-10] until PUBREL, a repeated PUBLISH with the same id is
    # acknowledged and not delivered again: also when a reboot came between
    for v in BOTH:
        path = scratch()
        try:
            r, ob = boot(path, SIZE, v)
            r.up(clean=False)
            r.feed(pub(v, b"in/q2", b"once", 2, 7))
            assert r.take() == [ack(v, PUBREC, 7)]
            assert len(r.msgs) == 1
            ob.close()
            r, ob = boot(path, SIZE, v)
            assert list(r.s.in_pid).count(7) == 1
            r.up(clean=False, sp=True)
            r.feed(pub(v, b"in/q2", b"once", 2, 7, dup=True))
            assert r.take() == [ack(v, PUBREC, 7)]
            assert r.msgs == [], r.msgs  # not delivered again
            r.feed(ack(v, PUBREL, 7))
            assert r.take() == [ack(v, PUBCOMP, 7)]
            ob.close()
            r, ob = boot(path, SIZE, v)  # released: the id is free again
            assert 7 not in list(r.s.in_pid)
            r.up(clean=False, sp=True)
            r.feed(pub(v, b"in/q2", b"next", 2, 7))
            assert [m[1] for m in r.msgs] == [b"next"]
            ob.close()
            r, ob = boot(path, SIZE, v)
            r.up(clean=False, sp=False)  # no session: inbound ids dropped, and stay dropped
            ob.close()
            r, ob = boot(path, SIZE, v)
            assert list(r.s.in_pid) == [0, 0], list(r.s.in_pid)
            ob.close()
        finally:
            drop(path)


def test_offline_publishes_drain_in_order_beyond_the_slots():
    # Link down: the first messages take the slots, the rest wait in the
    # file; on connect all go out in publish order, each when a slot frees.
    path = scratch()
    try:
        r, ob = boot(path, SIZE, slots=2)
        got = [r.s.publish(b"off/%d" % k, b"%d" % k, 1 + k % 2) for k in range(12)]
        assert got[:2] == [1, 2] and got[2:] == [S.STORED] * 10, got
        assert r.take() == []
        sent = broker_drain(r, r.up(clean=True))
        assert [p[4] for p in sent] == [b"%d" % k for k in range(12)]
        assert [p[1] for p in sent] == [1 + k % 2 for k in range(12)]
        assert len(r.done) == 12 and all(d[1] == 0 for d in r.done)
        assert ob.backlog == 0 and ob.owed == 0 and r.s.pending() == 0
        ob.close()
    finally:
        drop(path)


# ---- no allocation ------------------------------------------------------------

class _Sink:
    """The session's write(): counts packets, allocates nothing."""

    def __init__(self):
        self.n = 0

    def write(self, buf, off, n):
        self.n += 1


_T = b"na/topic"
_PAY = b"a payload of some bytes"
_RES = array("i", [0, 0, 0, 0])


def _publish4(s):
    _RES[0] = s.publish(_T, _PAY, 1)
    _RES[1] = s.publish(_T, _PAY, 2)
    _RES[2] = s.publish(_T, _PAY, 1)  # slots taken: into the file
    _RES[3] = s.publish(_T, _PAY, 2)


def _acks(s, f, stream):
    # the broker's acks, read as the clients read a socket: DONE, LOAD, REC records
    while host.read_from(f, stream):
        s.receive()


def test_publish_and_acks_with_outbox_allocate_nothing():
    path = scratch()
    try:
        sink = _Sink()
        from frugalmqtt.outbox import Outbox
        s = S.Session("na", sink.write, 5, slots=2, slot_size=64)
        ob = Outbox(path, SIZE)
        ob.attach(s)
        s.connect(60, True)
        from _session_rig import connack
        stream = _Stream(512)
        stream.load([connack(5)])
        _acks(s, s.framer, stream)
        assert s.connected
        for rnd in range(2):  # the second round runs with the heap locked
            if rnd:
                no_alloc(_publish4, s)
            else:
                _publish4(s)
            a, b = _RES[0], _RES[1]
            assert a > 0 and b > 0 and _RES[2] == S.STORED and _RES[3] == S.STORED, list(_RES)
            stream.load([ack(5, PUBACK, a), ack(5, PUBREC, b), ack(5, PUBCOMP, b)])
            if rnd:
                no_alloc(_acks, s, s.framer, stream)
            else:
                _acks(s, s.framer, stream)
            assert s.pending() == 2 and ob.backlog == 0
            data = b""  # the two moved from the file into the slots, sent
            for i in range(s.slots):
                p = s.s_pid[i]
                data += ack(5, PUBACK, p) if s.s_qos[i] == 1 else (ack(5, PUBREC, p) +
                                                                  ack(5, PUBCOMP, p))
            stream.load([data])
            _acks(s, s.framer, stream)
            assert s.pending() == 0 and ob.owed == 0
        # inbound QoS 2: IN_ADD before PUBREC, IN_DEL before PUBCOMP
        for rnd in range(2):
            stream.load([pub(5, b"in", b"x", 2, 9), ack(5, PUBREL, 9)])
            seq = ob.seq
            if rnd:
                no_alloc(_acks, s, s.framer, stream)
            else:
                _acks(s, s.framer, stream)
            assert list(s.in_pid) == [0] * s.inbound
            assert ob.seq - seq == 2  # IN_ADD, IN_DEL records
        assert sink.n > 10
        ob.close()
    finally:
        drop(path)
