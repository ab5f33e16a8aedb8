"""Sans-I/O tests of frugalmqtt.session: the QoS flows against a scripted broker.

The broker's packets are built with the host's encoders and framed into the
session as a driver frames them (_session_rig); what the session writes is captured packet by packet (one
write() call per packet) and compared byte for byte. Time is a fake clock.
Each test runs on MQTT 5.0 (v=5) and, where the flow exists there, on MQTT
3.1.1 (v=4). Spec ids: MQTT 5.0 numbering unless tagged "v3.1.1".
Runs unchanged on CPython and on the MicroPython unix port.
"""
from array import array

from _util import no_alloc, raises, unhex
from frugalmqtt_host.ref import codec
from frugalmqtt_host.ref import props as PR
from frugalmqtt import session as S
from frugalmqtt_host import server as SV
from frugalmqtt_host.ref.codec import PUBACK, PUBREC, PUBREL, PUBCOMP, SUBACK

from _session_rig import (BOTH, Rig, h, hl, pub, ack, connack, suback, disconnect, u16, rel,
                          alias_of, _PKT, frame, in_flight, Capture, Input)
from _session_rig import props as P

# The session keeps 5 bytes before each packet body for its fixed header: a
# buffer of tx_size bytes holds a packet of up to tx_size - SPARE bytes (one
# under 130 bytes, whose fixed header takes 2).
SPARE = 3
from frugalmqtt.err import MQTTError


# ---- Resend on a resumed session -----------------------------------------------

def test_MQTT_4_4_0_1_resend_pubrel_then_publish_dup():
    # [MQTT-4.6.0-1] [MQTT-3.3.1-1] [MQTT-2.2.1-5] [MQTT-4.1.0-1]
    # [MQTT-4.4.0-1 v3.1.1] [MQTT-4.6.0-1 v3.1.1] [MQTT-3.3.1-1 v3.1.1] [MQTT-2.3.1-3 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        assert r.up(clean=False) == []
        p1 = r.s.publish(b"t/1", b"one", 2)
        p2 = r.s.publish(b"t/2", b"two", 1)
        p3 = r.s.publish(b"t/3", b"three", 2)
        assert r.take() == [pub(v, b"t/1", b"one", 2, p1), pub(v, b"t/2", b"two", 1, p2),
                            pub(v, b"t/3", b"three", 2, p3)]
        r.feed(ack(v, PUBREC, p1))
        assert r.take() == [rel(p1)]
        r.s.close()
        # Published while the link is down: stored, not sent, not a redelivery
        p4 = r.s.publish(b"t/4", b"four", 1)
        assert p4 > 0 and r.take() == []
        got = r.up(clean=False, sp=True)
        want = [rel(p1), pub(v, b"t/2", b"two", 1, p2, dup=True),
                pub(v, b"t/3", b"three", 2, p3, dup=True), pub(v, b"t/4", b"four", 1, p4)]
        assert got == want, "v%d: %r" % (v, hl(got))
        assert r.s.sp == 1
        # The resumed flows finish normally
        r.feed(ack(v, PUBCOMP, p1) + ack(v, PUBACK, p2) + ack(v, PUBREC, p3))
        assert r.take() == [rel(p3)]
        r.feed(ack(v, PUBCOMP, p3) + ack(v, PUBACK, p4))
        assert r.done == [(p1, 0), (p2, 0), (p3, 0), (p4, 0)], r.done
        assert r.s.pending() == 0 and r.in_flight() == 0
        assert r.up(clean=False, sp=True) == []  # nothing left to resend


def test_MQTT_4_6_0_1_resend_keeps_publish_order_with_pubrel_between():
    # A later message completed PUBREC before an earlier one: every PUBLISH
    # is resent in original order with DUP=1, the PUBREL exactly once.
    # [MQTT-4.4.0-1] [MQTT-3.3.1-1] [MQTT-4.6.0-1 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up(clean=False)
        p1 = r.s.publish(b"a", b"1", 1)
        p2 = r.s.publish(b"b", b"2", 2)
        p3 = r.s.publish(b"c", b"3", 2)
        p4 = r.s.publish(b"d", b"4", 1)
        r.take()
        r.feed(ack(v, PUBREC, p3))
        assert r.take() == [rel(p3)]
        r.s.close()
        got = r.up(clean=False, sp=True)
        pubs = [p for p in got if p[0] >> 4 == codec.PUBLISH]
        assert pubs == [pub(v, b"a", b"1", 1, p1, dup=True), pub(v, b"b", b"2", 2, p2, dup=True),
                        pub(v, b"d", b"4", 1, p4, dup=True)], hl(got)
        assert [p for p in got if p[0] >> 4 != codec.PUBLISH] == [rel(p3)], hl(got)


def test_MQTT_4_4_0_1_never_resend_within_one_connection():
    # Only a reconnect resends: time passing, keep-alive and duplicate acks do not.
    for v in BOTH:
        r = Rig(v)
        r.up(clean=False, keepalive=10)
        p1 = r.s.publish(b"x", b"q1", 1)
        p2 = r.s.publish(b"y", b"q2", 2)
        assert len(r.take()) == 2
        r.feed(ack(v, PUBREC, p2))
        assert r.take() == [rel(p2)]
        for _ in range(20):
            r.t += 10000
            r.s.tick()
            r.feed(b"\xd0\x00")  # PINGRESP
        r.feed(ack(v, PUBACK, 999))  # an ack for nothing we sent
        got = r.take()
        assert got == [b"\xc0\x00"] * 20, hl(got)
        assert r.in_flight() == 2 and r.done == []
        assert p1 != p2


def test_MQTT_3_2_2_5_session_present_0_discards_in_flight_state():
    # The server lost the session: unacknowledged PUBLISHes go again as new
    # messages (DUP=0, same images), a QoS 2 message whose PUBREC arrived is
    # reported SESSION_LOST, and inbound QoS 2 state is dropped.
    # [MQTT-3.1.2-6 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up(clean=False)
        p1 = r.s.publish(b"s/1", b"a", 1)
        p2 = r.s.publish(b"s/2", b"b", 2)
        p3 = r.s.publish(b"s/3", b"c", 2)
        first = r.take()
        assert len(first) == 3
        r.feed(ack(v, PUBREC, p3))
        assert r.take() == [rel(p3)]
        r.feed(pub(v, b"in", b"x", 2, 9))  # inbound QoS 2, PUBREC sent, PUBREL pending
        assert r.take() == [b"\x50\x02\x00\x09"]
        assert len(r.msgs) == 1
        r.s.close()
        got = r.up(clean=False, sp=False)
        assert got == first[:2], "v%d: %r" % (v, hl(got))
        assert r.done == [(p3, S.SESSION_LOST)]
        assert r.s.sp == 0
        assert r.s.pending() == 2 and r.in_flight() == 2
        # The inbound QoS 2 id is unknown now: PUBREL -> PUBCOMP "not found"
        # (5.0), and the same id carries a new message
        r.feed(ack(v, PUBREL, 9))
        assert r.take() == [b"\x70\x03\x00\x09\x92" if v == 5 else b"\x70\x02\x00\x09"]
        r.feed(pub(v, b"in", b"y", 2, 9))
        assert len(r.msgs) == 2 and r.msgs[1][1] == b"y"
        assert r.take() == [b"\x50\x02\x00\x09"]
        r.feed(ack(v, PUBACK, p1) + ack(v, PUBREC, p2))
        assert r.take() == [rel(p2)]


