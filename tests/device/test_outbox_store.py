"""frugalmqtt.outbox, the ring file itself: torn writes at every byte of every
record kind, a full store, many laps around the ring, reload order, the file's
checksum and superblocks. A "reboot" is a fresh core plus Outbox(path) on the
same file. Runs unchanged on CPython and on the MicroPython unix port."""
from _util import raises
from _session_rig import ack, pub, rel, hl
from _outbox_rig import (scratch, drop, boot, state, table, read_all, write_all, LogFile, apply,
                         durable_points, broker_drain)
from frugalmqtt.outbox import Outbox, STORED, OUTBOX_FULL
from frugalmqtt_host.ref.codec import PUBACK, PUBREC, PUBREL, PUBCOMP

SIZE = 1024  # a 992-byte ring: the torn-write scenario goes round it
LAPS = 5


def test_adler32_matches_the_reference():
    path = scratch()
    try:
        ob = Outbox(path, SIZE)
        # values from zlib.adler32
        for data, want in ((b"", 1), (b"Wikipedia", 0x11E60398),
                           (bytes(range(256)) * 20, 0x23C4F688)):
            ob.ca = 1
            ob.cb = 0
            ob._sum(data, 0, len(data))
            assert (ob.cb << 16 | ob.ca) == want, (data[:9], hex(ob.cb << 16 | ob.ca))
        ob.close()
    finally:
        drop(path)


def _ops(r, ob):
    """The scenario every record kind is torn in: (name, step) pairs."""
    s = r.s
    v = r.v
    ops = []
    n = [0]

    def publish(qos, size):
        def f():
            n[0] += 1
            s.publish(b"t/%d" % n[0], b"p" * size, qos)
        return f

    def broker(pkt):
        def f():
            r.feed(pkt())
        return f

    def pid_of(qos, nth=0):
        # the packet id of the nth oldest flow at qos
        return [p for p, st, img in table(s) if (img[0] >> 1) & 3 == qos][nth]

    ops.append(("connect", lambda: r.up(clean=False)))
    for lap in range(LAPS):
        ops.append(("pub q1", publish(1, 5 + 9 * lap)))
        ops.append(("pub q2", publish(2, 3 + 11 * lap)))
        ops.append(("backlog q1", publish(1, 9)))  # both slots taken
        ops.append(("backlog q2", publish(2, 1 + lap)))
        ops.append(("inbound q2", broker(lambda: pub(v, b"in", b"x", 2, 40 + lap))))
        ops.append(("pubrec", broker(lambda: ack(v, PUBREC, pid_of(2)))))
        ops.append(("puback+load", broker(lambda: ack(v, PUBACK, pid_of(1)))))
        ops.append(("pubrel in", broker(lambda: ack(v, PUBREL, 40 + lap))))
        ops.append(("pubcomp+load", broker(lambda: ack(v, PUBCOMP, pid_of(2)))))
        ops.append(("puback", broker(lambda: ack(v, PUBACK, pid_of(1)))))
        ops.append(("pubrec", broker(lambda: ack(v, PUBREC, pid_of(2)))))
        ops.append(("pubcomp", broker(lambda: ack(v, PUBCOMP, pid_of(2)))))
    ops.append(("inbound q2", broker(lambda: pub(v, b"in", b"y", 2, 60))))

    def new_session():  # the server kept none: the receiver drops its ids (IN_CLR)
        r.take()
        s.close()
        r.up(clean=False)
        # recv.Receiver does not drop its QoS 2 ids on a CONNACK without a
        # session yet; this is the outbox's side of that (the hook's contract)
        ob.inbound(0, False)
        for j in range(s.in_max):
            s.in_pid[j] = 0

    ops.append(("new session", new_session))
    return ops


def _reload(path, image):
    write_all(path, image)
    r, ob = boot(path, SIZE)
    st = state(r, ob)
    ob.close()
    return st


