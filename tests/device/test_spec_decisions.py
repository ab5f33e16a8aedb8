"""The divergences between Session and lite.Publisher (issue 13's table),
each decided once, by its spec id, and asserted on Session; the sans-I/O core
follows the same tests. docs/protocol-decisions.md says why for each.
Runs unchanged on CPython and on the MicroPython unix port.
"""
import errno
from _util import raises, unhex
from frugalmqtt import props as PR
from frugalmqtt import session as S
from frugalmqtt.codec import PUBACK, PUBREC, PUBREL, PUBCOMP
from _session_rig import BOTH, Rig, hl, pub, ack, connack, rel
from _lite_rig import Peer, Lite


def test_MQTT_3_3_4_7_resume_holds_publishes_over_the_receive_maximum():
    # Two QoS 1 in flight, the server's Receive Maximum now 1: one is resent,
    # the other held (DUP=1, it was sent before) until the PUBACK frees the
    # quota [MQTT-4.9.0-1] [MQTT-4.9.0-2] [MQTT-4.4.0-1] [MQTT-3.3.1-1] [MQTT-4.6.0-1]
    r = Rig(5)
    r.up(clean=False)
    p1 = r.s.publish(b"t", b"1", 1)
    p2 = r.s.publish(b"t", b"2", 1)
    r.take()
    r.s.lost()
    got = r.up(clean=False, sp=True, props=[(PR.RECEIVE_MAXIMUM, 1)])
    assert got == [pub(5, b"t", b"1", 1, p1, dup=True)], hl(got)
    assert r.s.quota == 0 and r.s.pending() == 2
    r.feed(ack(5, PUBACK, p1))
    assert r.take() == [pub(5, b"t", b"2", 1, p2, dup=True)]
    assert r.done == [(p1, 0)]


def test_MQTT_3_3_4_7_resume_counts_pubrel_flows_and_never_holds_a_pubrel():
    # A QoS 2 flow past PUBREC holds a unit of the quota until PUBCOMP; its
    # PUBREL is not a PUBLISH and is never held [MQTT-3.3.4-8] [U-4.9-a].
    # A held QoS 2 PUBLISH was sent once: its expiry no longer applies [MQTT-4.3.3-7]
    r = Rig(5)
    r.up(clean=False)
    p1 = r.s.publish(b"t", b"a", 2, False, [(PR.MESSAGE_EXPIRY, 1)])
    p2 = r.s.publish(b"t", b"b", 2)
    r.feed(ack(5, PUBREC, p2))
    r.take()
    r.s.lost()
    got = r.up(clean=False, sp=True, props=[(PR.RECEIVE_MAXIMUM, 1)])
    assert got == [rel(p2)], hl(got)  # p1 (older) waits: p2's flow holds the only unit
    r.t += 5000  # past p1's expiry: it is sent all the same
    r.feed(ack(5, PUBCOMP, p2))
    got = r.take()
    assert len(got) == 1 and got[0][0] == 0x3C and got[0][-1:] == b"a", hl(got)  # QoS 2, DUP
    assert r.done == [(p2, 0)]


def test_MQTT_3_7_2_1_pubrel_for_an_unknown_id_gets_pubcomp_0x92():
    # 0x92 Packet Identifier not found; 3.1.1 has no reason code [MQTT-4.3.3-11]
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(ack(v, PUBREL, 5))
        assert r.take() == [unhex("70 03 00 05 92" if v == 5 else "70 02 00 05")]
        assert r.s.connected


def _with_pid(packet, pid):
    b = bytearray(packet)
    b[5] = pid >> 8  # the packet id after a one-byte topic
    b[6] = pid & 0xFF
    return bytes(b)


def test_MQTT_2_2_1_3_inbound_publish_with_packet_id_0_is_a_protocol_error():
    # [MQTT-2.3.1-1 v3.1.1] [U-4.13.1-a] [MQTT-4.8.0-1 v3.1.1]
    for v in BOTH:
        for qos in (1, 2):
            r = Rig(v)
            r.up()
            r.protocol_error(_with_pid(pub(v, b"t", b"x", qos, 1), 0), 0x82)
            assert r.msgs == []


def test_MQTT_3_3_2_2_inbound_wildcard_topic_is_a_protocol_error():
    # [MQTT-3.3.2-2 v3.1.1] [MQTT-4.7.0-1] [MQTT-4.7.1-1 v3.1.1]
    for v in BOTH:
        for topic in (b"#", b"a/+", b"a/#", b"+"):
            for qos in (0, 1):
                r = Rig(v)
                r.up()
                good = pub(v, b"x" * len(topic), b"p", qos, qos)
                r.protocol_error(good.replace(b"x" * len(topic), topic), 0x82)
                assert r.msgs == []