# ---- Sender flows ------------------------------------------------------------------

def test_MQTT_4_3_2_1_qos1_sender_flow():
    # [MQTT-4.3.2-2] [MQTT-4.3.2-3] [MQTT-2.2.1-3] [MQTT-3.3.1-2]
    # [MQTT-4.3.2-1 v3.1.1] [MQTT-2.3.1-1 v3.1.1] [MQTT-2.3.1-2 v3.1.1] [MQTT-2.3.1-6 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        pid = r.s.publish(b"a/b", b"hi", 1)
        assert pid == 1
        # Byte-exact, written by hand: QoS 1, DUP 0, packet id 1
        want = "32 0A 00 03 61 2F 62 00 01 00 68 69" if v == 5 else "32 09 00 03 61 2F 62 00 01 68 69"
        got = r.take()
        assert got == [unhex(want)], hl(got)
        assert r.in_flight() == 1 and r.s.pending() == 1
        r.feed(ack(v, PUBACK, pid + 1))  # not ours: still unacknowledged
        assert r.in_flight() == 1 and r.done == []
        r.feed(ack(v, PUBACK, pid))
        assert r.done == [(pid, 0)] and r.in_flight() == 0 and r.s.pending() == 0
        assert r.take() == []
        # A new message gets a new, unused id
        pid2 = r.s.publish(b"a/b", b"hi", 1)
        assert pid2 != 0 and r.take() == [pub(v, b"a/b", b"hi", 1, pid2)]
        if v == 5:
            r.feed(ack(v, PUBACK, pid2, 0x10))  # "no matching subscribers" is success
            assert r.done[-1] == (pid2, 0x10)
        # QoS 0: no packet id, DUP 0 [MQTT-4.3.1-1] [MQTT-2.2.1-2] [MQTT-2.3.1-5 v3.1.1]
        assert r.s.publish(b"a/b", b"hi", 0) == 0
        assert r.take() == [unhex("30 08 00 03 61 2F 62 00 68 69" if v == 5 else
                                  "30 07 00 03 61 2F 62 68 69")]


def test_MQTT_4_3_3_1_qos2_sender_flow():
    # [MQTT-4.3.3-2] [MQTT-4.3.3-3] [MQTT-4.3.3-4] [MQTT-4.3.3-5] [MQTT-3.6.1-1] [MQTT-2.2.1-5]
    # [MQTT-4.3.3-1 v3.1.1] [MQTT-3.6.1-1 v3.1.1] [MQTT-2.3.1-6 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        pid = r.s.publish(b"a/b", b"hi", 2)
        assert pid == 1
        want = "34 0A 00 03 61 2F 62 00 01 00 68 69" if v == 5 else "34 09 00 03 61 2F 62 00 01 68 69"
        assert r.take() == [unhex(want)]
        r.feed(ack(v, PUBCOMP, pid))  # before PUBREC: ignored, PUBLISH still unacknowledged
        assert r.done == [] and r.take() == []
        r.feed(ack(v, PUBREC, pid))
        assert r.take() == [unhex("62 02 00 01")]
        assert r.in_flight() == 1 and r.done == []  # PUBREL unacknowledged until PUBCOMP
        r.feed(ack(v, PUBCOMP, pid))
        assert r.done == [(pid, 0)] and r.s.pending() == 0
        if v == 5:
            pid = r.s.publish(b"a/b", b"hi", 2)
            r.take()
            r.feed(ack(v, PUBREC, pid, 0x10))  # success code below 0x80: PUBREL follows
            assert r.take() == [rel(pid)]
            r.feed(ack(v, PUBCOMP, pid))
            assert r.done[-1] == (pid, 0)


def test_MQTT_4_4_0_2_error_ack_ends_flow_never_retransmitted():
    # PUBACK/PUBREC >= 0x80 ends the flow: reported, slot and quota freed, no
    # PUBREL, nothing resent later; other packet ids unaffected [U-4.13.2-a]
    # [U-2.2.1-a] [MQTT-4.3.3-9]
    r = Rig(5)
    r.up(clean=False, props=[(PR.RECEIVE_MAXIMUM, 3)])
    p1 = r.s.publish(b"e", b"1", 1)
    p2 = r.s.publish(b"e", b"2", 2)
    p3 = r.s.publish(b"e", b"3", 1)
    assert len(r.take()) == 3 and r.quota_left() == 0
    r.feed(ack(5, PUBACK, p1, 0x80) + ack(5, PUBREC, p2, 0x87))
    assert r.take() == []  # no PUBREL after a failing PUBREC
    assert r.done == [(p1, 0x80), (p2, 0x87)]
    assert r.quota_left() == 2 and r.in_flight() == 1 and r.s.pending() == 1
    r.s.close()
    assert r.up(clean=False, sp=True, props=[(PR.RECEIVE_MAXIMUM, 3)]) == [
        pub(5, b"e", b"3", 1, p3, dup=True)]
    # The ids of ended flows are free again
    p4 = r.s.publish(b"e", b"4", 1)
    p5 = r.s.publish(b"e", b"5", 1)
    assert p3 not in (p4, p5) and p4 != p5 and 0 not in (p4, p5)


def test_MQTT_4_3_3_6_no_publish_resend_after_pubrel():
    # [MQTT-4.3.3-5] [MQTT-4.4.0-1] [MQTT-4.3.3-1 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up(clean=False)
        pid = r.s.publish(b"q", b"2", 2)
        r.take()
        r.feed(ack(v, PUBREC, pid))
        assert r.take() == [rel(pid)]
        r.feed(ack(v, PUBREC, pid))  # PUBREC repeated: PUBREL again, never the PUBLISH
        assert r.take() == [rel(pid)]
        for _ in range(2):
            r.s.close()
            assert r.up(clean=False, sp=True) == [rel(pid)]
        r.feed(ack(v, PUBCOMP, pid))
        assert r.done == [(pid, 0)]
        r.s.close()
        assert r.up(clean=False, sp=True) == []