def test_torn_write_at_every_byte_of_every_record():
    # Each step of a scenario that goes round the ring (PUB in a slot and in
    # the backlog, LOAD, REC, DONE, IN_ADD, IN_DEL, SKIP, superblocks) is
    # replayed cut after each byte it wrote: the reload gives exactly the
    # state of the last flushed record before the cut, messages byte-exact.
    path = scratch()
    torn = path + ".torn"
    try:
        r, ob = boot(path, SIZE)
        cuts = 0
        kinds = {}
        for name, step in _ops(r, ob):
            image = read_all(path)
            lf = LogFile(ob.f)
            ob.f = lf
            step()
            ob.f = lf.f
            pts = durable_points(lf.log)
            total = pts[-1]
            assert total == sum([len(e[1]) for e in lf.log if e]), name
            refs = [_reload(torn, apply(image, lf.log, p)) for p in pts]
            j = 0
            for k in range(total + 1):
                while j + 1 < len(pts) and pts[j + 1] <= k:
                    j += 1
                cut = apply(image, lf.log, k)
                want = refs[j]
                if j + 1 < len(pts) and cut == apply(image, lf.log, pts[j + 1]):
                    want = refs[j + 1]  # the bytes not written were already those
                got = _reload(torn, cut)
                assert got == want, "%s cut at byte %d of %d: %r != %r" % (
                    name, k, total, got, want)
                cuts += 1
            for e in lf.log:
                if e and len(e[1]) == 12 and e[1][0] & 0xF0 == 0xB0:
                    kinds[e[1][0] & 0x0F] = 1
        ob.close()
        assert cuts > 1000 and ob.gen > 2, (cuts, ob.gen)  # went round the ring
        for k in range(1, 9):  # every record kind was written (and torn)
            assert k in kinds, (k, kinds)
        assert r.s.pending() == 0
    finally:
        drop(path)
        drop(torn)


def test_torn_tail_is_overwritten_and_the_store_goes_on():
    # A record torn half-way is skipped on reload, and the next record is
    # written in its place; later reloads see the new record, not the old.
    path = scratch()
    try:
        r, ob = boot(path, SIZE)
        r.up(clean=False)
        p1 = r.s.publish(b"a/1", b"one", 1)
        image = read_all(path)
        lf = LogFile(ob.f)
        ob.f = lf
        r.s.publish(b"a/2", b"two-two-two", 1)
        ob.close()
        write_all(path, apply(image, lf.log, durable_points(lf.log)[-1] - 3))
        r, ob = boot(path, SIZE)
        # 4: waiting to go; DUP=1, as it may have gone before the reboot
        assert state(r, ob)[0] == [(p1, 4, pub(5, b"a/1", b"one", 1, p1, dup=True))]
        assert r.up(clean=False, sp=True) == [pub(5, b"a/1", b"one", 1, p1, dup=True)]
        p3 = r.s.publish(b"a/3", b"3", 2)
        ob.close()
        r, ob = boot(path, SIZE)
        got = [x[2] for x in state(r, ob)[0]]
        assert got == [pub(5, b"a/1", b"one", 1, p1, dup=True),
                       pub(5, b"a/3", b"3", 2, p3, dup=True)], hl(got)
        ob.close()
    finally:
        drop(path)


def test_full_store_says_so_and_drops_nothing():
    path = scratch()
    try:
        r, ob = boot(path, SIZE, slots=1, inbound=1)
        stored = []
        k = 0
        while True:  # offline: slot first, then the backlog, until full
            k += 1
            got = r.s.publish(b"f/%d" % k, b"m%03d" % k, 1 + k % 2)
            if got == OUTBOX_FULL:
                break
            assert got == (1 if k == 1 else STORED), (k, got)
            stored.append(k)
        assert len(stored) > 5, stored
        assert ob.free() < 12 + 13 + 3 * 18, ob.free()  # header, PUBLISH, its LOAD REC DONE
        again = r.s.publish(b"f/%d" % k, b"m%03d" % k, 1 + k % 2)
        assert again == OUTBOX_FULL  # still full, still says so
        ob.close()
        r, ob = boot(path, SIZE, slots=1, inbound=1)  # a reboot keeps them all
        assert ob.backlog == len(stored) - 1
        sent = broker_drain(r, r.up(clean=True))
        assert [p[4] for p in sent] == [b"m%03d" % k for k in stored]
        assert [p[1] for p in sent] == [1 + k % 2 for k in stored]
        assert ob.backlog == 0 and r.s.pending() == 0 and ob.owed == 0
        assert r.s.publish(b"f/y", b"y", 1) > 0  # room again
        ob.close()
    finally:
        drop(path)


