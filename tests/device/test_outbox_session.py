"""frugalmqtt.outbox on the core: what a reboot resumes (MQTT 3.1.1 and 5.0),
the inbound QoS 2 ids, publishing through the outbox without heap allocation,
and the outbox on the drivers (telem.Telemetry, client.MQTTClient). A
"reboot" is a fresh core plus Outbox(path) on the same file. Runs unchanged
on CPython and on the MicroPython unix port."""
from array import array

from _util import IS_MICROPYTHON, no_alloc
from _session_rig import BOTH, ack, pub, rel, hl, connack
from _outbox_rig import scratch, drop, boot, broker_drain, table
from frugalmqtt.outbox import Outbox, STORED
from frugalmqtt.lite import SESSION_LOST
from frugalmqtt_host.ref.codec import PUBACK, PUBREC, PUBREL, PUBCOMP

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


def test_code_that_runs_once_is_dropped_after():
    # lhello.py builds the CONNECT when a client is made, replay.py walks
    # the outbox file once, at attach(), lconn.py handles each CONNACK: none
    # is kept, in sys.modules or as the package's attribute, so their code
    # can be collected
    import sys
    import frugalmqtt
    path = scratch()
    try:
        r, ob = boot(path, SIZE, 5, slots=2)
        r.up(clean=False)
        p1 = r.s.publish(b"d/1", b"one", 1)
        ob.close()
        r, ob = boot(path, SIZE, 5, slots=2)  # the reload brought p1 back
        assert r.s.pending() == 1
        for name in ("replay", "lhello"):  # (CPython keeps them)
            assert ("frugalmqtt." + name in sys.modules) != IS_MICROPYTHON, name
            assert hasattr(frugalmqtt, name) != IS_MICROPYTHON, name
        got = r.up(clean=False, sp=True)
        assert got == [pub(5, b"d/1", b"one", 1, p1, dup=True)], hl(got)
        assert r.s.state[1]  # lite's state[_QUOTA]: the connection is up
        assert ("frugalmqtt.lconn" in sys.modules) != IS_MICROPYTHON
        assert hasattr(frugalmqtt, "lconn") != IS_MICROPYTHON
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
            assert r.done == [(p1, SESSION_LOST)], r.done
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
            r.feed(pub(v, b"in/q2", b"more", 2, 8))
            assert sorted(r.s.in_pid) == [7, 8]
            # the receiver drops its ids (a CONNACK without a session): IN_CLR;
            # recv.Receiver does not call this yet, the test does (the contract)
            ob.inbound(0, False)
            r.s.in_pid[0] = r.s.in_pid[1] = 0
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
        assert got[:2] == [1, 2] and got[2:] == [STORED] * 10, got
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

_T = b"na/topic"
_PAY = b"a payload of some bytes"
_RES = array("i", [0, 0, 0, 0])


def _publish4(s):
    _RES[0] = s.publish(_T, _PAY, 1)
    _RES[1] = s.publish(_T, _PAY, 2)
    _RES[2] = s.publish(_T, _PAY, 1)  # slots taken: into the file
    _RES[3] = s.publish(_T, _PAY, 2)


def test_publish_and_acks_with_outbox_allocate_nothing():
    path = scratch()
    try:
        r, ob = boot(path, SIZE, 5, slots=2, record=False)
        s = r.s
        s.on_done = None
        s.on_message = None
        r.record = True
        r.up()
        r.record = False
        for rnd in range(2):  # the second round runs with the heap locked
            if rnd:
                no_alloc(_publish4, s)
            else:
                _publish4(s)
            a, b = _RES[0], _RES[1]
            assert a > 0 and b > 0 and _RES[2] == STORED and _RES[3] == STORED, list(_RES)
            # the broker's acks: DONE, LOAD (the backlog moves in), REC records
            data = ack(5, PUBACK, a) + ack(5, PUBREC, b) + ack(5, PUBCOMP, b)
            if rnd:
                no_alloc(r.feed, data)
            else:
                r.feed(data)
            assert s.pending() == 2 and ob.backlog == 0
            data = b""  # the two moved from the file into the slots, sent
            for p, st, img in table(s):
                data += ack(5, PUBACK, p) if st == 1 else ack(5, PUBREC, p) + ack(5, PUBCOMP, p)
            r.feed(data)
            assert s.pending() == 0 and ob.owed == 0
        # inbound QoS 2: IN_ADD before PUBREC, IN_DEL before PUBCOMP
        for rnd in range(2):
            data = pub(5, b"in", b"x", 2, 9) + ack(5, PUBREL, 9)
            seq = ob.seq
            if rnd:
                no_alloc(r.feed, data)
            else:
                r.feed(data)
            assert list(s.in_pid) == [0] * s.in_max
            assert ob.seq - seq == 2  # IN_ADD, IN_DEL records
        assert r.sent > 10
        ob.close()
    finally:
        drop(path)


# ---- the telemetry profile's driver -------------------------------------------