def test_MQTT_2_2_1_3_packet_ids_nonzero_unused_and_wrap():
    # 65534 messages go through a second slot while id 1 stays in flight:
    # ids are never 0, never the one in use, and wrap after 65535.
    # [MQTT-4.3.2-1] [MQTT-4.3.3-1] [MQTT-2.3.1-2 v3.1.1]
    r = Rig(4, slots=2)
    r.up()
    s = r.s
    first = s.publish(b"t", b"p", 1)
    assert first == 1
    ackb = bytearray(ack(4, PUBACK, 1))
    prev = first
    last = 0
    n = 0
    while n < 65534:
        pid = s.publish(b"t", b"p", 1)
        assert 0 < pid <= 65535 and pid != first and pid != prev, pid
        ackb[2] = pid >> 8
        ackb[3] = pid & 0xFF
        r.feed(ackb)
        prev = pid
        last = max(last, pid)
        n += 1
        if n % 4096 == 0:
            assert len(r.done) == 4096 and r.done[-1] == (pid, 0)
            r.out = []
            r.done = []
    assert last == 65535
    pid = s.publish(b"t", b"p", 1)  # 65535 was the last: wraps past 0 and the busy 1
    assert pid == 2, pid
    assert in_flight(s) == 2 and s.pending() == 2


def test_MQTT_2_2_1_3_window_full_without_spinning():
    # SUBSCRIBE and PUBLISH share one id space [U-2.2.1-b]; full slots give
    # WINDOW_FULL at once and write nothing [U-2.2.1-a]
    for v in BOTH:
        r = Rig(v, slots=2)
        r.up()
        sp = r.s.subscribe([("f/#", 1)])
        p1 = r.s.publish(b"t", b"1", 1)
        p2 = r.s.publish(b"t", b"2", 2)
        assert len(set((sp, p1, p2))) == 3 and 0 not in (sp, p1, p2)
        assert len(r.take()) == 3
        assert r.s.publish(b"t", b"3", 1) == S.WINDOW_FULL
        assert r.s.publish(b"t", b"3", 2) == S.WINDOW_FULL
        # four SUBSCRIBE/UNSUBSCRIBE in flight at once, then WINDOW_FULL
        more = [r.s.subscribe([("g%d" % k, 0)]) for k in range(3)]
        assert len(r.take()) == 3
        assert r.s.subscribe([("g", 0)]) == S.WINDOW_FULL
        assert r.s.unsubscribe(["g"]) == S.WINDOW_FULL
        assert r.take() == [] and r.s.pending() == 2
        r.feed(ack(v, PUBACK, p1))
        p3 = r.s.publish(b"t", b"3", 1)
        assert p3 > 0 and p3 not in [sp, p2] + more  # in-flight SUBSCRIBE ids skipped
        assert r.take() == [pub(v, b"t", b"3", 1, p3)]
        r.feed(suback(v, sp, [1]))
        assert r.s.suback(sp) == b"\x01" and r.s.suback(sp) is None
        sp2 = r.s.subscribe([("g", 0)])
        assert sp2 > 0 and sp2 not in [p2, p3] + more


# ---- Receiver flows --------------------------------------------------------------------

def test_MQTT_4_3_2_4_qos1_puback_with_the_packet_id():
    # [MQTT-3.3.4-1] [MQTT-2.2.1-5] [MQTT-4.3.2-2 v3.1.1] [MQTT-3.3.4-1 v3.1.1] [MQTT-2.3.1-6 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"s/1", b"x", 1, 0x1234, retain=True))
        assert r.take() == [unhex("40 02 12 34")]
        assert r.msgs == [(b"s/1", b"x", 1, 0, 1, 0x1234)]
        r.feed(pub(v, b"s/0", b"y", 0))  # QoS 0: delivered, no response
        assert r.take() == [] and r.msgs[1] == (b"s/0", b"y", 0, 0, 0, 0)


def test_manual_ack_defers_qos1_puback_until_ack():
    # [MQTT-4.3.2-4] [MQTT-4.6.0-2]: the application acknowledges, in order
    for v in BOTH:
        r = Rig(v)
        r.s.manual_ack = True
        r.up()
        r.feed(pub(v, b"s", b"a", 1, 5) + pub(v, b"s", b"b", 1, 6) + pub(v, b"s", b"c", 0))
        assert [m[1] for m in r.msgs] == [b"a", b"b", b"c"] and r.take() == []
        r.s.ack(5)
        r.s.ack(6)
        assert r.take() == [unhex("40 02 00 05"), unhex("40 02 00 06")]
        r.feed(pub(v, b"s", b"d", 2, 7))  # QoS 2: no PUBREC until ack() either
        assert r.take() == [] and r.msgs[-1][1] == b"d"


def test_MQTT_4_3_3_8_manual_ack_withholds_the_pubrec():
    # [MQTT-4.3.3-8] the PUBREC once the application took the message; [MQTT-4.3.3-10]
    # a resend before PUBREL; [MQTT-4.3.3-11] the PUBCOMP; [MQTT-4.3.3-9] refused
    for v in BOTH:
        r = Rig(v)
        r.s.manual_ack = True
        r.up()
        r.feed(pub(v, b"s", b"a", 2, 9))
        assert r.take() == [] and len(r.msgs) == 1
        r.feed(pub(v, b"s", b"a", 2, 9, dup=True))  # not taken yet: delivered again, no PUBREC
        assert r.take() == [] and len(r.msgs) == 2
        r.feed(ack(v, PUBREL, 9))  # no PUBREC was sent: the id is not known
        assert r.take() == [unhex("70 02 00 09") if v == 4 else unhex("70 03 00 09 92")]
        r.s.ack(9)
        assert r.take() == [unhex("50 02 00 09")]
        r.feed(pub(v, b"s", b"a", 2, 9, dup=True))  # taken: PUBREC again, not delivered
        assert r.take() == [unhex("50 02 00 09")] and len(r.msgs) == 2
        r.feed(ack(v, PUBREL, 9))
        assert r.take() == [unhex("70 02 00 09")]
        if v == 5:  # refused by the application: PUBREC 0x80 ends the flow
            r.feed(pub(v, b"s", b"b", 2, 10))
            r.s.ack(10, 0x80)
            assert r.take() == [unhex("50 03 00 0a 80")]
            r.feed(pub(v, b"s", b"b", 2, 10))  # [MQTT-4.3.3-9] a new message
            assert r.take() == [] and r.msgs[-1][1] == b"b" and len(r.msgs) == 4


def test_MQTT_4_3_2_5_same_id_after_puback_is_a_new_message():
    # [MQTT-4.3.2-2 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"s", b"first", 1, 7))
        r.feed(pub(v, b"s", b"second", 1, 7, dup=True))
        assert [m[1] for m in r.msgs] == [b"first", b"second"]
        assert r.take() == [unhex("40 02 00 07")] * 2


def test_MQTT_4_3_3_10_qos2_duplicate_before_pubrel_delivered_once():
    # [MQTT-4.3.3-8] [MQTT-4.3.3-2 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"d", b"once", 2, 5))
        r.feed(pub(v, b"d", b"once", 2, 5, dup=True))
        r.feed(pub(v, b"d", b"once", 2, 5, dup=True))
        assert r.msgs == [(b"d", b"once", 2, 0, 0, 5)]
        assert r.take() == [unhex("50 02 00 05")] * 3