def test_U_4_13_1_a_reserved_type_is_malformed_server_only_packets_are_protocol_errors():
    # Packet type 0 cannot be parsed: Malformed 0x81. A well-formed packet
    # only a server receives (CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ) is a
    # Protocol Error 0x82 [MQTT-4.8.0-1 v3.1.1]
    connect = bytearray(32)
    from frugalmqtt import control as C
    for v in BOTH:
        n = C.encode_connect(connect, 0, v, "evil")
        for packet, reason in ((b"\x00\x00", 0x81), (bytes(connect[:n]), 0x82),
                               (b"\x82\x06\x00\x01\x00\x01t\x00", 0x82),
                               (b"\xa2\x05\x00\x01\x00\x01t", 0x82), (b"\xc0\x00", 0x82)):
            r = Rig(v)
            r.up()
            r.protocol_error(packet, reason)


def test_v311_MQTT_4_8_0_1_server_disconnect_is_a_protocol_violation():
    # 3.1.1 3.14: DISCONNECT goes from the client to the server only. From a
    # server it is a protocol violation: MQTTError(0x82), the connection
    # closed, nothing sent (3.1.1 has no reason codes). 5.0: ServerError.
    r = Rig(4)
    r.up()
    r.protocol_error(b"\xe0\x00", 0x82)


def test_MQTT_3_2_2_11_connack_maximum_qos_2_or_more_is_a_protocol_error():
    # Maximum QoS is 0 or 1 (absent means 2): any other value is a Protocol Error
    for q in (2, 3):
        r = Rig(5)
        r.s.connect(60, True)
        r.take()
        r.protocol_error(b"\x20\x05\x00\x00\x02\x24" + bytes((q,)), 0x82)
        raises(OSError, r.s.publish, b"t", b"x", 0)


def test_MQTT_3_1_2_20_keepalive_pingreq_when_nothing_sent_or_nothing_received():
    # The rule: PINGREQ when nothing was sent for the keep-alive period
    # [MQTT-3.1.2-20], and also when nothing was received for it (a client
    # may send PINGREQ at any time, 5.0 3.12.4 / 3.1.1 3.12.4): a device that
    # only publishes QoS 0 still learns that the link is half-open. No
    # PINGRESP within half the keep-alive (at least 1 s): the link is closed.
    for v in BOTH:
        r = Rig(v)
        r.up(keepalive=10)
        r.t += 6000
        r.s.publish(b"t", b"0", 0)  # sent 4 s before the period ends
        r.t += 4000
        r.s.tick()
        assert r.take() == [pub(v, b"t", b"0"), b"\xc0\x00"]  # nothing received for 10 s
        r.feed(b"\xd0\x00")
        r.t += 9999
        r.s.tick()
        assert r.take() == []
        r.t += 1
        r.s.tick()
        assert r.take() == [b"\xc0\x00"]  # nothing sent (nor received) for 10 s
        r.t += 4999
        r.s.tick()
        assert r.s.connected
        r.t += 1
        raises(OSError, r.s.tick)
        assert not r.s.connected and r.take() == []


def test_MQTT_4_9_0_2_window_full_one_convention_per_api():
    # Both: a QoS 1/2 message beyond the quota is stored and sent when an ack
    # frees it; only when every slot is taken is the window full. Session
    # (sans-I/O, never waits) then returns WINDOW_FULL; lite.Publisher (owns
    # its socket, blocks) waits up to timeout_ms for a slot, then raises
    # OSError(ETIMEDOUT), like any socket call that timed out; nothing is
    # stored then.
    r = Rig(5, slots=2)
    r.up(props=[(PR.RECEIVE_MAXIMUM, 1)])
    p1 = r.s.publish(b"t", b"1", 1)
    p2 = r.s.publish(b"t", b"2", 1)
    assert p2 > 0 and r.take() == [pub(5, b"t", b"1", 1, p1)]
    assert r.s.publish(b"t", b"3", 1) == S.WINDOW_FULL
    r.feed(ack(5, PUBACK, p1))
    assert r.take() == [pub(5, b"t", b"2", 1, p2)]
    peer = Peer()
    peer.give(connack(5, False, 0, [(PR.RECEIVE_MAXIMUM, 1)]))
    p = Lite("lite", "broker", slots=2)
    p.connect(sock=peer)
    assert p.publish("t", b"1", 1) == 1
    assert p.publish("t", b"2", 1) == 2 and p.pending() == 2  # held for the quota
    assert [x[0] for x in peer.sent()] == [0x10, 0x32]  # CONNECT, the first PUBLISH only
    e = raises(OSError, p.publish, "t", b"3", 1, False, None, 0)
    assert e.args[0] == errno.ETIMEDOUT and p.pending() == 2