from _lite_rig import Peer  # noqa: E402
from frugalmqtt.telem import Telemetry  # noqa: E402
from frugalmqtt.liteprops import props  # noqa: E402


class _Telem(Telemetry):
    """A Telemetry whose readiness comes from the peer's script (the peer is
    its own poller, as in _lite_rig.Lite)."""

    def connect(self, clean=None, sock=None, timeout_ms=0):
        if sock is not None:
            self.poller = sock
        return Telemetry.connect(self, clean, sock, timeout_ms)


def _call(fn, *args):
    return fn(*args)


def _telem(path, v, sp=False):
    ob = Outbox(path, SIZE)
    t = _Telem("tele", "broker", version=v, clean=False, slots=2, max_packet=96, outbox=ob)
    peer = Peer()
    peer.give(connack(v, sp))
    return t, ob, peer


def test_telemetry_waits_when_the_outbox_file_is_full():
    # a full file: publish() waits for an ack in poll() and tries again; it
    # never returns FULL (the message silently not stored); no ack within
    # timeout_ms: OSError ETIMEDOUT, and the message was not stored
    import errno
    for v in BOTH:
        path = scratch()
        try:
            t, ob, peer = _telem(path, v)
            t.connect(sock=peer)
            got = []
            try:
                while len(got) < 100:
                    got.append(t.publish(b"full/t", bytes(40), 1, False, None, 0))
            except OSError as e:
                assert e.args[0] == errno.ETIMEDOUT, e
            assert len(got) < 100 and got[:2] == [1, 2] and got[2:] == [STORED] * (len(got) - 2), got
            n = ob.backlog
            peer.sent()
            peer.give(ack(v, PUBACK, 1), ack(v, PUBACK, 2))  # room again: it waits, then stores
            assert t.publish(b"full/t", bytes(40), 1, False, None, 0) == STORED
            assert ob.backlog == n - 2 + 1 and t.pending() == 2
            ob.close()
        finally:
            drop(path)


def test_telemetry_driver_backlog_reboot_and_no_allocation():
    # telem.Telemetry(outbox=...): beyond its 2 slots publish() returns STORED
    # without waiting; a reboot with nothing acknowledged resends the slots'
    # messages (DUP=1, their ids), then the file's in publish order as slots
    # free; publish and acks allocate nothing under heap_lock
    pr = props(content_type="text/plain", expiry=60)
    for v in BOTH:
        path = scratch()
        try:
            t, ob, peer = _telem(path, v)
            got = [t.publish(b"tele/%d" % k, b"%d" % k, 1 + k % 2) for k in range(5)]
            assert got[:2] == [1, 2] and got[2:] == [STORED] * 3, got
            ob.close()  # power off before any connection
            t, ob, peer = _telem(path, v, sp=False)
            assert t.pending() == 2 and ob.backlog == 3
            assert not t.connect(sock=peer)
            out = peer.sent()[1:]  # after the CONNECT
            assert out == [pub(v, b"tele/0", b"0", 1, 1), pub(v, b"tele/1", b"1", 2, 2)], hl(out)
            seen = []
            while out:
                for p in out:
                    if p[0] >> 4 == 3:  # PUBLISH: topic at 4, its id after it
                        k = 4 + p[3]
                        seen.append(bytes(p[4:k]))
                        peer.give(ack(v, PUBACK if p[0] & 6 == 2 else PUBREC, p[k] << 8 | p[k + 1]))
                    else:  # PUBREL
                        peer.give(ack(v, PUBCOMP, p[2] << 8 | p[3]))
                t.poll(0)
                out = peer.sent()
            assert seen == [b"tele/%d" % k for k in range(5)], seen
            assert t.pending() == 0 and ob.backlog == 0 and ob.owed == 0
            # no allocation: 2 into the slots, 2 into the file, the acks move
            # them in (the second round, with the heap locked: the first checks
            # the new topic, which allocates once)
            for rnd in range(2):
                call = no_alloc if rnd else _call
                a = call(t.publish, _T, _PAY, 1, False, pr if v == 5 else None)
                b = call(t.publish, _T, _PAY, 2, False, pr if v == 5 else None)
                c = call(t.publish, _T, _PAY, 1, False, pr if v == 5 else None)
                d = call(t.publish, _T, _PAY, 2, False, pr if v == 5 else None)
                assert a > 0 and b > 0 and c == STORED and d == STORED, (a, b, c, d)
                peer.sent()
                peer.give(ack(v, PUBACK, a), ack(v, PUBREC, b), ack(v, PUBCOMP, b))
                call(t.poll, 0)
                assert t.pending() == 2 and ob.backlog == 0
                data = []
                for p, st, img in table(t):
                    data += [ack(v, PUBACK, p)] if st == 1 else [ack(v, PUBREC, p),
                                                               ack(v, PUBCOMP, p)]
                peer.sent()
                peer.give(*data)
                call(t.poll, 0)
                assert t.pending() == 0 and ob.owed == 0
            ob.close()
        finally:
            drop(path)