def test_MQTT_4_3_3_11_pubrel_answered_with_pubcomp():
    # [MQTT-3.7.2-1] [MQTT-4.3.3-2 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"d", b"m", 2, 0x0102))
        assert r.take() == [unhex("50 02 01 02")]
        r.feed(ack(v, PUBREL, 0x0102))
        assert r.take() == [unhex("70 02 01 02")]
        r.feed(ack(v, PUBREL, 0x0102))  # already released: "not found" on 5.0
        assert r.take() == [unhex("70 03 01 02 92" if v == 5 else "70 02 01 02")]
        assert len(r.msgs) == 1


def test_MQTT_4_3_3_13_qos2_receiver_completes_despite_expiry():
    # The client applies no expiry to what it receives: however late the
    # PUBREL, the flow completes and the message was delivered once.
    r = Rig(5)
    r.up(keepalive=0)
    r.feed(pub(5, b"e", b"m", 2, 21, props=[(PR.MESSAGE_EXPIRY, 1)]))
    r.t += 3600000
    r.s.tick()
    r.feed(pub(5, b"e", b"m", 2, 21, dup=True, props=[(PR.MESSAGE_EXPIRY, 1)])
           + ack(5, PUBREL, 21))
    assert r.take() == [unhex("50 02 00 15"), unhex("50 02 00 15"), unhex("70 02 00 15")]
    assert len(r.msgs) == 1


def test_MQTT_4_3_3_12_same_id_after_pubcomp_is_a_new_message():
    # [MQTT-4.3.3-2 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"d", b"one", 2, 3) + ack(v, PUBREL, 3))
        r.feed(pub(v, b"d", b"two", 2, 3) + pub(v, b"d", b"two", 2, 3, dup=True))
        assert [m[1] for m in r.msgs] == [b"one", b"two"]
        assert r.take() == [unhex("50 02 00 03"), unhex("70 02 00 03"), unhex("50 02 00 03"),
                            unhex("50 02 00 03")]


def test_MQTT_4_6_0_2_acks_in_arrival_order():
    # [MQTT-4.6.0-3] [MQTT-4.6.0-2 v3.1.1] [MQTT-4.6.0-3 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"a", b"1", 1, 3) + pub(v, b"b", b"2", 2, 1) + pub(v, b"c", b"3", 1, 2)
               + pub(v, b"d", b"4", 0) + pub(v, b"e", b"5", 2, 4))
        assert r.take() == [unhex("40 02 00 03"), unhex("50 02 00 01"), unhex("40 02 00 02"),
                            unhex("50 02 00 04")]
        assert [m[0] for m in r.msgs] == [b"a", b"b", b"c", b"d", b"e"]


def test_MQTT_4_6_0_4_pubrel_in_pubrec_order():
    # [MQTT-4.6.0-4 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        p = [r.s.publish(b"o", b"x", 2) for _ in range(3)]
        r.take()
        r.feed(ack(v, PUBREC, p[1]) + ack(v, PUBREC, p[2]) + ack(v, PUBREC, p[0]))
        assert r.take() == [rel(p[1]), rel(p[2]), rel(p[0])]


def test_MQTT_4_5_0_2_callback_error_still_acknowledged():
    # [MQTT-4.5.0-2 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        calls = []

        def boom(m):
            calls.append(m.pid)
            raise ValueError("application failed")

        r.s.on_message = boom
        # raised out of packet() once the message is acknowledged
        for p in (pub(v, b"x", b"1", 1, 10), pub(v, b"x", b"2", 2, 11)):
            assert str(raises(ValueError, r.feed, p)) == "application failed"
        r.feed(pub(v, b"x", b"2", 2, 11, dup=True))
        assert calls == [10, 11]
        assert r.take() == [unhex("40 02 00 0A"), unhex("50 02 00 0B"), unhex("50 02 00 0B")]
        assert r.s.up
        r.feed(ack(v, PUBREL, 11))
        assert r.take() == [unhex("70 02 00 0B")]


# ---- Flow control ---------------------------------------------------------------------------

def test_MQTT_4_9_0_1_quota_starts_at_server_receive_maximum():
    # A new connection resets the quota; what is still in flight counts [U-4.9-a]
    r = Rig(5)
    r.up(clean=False, props=[(PR.RECEIVE_MAXIMUM, 3)])
    assert r.s.quota == 3 and r.quota_left() == 3
    r.s.publish(b"q", b"1", 1)
    r.s.publish(b"q", b"2", 2)
    assert r.quota_left() == 1 and len(r.take()) == 2
    r.s.close()
    assert len(r.up(clean=False, sp=True, props=[(PR.RECEIVE_MAXIMUM, 5)])) == 2
    assert r.s.quota == 5 and r.quota_left() == 3
    # No Receive Maximum in CONNACK: 65,535; 3.1.1 has no limit either: the
    # session's own table (slots) is the only bound
    for v in BOTH:
        r = Rig(v)
        r.up()
        assert r.s.quota == r.s.slots == 8
        for i in range(8):
            r.s.publish(b"q", b"x", 1 + i % 2)
        assert len(r.take()) == 8 and r.quota_left() == 0
        assert r.s.publish(b"q", b"x", 1) == S.WINDOW_FULL


def test_MQTT_4_9_0_2_zero_quota_stops_only_qos_publishes():
    # [MQTT-3.3.4-7] [MQTT-3.3.4-8] [MQTT-4.9.0-3]
    r = Rig(5)
    r.up(keepalive=10, props=[(PR.RECEIVE_MAXIMUM, 2)])
    p1 = r.s.publish(b"f", b"1", 1)
    p2 = r.s.publish(b"f", b"2", 2)
    assert r.take() == [pub(5, b"f", b"1", 1, p1), pub(5, b"f", b"2", 2, p2)]
    assert r.quota_left() == 0
    p3 = r.s.publish(b"f", b"3", 1)
    p4 = r.s.publish(b"f", b"4", 2)
    assert p3 > 0 and p4 > 0 and r.take() == []  # stored, not sent
    assert r.in_flight() == 2 and r.s.pending() == 4
    # Everything else still goes out and is still answered
    assert r.s.publish(b"f", b"0", 0) == 0
    sp = r.s.subscribe([("f", 1)])
    r.feed(pub(5, b"in", b"x", 1, 40) + ack(5, PUBREC, p2))
    r.t += 10000
    r.s.tick()
    assert r.take() == [pub(5, b"f", b"0", 0), b"\x82\x07" + u16(sp) + b"\x00\x00\x01f\x01",
                        unhex("40 02 00 28"), rel(p2), b"\xc0\x00"]
    # A PUBACK frees one unit: the oldest stored message goes, in order
    r.feed(ack(5, PUBACK, p1))
    assert r.take() == [pub(5, b"f", b"3", 1, p3)]
    r.feed(ack(5, PUBCOMP, p2))
    assert r.take() == [pub(5, b"f", b"4", 2, p4)]
    assert r.quota_left() == 0 and r.in_flight() == 2