def test_many_laps_with_reboots_keep_order_and_content():
    # 300 messages of varying sizes through a 992-byte ring (about 20 laps,
    # with and without SKIP records), a reboot every 7 steps with messages in
    # flight; the broker acknowledges in order. Everything published goes out
    # in publish order, byte-exact; a message goes out again only when a
    # reboot came before its PUBACK (then with DUP=1).
    path = scratch()
    try:
        r, ob = boot(path, SIZE, slots=3, inbound=1)
        r.up(clean=False)
        sent = []  # payloads in the order they went on the wire
        want = []
        k = 0
        step = 0
        reboots = 0
        gens = 0
        while k < 300 or r.s.pending():
            step += 1
            if k < 300 and step % 3:
                payload = b"%d:" % (k + 1) + b"z" * ((k * 37) % 41)
                if r.s.publish(b"lap", payload, 1) != OUTBOX_FULL:
                    k += 1
                    want.append(payload)
            out = r.take()
            if step % 7 == 0:
                sent.extend([bytes(p[10:]) for p in out])  # sent, never acknowledged
                gens += ob.gen
                ob.close()
                r, ob = boot(path, SIZE, slots=3, inbound=1)
                reboots += 1
                out = r.up(clean=False, sp=True)
                for p in out:
                    assert p[0] & 8, hl([p])  # resent: DUP=1
            for p in out:
                sent.append(bytes(p[10:]))
                r.feed(ack(5, PUBACK, p[7] << 8 | p[8]))
        firsts = []
        for p in sent:
            if p not in firsts:
                firsts.append(p)
        assert firsts == want, (len(firsts), len(want))
        assert len(sent) - len(want) <= 3 * reboots, (len(sent), len(want), reboots)
        assert ob.gen > 10, ob.gen  # the superblock moved on as the ring went round
        ob.close()
    finally:
        drop(path)


def test_reload_keeps_publish_order_across_slots_and_backlog():
    path = scratch()
    try:
        r, ob = boot(path, SIZE, slots=2)
        pids = [r.s.publish(b"o/%d" % k, b"%d" % k, 1 + k % 2) for k in range(6)]
        assert pids[:2] == [1, 2] and pids[2:] == [STORED] * 4
        ob.close()
        r, ob = boot(path, SIZE, slots=2)
        sent = broker_drain(r, r.up(clean=True))  # no session: sent as new messages
        assert [p[4] for p in sent] == [b"%d" % k for k in range(6)], sent
        assert [p[0] for p in sent] == [0] * 6  # DUP=0
        assert [p[3] for p in sent] == [b"o/%d" % k for k in range(6)]
        ob.close()
    finally:
        drop(path)


def test_superblocks_alternate_and_a_torn_one_falls_back():
    path = scratch()
    try:
        ob = Outbox(path, SIZE)
        g = ob.gen
        ob._write_sb(100, 7)
        ob.close()
        ob = Outbox(path, SIZE)
        assert (ob.gen, ob.sb_off, ob.sb_seq) == (g + 1, 100, 7)
        ob.close()
        img = bytearray(read_all(path))
        img[16 * ((g + 1) & 1) + 5] ^= 0xFF  # the newer one torn
        write_all(path, img)
        ob = Outbox(path, SIZE)
        assert (ob.gen, ob.sb_off, ob.sb_seq) == (g, 0, 0)
        ob.close()
    finally:
        drop(path)


def test_file_sizes():
    path = scratch()
    try:
        raises(ValueError, Outbox, path, 100)
        Outbox(path, 2048).close()
        assert len(read_all(path)) == 2048
        raises(ValueError, Outbox, path, 1024)  # would cut stored records
        raises(ValueError, Outbox, path, 4096)  # would read them at another wrap point
        assert len(read_all(path)) == 2048
        write_all(path, b"not an outbox" * 10)  # short and foreign: started afresh
        r, ob = boot(path, 2048)
        assert len(read_all(path)) == 2048
        assert ob.backlog == 0 and r.s.pending() == 0
        ob.close()
        drop(path)
        raises(ValueError, boot, path, 400, 5, 4)  # too small for 4 slots' reserve
    finally:
        drop(path)