def test_U_4_9_a_quota_restored_by_every_ending_ack():
    # PUBACK (any code), PUBCOMP and PUBREC >= 0x80 give one unit back; never
    # above the initial value [MQTT-4.9.0-2]
    r = Rig(5)
    r.up(props=[(PR.RECEIVE_MAXIMUM, 1)])
    p1 = r.s.publish(b"u", b"1", 1)
    p2 = r.s.publish(b"u", b"2", 2)
    p3 = r.s.publish(b"u", b"3", 2)
    p4 = r.s.publish(b"u", b"4", 1)
    assert r.take() == [pub(5, b"u", b"1", 1, p1)]
    r.feed(ack(5, PUBACK, p1, 0x80))
    assert r.take() == [pub(5, b"u", b"2", 2, p2)]
    r.feed(ack(5, PUBREC, p2))
    assert r.take() == [rel(p2)] and r.quota_left() == 0  # PUBREC < 0x80 keeps the unit
    r.feed(ack(5, PUBCOMP, p2))
    assert r.take() == [pub(5, b"u", b"3", 2, p3)]
    r.feed(ack(5, PUBREC, p3, 0x87))
    assert r.take() == [pub(5, b"u", b"4", 1, p4)]
    r.feed(ack(5, PUBACK, 77) + ack(5, PUBCOMP, 78))  # acks for nothing
    assert r.quota_left() == 0 and r.take() == []
    r.feed(ack(5, PUBACK, p4) + ack(5, PUBACK, p4))
    assert r.quota_left() == 1
    assert r.done == [(p1, 0x80), (p2, 0), (p3, 0x87), (p4, 0)]


# ---- Topic aliases, outbound ---------------------------------------------------------------

def test_MQTT_3_2_2_18_no_topic_alias_without_maximum():
    for v in BOTH:
        r = Rig(v)  # session able to use 8 aliases
        r.up()
        r.s.publish(b"x/y", b"p", 0)
        r.s.publish(b"x/y", b"p", 0)
        pid = r.s.publish(b"x/y", b"p", 1)
        assert r.take() == [pub(v, b"x/y", b"p")] * 2 + [pub(v, b"x/y", b"p", 1, pid)]


def test_MQTT_3_2_2_17_topic_alias_never_above_server_maximum():
    # [MQTT-3.3.2-9] [MQTT-3.3.2-8]
    r = Rig(5)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 2)])
    for t in (b"a", b"b", b"c", b"d", b"a", b"c", b"b"):
        r.s.publish(t, b"p", 0)
    got = [alias_of(p) for p in r.take()]
    # (alias, topic length): a, b get 1 and 2; c, d none; a, b reuse theirs
    assert got == [(1, 1), (2, 1), (0, 1), (0, 1), (1, 0), (0, 1), (2, 0)], got
    # The session's own table is smaller than the server's maximum
    r = Rig(5, aliases_out=1)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 10)])
    for t in (b"a", b"b", b"a", b"b"):
        r.s.publish(t, b"p", 0)
    assert [alias_of(p) for p in r.take()] == [(1, 1), (0, 1), (1, 0), (0, 1)]


def test_MQTT_3_3_2_8_first_publish_full_topic_then_empty_topic():
    # [MQTT-3.3.2-9] [MQTT-3.2.2-17]
    r = Rig(5)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    r.s.publish(b"a/b", b"hi", 0)
    r.s.publish(b"a/b", b"hi", 0)
    # Written by hand: topic + alias 1, then empty topic + alias 1
    assert r.take() == [unhex("30 0B 00 03 61 2F 62 03 23 00 01 68 69"),
                        unhex("30 08 00 00 03 23 00 01 68 69")]
    props = [(PR.USER_PROPERTY, ("k", "v"))]
    p1 = r.s.publish(b"a/b", b"q1", 1, False, P(props))
    p2 = r.s.publish("sensors/temp", b"21.5", 2, True, P(props))  # str topics work too
    p3 = r.s.publish("sensors/temp", b"21.6", 2, True, P(props))
    assert r.take() == [pub(5, b"", b"q1", 1, p1, props=props, alias=1),
                        pub(5, "sensors/temp", b"21.5", 2, p2, True, props=props, alias=2),
                        pub(5, b"", b"21.6", 2, p3, True, props=props, alias=2)]


def test_MQTT_3_3_2_7_outbound_aliases_forgotten_on_new_connection():
    r = Rig(5)
    r.up(clean=False, props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    r.s.publish(b"a/b", b"0", 0)
    pid = r.s.publish(b"a/b", b"1", 1)
    assert r.take() == [pub(5, b"a/b", b"0", alias=1), pub(5, b"", b"1", 1, pid, alias=1)]
    r.s.close()
    # The resent image names its topic and carries no alias
    got = r.up(clean=False, sp=True, props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    assert got == [pub(5, b"a/b", b"1", 1, pid, dup=True)], hl(got)
    r.s.publish(b"a/b", b"2", 0)
    assert r.take() == [pub(5, b"a/b", b"2", alias=1)]  # a new mapping, full topic
    r.s.close()
    r.up(clean=False, sp=True)  # this server takes no aliases
    r.s.publish(b"a/b", b"3", 0)
    assert r.take() == [pub(5, b"a/b", b"3")]


def test_publish_qos0_known_alias_bytes():
    # Once the server has a topic's alias, a QoS 0 PUBLISH without properties
    # takes the session's short path: the same bytes as the encoder writes.
    r = Rig(5, tx_size=512)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    t = b"s/temp"
    r.s.publish(t, b"first", 0)
    assert r.take() == [pub(5, t, b"first", alias=1)]
    for payload in (b"", b"x", bytes(121), bytes(122), bytes(300), bytearray(b"ba"),
                    memoryview(b"mv")):
        for retain in (False, True):
            assert r.s.publish(t, payload, 0, retain) == 0
            want = pub(5, b"", payload if payload is not None else b"", 0, retain=retain,
                       alias=1)
            assert r.take() == [want], (len(payload or b""), retain)
    # a str payload goes UTF-8 encoded, on this path as on the others
    assert r.s.publish(t, "t\u00e9xt", 0) == 0
    assert r.take() == [pub(5, b"", "t\u00e9xt".encode(), 0, alias=1)]


def test_publish_qos0_repeated_topic_bytes():
    # The same short path sends the plain topic when there is no alias for
    # it: 3.1.1, a 5.0 server without aliases, a full alias table, a topic
    # too short for an alias to save bytes; str topics too.
    cases = [(4, None, b"s/temp"), (4, None, "s/t\u00e9mp"), (5, None, b"s/temp"),
             (5, [(PR.TOPIC_ALIAS_MAXIMUM, 4)], b"ab"),
             (5, [(PR.TOPIC_ALIAS_MAXIMUM, 1)], "s/t\u00e9mp")]
    for v, props, t in cases:
        r = Rig(v, tx_size=512)
        r.up(props=props)
        if props and props[0][1] == 1:
            r.s.publish(b"other", b"", 0)  # takes the only alias
            r.take()
        alias = 1 if props and t == b"ab" else 0
        first = True
        for payload in (b"first", b"", bytes(100), bytes(130), bytearray(b"ba")):
            for retain in (False, True):
                assert r.s.publish(t, payload, 0, retain) == 0
                want = pub(v, t if first or not alias else b"",
                           payload if payload is not None else b"", 0, retain=retain,
                           alias=alias)
                got = r.take()
                assert got == [want], (v, t, hl(got), h(want))
                first = False


def test_publish_qos0_known_alias_limits_are_the_plain_packets():
    # The Maximum Packet Size and tx_size bound the plain packet (as when the
    # server has no alias for the topic), even where the aliased one is smaller.
    t = b"sensors/t"  # plain: 14 + payload bytes, aliased: 8 + payload bytes
    r = Rig(5)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4), (PR.MAXIMUM_PACKET_SIZE, 40)])
    r.s.publish(t, b"", 0)  # the topic and its new alias: 17 bytes
    r.s.publish(t, bytes(26), 0)
    assert r.take() == [pub(5, t, b"", alias=1), pub(5, b"", bytes(26), alias=1)]
    raises(ValueError, r.s.publish, t, bytes(27), 0)
    r = Rig(5, tx_size=32 + SPARE)  # a 32-byte packet at most
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    r.s.publish(t, b"", 0)
    r.s.publish(t, bytes(18), 0)
    assert r.take() == [pub(5, t, b"", alias=1), pub(5, b"", bytes(18), alias=1)]
    raises(ValueError, r.s.publish, t, bytes(19), 0)
    assert r.take() == []
    # a server without retained messages: refused on this path too [MQTT-3.2.2-14]
    r = Rig(5)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4), (PR.RETAIN_AVAILABLE, 0)])
    r.s.publish(t, b"a", 0)
    raises(ValueError, r.s.publish, t, b"b", 0, True)
    assert r.take() == [pub(5, t, b"a", alias=1)]


def test_publish_qos0_repeated_topic_limits():
    for v in BOTH:
        t = b"sensors/t"  # 3.1.1: 13 + payload bytes, 5.0: 14
        head = 13 if v == 4 else 14
        r = Rig(v, tx_size=40 + SPARE)  # a 40-byte packet at most
        r.up()
        r.s.publish(t, b"", 0)
        r.s.publish(t, bytes(40 - head), 0)
        assert r.take() == [pub(v, t, b""), pub(v, t, bytes(40 - head))]
        e = raises(ValueError, r.s.publish, t, bytes(41 - head), 0)
        assert "a PUBLISH of 41 bytes, over the 40 its buffer holds" in str(e)
        assert r.take() == []
    r = Rig(5)
    r.up(props=[(PR.MAXIMUM_PACKET_SIZE, 30)])
    r.s.publish(b"a/b", b"", 0)
    r.s.publish(b"a/b", bytes(22), 0)
    raises(ValueError, r.s.publish, b"a/b", bytes(23), 0)  # [MQTT-3.2.2-15]
    assert r.take() == [pub(5, b"a/b", b""), pub(5, b"a/b", bytes(22))]


def test_publish_topic_checked_again_when_it_can_change():
    # An immutable topic (bytes, str) is checked once while it stays the last
    # one published; a bytearray or memoryview topic every time.
    for v in BOTH:
        r = Rig(v)
        r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)] if v == 5 else None)
        t = bytearray(b"a/b")
        r.s.publish(t, b"1", 0)
        t[2] = 0x23  # "a/#"
        raises(ValueError, r.s.publish, t, b"2", 0)  # [MQTT-3.3.2-2]
        raises(ValueError, r.s.publish, memoryview(t), b"2", 1)
        t[2] = 0x63  # "a/c"
        r.s.publish(t, b"3", 0)
        bad = b"x/+"
        raises(ValueError, r.s.publish, bad, b"4", 0)
        raises(ValueError, r.s.publish, bad, b"4", 0)  # still refused
        raises(ValueError, r.s.publish, b"", b"5", 0)  # [MQTT-4.7.3-1]
        r.s.publish(b"a/b", b"6", 0)
        r.s.publish(b"a/b", b"7", 0)
        got = r.take()
        if v == 5:  # mutable topics get no alias
            assert got == [pub(5, b"a/b", b"1"), pub(5, b"a/c", b"3"),
                           pub(5, b"a/b", b"6", alias=1), pub(5, b"", b"7", alias=1)], hl(got)
        else:
            assert got == [pub(4, b"a/b", b"1"), pub(4, b"a/c", b"3"), pub(4, b"a/b", b"6"),
                           pub(4, b"a/b", b"7")], hl(got)


def test_publish_qos0_known_alias_between_other_packets():
    # Acks, pings, other topics and QoS 1 go out from the same buffer in
    # between: every packet still carries its own bytes.
    r = Rig(5)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)], keepalive=10)
    t = b"s/one"
    r.s.publish(t, b"0", 0)
    r.s.publish(t, b"1", 0)
    r.feed(pub(5, b"in", b"x", 1, 7))  # PUBACK from tx
    r.s.publish(t, b"2", 0)
    r.t += 10000
    r.s.tick()  # PINGREQ from tx
    r.s.publish(t, b"3", 0)
    pid = r.s.publish(t, b"4", 1)
    r.s.publish(b"s/two", b"5", 0)
    r.s.publish(t, b"6", 0)
    r.s.publish(t, b"7", 0)
    got = r.take()
    assert got == [pub(5, t, b"0", alias=1), pub(5, b"", b"1", alias=1), unhex("40 02 00 07"),
                   pub(5, b"", b"2", alias=1), unhex("C0 00"), pub(5, b"", b"3", alias=1),
                   pub(5, b"", b"4", 1, pid, alias=1), pub(5, b"s/two", b"5", alias=2),
                   pub(5, b"", b"6", alias=1), pub(5, b"", b"7", alias=1)], hl(got)


def test_publish_qos0_known_alias_write_fails():
    r = Rig(5)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    r.s.publish(b"a/b", b"1", 0)
    r.fail_writes = True
    # the link is gone: the connection ends, and a QoS 0 message (never
    # stored) reports it
    raises(OSError, r.s.publish, b"a/b", b"2", 0)
    assert not r.s.up and r.s.sock is None and r.closed == 1
    raises(OSError, r.s.publish, b"a/b", b"3", 0)  # QoS 0 needs a connection


# ---- Topic aliases, inbound ---------------------------------------------------------------

def test_MQTT_3_3_2_10_inbound_aliases_accepted_up_to_our_maximum():
    r = Rig(5, aliases_in=4)
    r.begin(True)
    (c,) = r.take()
    assert SV.decode_packet(_PKT, c, 0, len(c), 5) == codec.CONNECT
    assert (PR.TOPIC_ALIAS_MAXIMUM, 4) in _PKT.extra.props
    r.feed(connack(5))
    r.feed(pub(5, b"t/one", b"1", alias=1) + pub(5, b"t/four", b"4", 1, 1, alias=4)
           + pub(5, b"", b"5", alias=4) + pub(5, b"", b"6", 2, 2, alias=1))
    assert [(m[0], m[1]) for m in r.msgs] == [(b"t/one", b"1"), (b"t/four", b"4"),
                                              (b"t/four", b"5"), (b"t/one", b"6")]
    assert r.take() == [unhex("40 02 00 01"), unhex("50 02 00 02")]


def test_U_3_3_4_b_inbound_alias_mapping_update():
    r = Rig(5, aliases_in=2)
    r.up()
    r.feed(pub(5, b"first", b"1", alias=2) + pub(5, b"", b"2", alias=2)
           + pub(5, b"second", b"3", alias=2) + pub(5, b"", b"4", alias=2))
    assert [m[0] for m in r.msgs] == [b"first", b"first", b"second", b"second"]


def test_MQTT_3_3_2_7_inbound_aliases_forgotten_on_new_connection():
    # [U-3.3.4-c] [U-4.13.1-a]
    r = Rig(5, aliases_in=2)
    r.up(clean=False)
    r.feed(pub(5, b"kept?", b"1", alias=1))
    r.s.close()
    r.up(clean=False, sp=True)
    e = raises(MQTTError, r.feed, pub(5, b"", b"2", alias=1))
    assert e.reason == 0x82
    assert r.take() == [unhex("E0 01 82")] and not r.s.up
    assert len(r.msgs) == 1


# ---- Message expiry ---------------------------------------------------------------------------

def _exp(s):
    return [(PR.MESSAGE_EXPIRY, s)]


def test_MQTT_4_3_3_7_qos2_expiry_untouched_once_sent():
    r = Rig(5)
    r.up(clean=False)
    pid = r.s.publish(b"x", b"2", 2, False, P(_exp(100)))
    assert r.take() == [pub(5, b"x", b"2", 2, pid, props=_exp(100))]
    r.s.close()
    r.t += 200000  # well past its expiry
    assert r.up(clean=False, sp=True) == [pub(5, b"x", b"2", 2, pid, dup=True, props=_exp(100))]
    assert r.done == []


def test_MQTT_4_3_3_7_qos1_expiry_lowered_by_waiting_time():
    # The contrast: QoS 1 (sent or never sent) and unsent QoS 2 messages carry
    # the interval left when they are (re)sent.
    r = Rig(5)
    r.up(clean=False)
    props = [(PR.USER_PROPERTY, ("a", "b")), (PR.MESSAGE_EXPIRY, 100), (PR.CONTENT_TYPE, "t")]
    p1 = r.s.publish(b"x", b"1", 1, False, P(props))
    assert r.take() == [pub(5, b"x", b"1", 1, p1, props=props)]
    r.s.close()
    r.t += 30000
    p2 = r.s.publish(b"x", b"2", 1, False, P(_exp(100)))  # queued while offline
    p3 = r.s.publish(b"x", b"3", 2, False, P(_exp(100)))
    r.t += 10500
    got = r.up(clean=False, sp=True)
    left = [(PR.USER_PROPERTY, ("a", "b")), (PR.MESSAGE_EXPIRY, 60), (PR.CONTENT_TYPE, "t")]
    assert got == [pub(5, b"x", b"1", 1, p1, dup=True, props=left),
                   pub(5, b"x", b"2", 1, p2, props=_exp(90)),
                   pub(5, b"x", b"3", 2, p3, props=_exp(90))], hl(got)
    # A QoS 1 message waiting for quota is lowered too
    r = Rig(5)
    r.up(props=[(PR.RECEIVE_MAXIMUM, 1)])
    p1 = r.s.publish(b"y", b"1", 1)
    p2 = r.s.publish(b"y", b"2", 1, False, P(_exp(50)))
    r.t += 20000
    r.feed(ack(5, PUBACK, p1))
    assert r.take() == [pub(5, b"y", b"1", 1, p1), pub(5, b"y", b"2", 1, p2, props=_exp(30))]


def test_MQTT_4_3_3_7_expired_stored_messages_dropped():
    r = Rig(5)
    r.up(clean=False)
    p1 = r.s.publish(b"z", b"1", 1, False, P(_exp(10)))
    r.take()
    r.s.close()
    p2 = r.s.publish(b"z", b"2", 2, False, P(_exp(5)))  # never sent: expiry applies
    p3 = r.s.publish(b"z", b"3", 1)
    r.t += 20000
    assert r.up(clean=False, sp=True) == [pub(5, b"z", b"3", 1, p3)]
    assert sorted(r.done) == sorted([(p1, S.EXPIRED), (p2, S.EXPIRED)])
    assert r.s.pending() == 1 and r.quota_left() == r.s.slots - 1


# ---- Keep-alive -----------------------------------------------------------------------------------

def test_MQTT_3_1_2_20_pingreq_after_keepalive_idle():
    # [MQTT-3.1.2-23 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up(keepalive=10)
        assert r.s.tick() == 10000
        r.t += 9999
        r.s.tick()
        assert r.take() == [] and r.s.tick() == 1
        r.t += 1
        r.s.tick()
        assert r.take() == [b"\xc0\x00"]
        r.s.tick()  # one PINGREQ at a time
        assert r.take() == []
        r.feed(b"\xd0\x00")
        r.t += 10000
        r.s.tick()
        assert r.take() == [b"\xc0\x00"]
        # Keep alive 0: no PINGREQ ever
        r = Rig(v)
        r.up(keepalive=0)
        r.t += 10000000
        r.s.tick()
        assert r.take() == [] and r.s.tick() == -1


def test_MQTT_3_1_2_21_server_keep_alive_replaces_ours():
    r = Rig(5)
    r.up(keepalive=60, props=[(PR.SERVER_KEEP_ALIVE, 5)])
    r.t += 5000
    r.s.tick()
    assert r.take() == [b"\xc0\x00"]


# ---- Zero allocation (heap locked under MicroPython) ----------------------------------------------

_NA_NOW = [50000]


def _na_clock():
    return _NA_NOW[0]


_NA_CAP = Capture(4096, 64)
_NA_IN = Input(2048)
_NA_S = S.Session("noalloc", 5, clock=_na_clock)
_NA_T1 = b"na/one"
_NA_T2 = b"na/two"
_NA_T3 = b"na/three"
_NA_PAY = b"payload bytes"
_NA_PAIRS = [(PR.MESSAGE_EXPIRY, 3600), (PR.CONTENT_TYPE, "text/plain"),
             (PR.USER_PROPERTY, ("k", "v"))]
_NA_PROPS = P(_NA_PAIRS)  # built once, reused by every publish
_NA_PIDS = array("i", [0, 0, 0])
_NA_DONE = array("i", bytes(4 * 16))  # pid, reason pairs
_NA_DN = [0]
_NA_GOT = array("i", [0, 0, 0])  # messages, topic matches T1, payload bytes


def _na_done(pid, reason):
    i = _NA_DN[0]
    _NA_DONE[i] = pid
    _NA_DONE[i + 1] = reason
    _NA_DN[0] = i + 2


def _na_msg(m):
    _NA_GOT[0] += 1
    if m.topic_is(_NA_T1):
        _NA_GOT[1] += 1
    _NA_GOT[2] += m.payload_len


_NA_S.on_done = _na_done
_NA_S.on_message = _na_msg


def _na_connect():
    """A fresh connection for the no-alloc session (allocates: not locked)."""
    _NA_S.begin(_NA_CAP, True)
    _NA_IN.load(connack(5, props=[(PR.TOPIC_ALIAS_MAXIMUM, 4), (PR.RECEIVE_MAXIMUM, 20)]))
    _na_drain()
    assert _NA_S.up
    _NA_CAP.clear()
    _NA_DN[0] = 0
    for i in range(3):
        _NA_GOT[i] = 0


def _na_publish(t_q2):
    s = _NA_S
    _NA_PIDS[0] = s.publish(_NA_T1, _NA_PAY, 0, False, _NA_PROPS)
    _NA_PIDS[1] = s.publish(_NA_T1, _NA_PAY, 1, False, _NA_PROPS)
    _NA_PIDS[2] = s.publish(t_q2, _NA_PAY, 2, False, _NA_PROPS)


def _na_drain():
    _NA_IN.drain(_NA_S)


def _na_acks():
    p1 = _NA_PIDS[1]
    p2 = _NA_PIDS[2]
    _NA_IN.load(ack(5, PUBACK, p1) + ack(5, PUBREC, p2) + ack(5, PUBCOMP, p2))


def test_no_alloc_publish_qos012_with_props_and_alias_and_acks():
    _na_connect()
    # Warm up once: T1 gets alias 1, T2 alias 2
    _na_publish(_NA_T2)
    _na_acks()
    _na_drain()
    assert _NA_DN[0] == 4
    _NA_CAP.clear()
    _NA_DN[0] = 0
    # Locked: T1 reuses alias 1 (empty topic), T3 takes the new alias 3
    no_alloc(_na_publish, _NA_T3)
    p1 = _NA_PIDS[1]
    p2 = _NA_PIDS[2]
    assert _NA_PIDS[0] == 0 and p1 > 0 and p2 > 0
    assert _NA_CAP.packets() == [pub(5, b"", _NA_PAY, 0, props=_NA_PAIRS, alias=1),
                                 pub(5, b"", _NA_PAY, 1, p1, props=_NA_PAIRS, alias=1),
                                 pub(5, _NA_T3, _NA_PAY, 2, p2, props=_NA_PAIRS, alias=3)]
    _NA_CAP.clear()
    _na_acks()
    no_alloc(_na_drain)
    assert _NA_CAP.packets() == [rel(p2)]
    assert list(_NA_DONE[:_NA_DN[0]]) == [p1, 0, p2, 0]
    assert _NA_S.pending() == 0 and _NA_S.quota == 8 and in_flight(_NA_S) == 0  # Receive Maximum 20, 8 slots


def _na_publish_q0():
    s = _NA_S
    _NA_PIDS[0] = s.publish(_NA_T1, _NA_PAY, 0)
    _NA_PIDS[1] = s.publish(_NA_T1, _NA_PAY, 0, True)
    _NA_PIDS[2] = s.publish(_NA_T1, b"", 0)


def test_no_alloc_publish_qos0_known_alias():
    _na_connect()
    _NA_S.publish(_NA_T1, _NA_PAY, 0)  # announces alias 1
    _NA_CAP.clear()
    no_alloc(_na_publish_q0)
    assert list(_NA_PIDS) == [0, 0, 0]
    assert _NA_CAP.packets() == [pub(5, b"", _NA_PAY, 0, alias=1),
                                 pub(5, b"", _NA_PAY, 0, retain=True, alias=1),
                                 pub(5, b"", b"", 0, alias=1)]


_NA4_CAP = Capture(1024, 16)
_NA4_S = S.Session("noalloc4", 4, clock=_na_clock)


def _na4_publish():
    s = _NA4_S
    s.publish(_NA_T1, _NA_PAY, 0)
    s.publish(_NA_T1, _NA_PAY, 0, True)
    s.publish(_NA_T1, b"", 0)


def test_no_alloc_publish_qos0_repeated_topic_v4():
    s = _NA4_S
    s.begin(_NA4_CAP, True)
    frame(s, connack(4), 0, 4)
    assert s.up
    s.publish(_NA_T1, _NA_PAY, 0)
    _NA4_CAP.clear()
    no_alloc(_na4_publish)
    assert _NA4_CAP.packets() == [pub(4, _NA_T1, _NA_PAY), pub(4, _NA_T1, _NA_PAY, retain=True),
                                  pub(4, _NA_T1, b"")]


def _na_inbound():
    _NA_IN.load(pub(5, _NA_T1, _NA_PAY, 1, 10, props=_NA_PAIRS)
                + pub(5, _NA_T1, b"x", 2, 11, props=[(PR.PAYLOAD_FORMAT, 1)])
                + ack(5, PUBREL, 11)
                + pub(5, _NA_T2, b"yy", 0, alias=1)
                + pub(5, b"", b"zzz", 2, 12, alias=1)
                + pub(5, b"", b"zzz", 2, 12, dup=True, alias=1)
                + ack(5, PUBREL, 12))


def test_no_alloc_inbound_qos1_qos2_dispatch():
    _na_connect()
    _na_inbound()
    _na_drain()  # warm up
    want = [unhex("40 02 00 0A"), unhex("50 02 00 0B"), unhex("70 02 00 0B"),
            unhex("50 02 00 0C"), unhex("50 02 00 0C"), unhex("70 02 00 0C")]
    assert _NA_CAP.packets() == want
    assert list(_NA_GOT) == [4, 2, len(_NA_PAY) + 1 + 2 + 3]
    _na_connect()
    _na_inbound()
    no_alloc(_na_drain)  # a MemoryError in on_message would leave packet()
    assert _NA_CAP.packets() == want
    assert list(_NA_GOT) == [4, 2, len(_NA_PAY) + 1 + 2 + 3]
    assert _NA_S.up
