"""Sans-I/O tests of frugalmqtt.session: limits, refusals and protocol errors.

A scripted broker (packets from the codec's encoders, fed through the
session's framer) and a write() that records each packet, so every
DISCONNECT and every packet *not* sent is checked byte for byte. MQTT 5.0
(v=5) and, where the rule exists there, MQTT 3.1.1 (v=4); a protocol error
sends DISCONNECT with its reason code on 5.0 and just closes on 3.1.1.
Spec ids: MQTT 5.0 numbering unless tagged "v3.1.1".
Runs unchanged on CPython and on the MicroPython unix port.
"""
from _util import raises, unhex
from frugalmqtt import codec
from frugalmqtt import props as PR
from frugalmqtt import session as S
from frugalmqtt_host import codec as host
from frugalmqtt_host import server as SV
from frugalmqtt.codec import MQTTError, PUBACK, PUBREC, PUBREL

from _session_rig import (BOTH, Rig, h, hl, pub, ack, connack, suback, disconnect, u16, rel,
                          alias_of, _PKT)


def _after_close_nothing_sent(r):
    """Once DISCONNECT went (or the link closed), nothing more is written."""
    raises(OSError, r.s.publish, b"t", b"0", 0)
    pid = r.s.publish(b"t", b"1", 1)  # stored for the next connection
    assert pid > 0
    raises(OSError, r.s.subscribe, [("t", 0)])
    r.t += 1000000
    r.s.tick()
    r.s.disconnect()
    assert r.take() == []
    return pid


# ---- CONNACK ----------------------------------------------------------------------------------

def test_MQTT_3_2_2_4_session_present_after_clean_start_closes():
    # [U-4.13.1-a] [MQTT-4.8.0-1 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.s.connect(60, True)
        r.take()
        r.protocol_error(connack(v, sp=True), 0x82)
        _after_close_nothing_sent(r)


def test_MQTT_4_13_2_1_connack_refused_raises_server_error():
    for v, code in ((5, 0x87), (5, 0x9F), (4, 5)):
        r = Rig(v)
        r.s.connect(60, True)
        r.take()
        e = raises(S.ServerError, r.feed, connack(v, reason=code))
        assert e.args[0] == code
        assert not r.s.connected
        assert r.take() == []  # no DISCONNECT in reply to a refusal
        raises(OSError, r.s.publish, b"t", b"0", 0)
        assert r.take() == []


def test_MQTT_4_13_2_1_server_disconnect_raises_server_error():
    # The connection ends; the session stays [MQTT-3.1.2-23]. Among the codes:
    # QoS not supported (0x9B) and retain not supported (0x9A) [U-3.3.1-a]
    r = Rig(5)
    r.up(clean=False)
    pid = r.s.publish(b"k", b"1", 1)
    r.take()
    for code in (0x8B, 0x9A, 0x9B, 0x00):
        e = raises(S.ServerError, r.feed, disconnect(code))
        assert e.args[0] == code
        assert not r.s.connected and not r.s.link
        assert r.take() == []  # no DISCONNECT back
        assert r.up(clean=False, sp=True) == [pub(5, b"k", b"1", 1, pid, dup=True)]


def test_MQTT_2_1_3_1_bad_ack_flags_close_the_connection():
    # [MQTT-3.6.1-1] [U-4.13.1-a] [MQTT-2.2.2-1 v3.1.1] [MQTT-2.2.2-2 v3.1.1]
    for v in BOTH:
        for bad in (b"\x60\x02\x00\x01", b"\x42\x02\x00\x01", b"\x51\x02\x00\x01"):
            r = Rig(v)
            r.up()
            r.s.publish(b"t", b"x", 2)
            r.take()
            r.protocol_error(bad, 0x81)


def test_MQTT_3_2_2_11_maximum_qos_refused_locally():
    r = Rig(5)
    r.up(props=[(PR.MAXIMUM_QOS, 1)])
    raises(ValueError, r.s.publish, b"m", b"2", 2)
    assert r.take() == [] and r.s.pending() == 0
    pid = r.s.publish(b"m", b"1", 1)
    assert r.take() == [pub(5, b"m", b"1", 1, pid)]
    r.up(props=[(PR.MAXIMUM_QOS, 0)])
    raises(ValueError, r.s.publish, b"m", b"1", 1)
    raises(ValueError, r.s.publish, b"m", b"2", 2)
    assert r.s.publish(b"m", b"0", 0) == 0
    assert r.take() == [pub(5, b"m", b"0")]
    # The limit belongs to the connection
    r.up()
    pid = r.s.publish(b"m", b"2", 2)
    assert r.take() == [pub(5, b"m", b"2", 2, pid)]


def test_MQTT_3_2_2_14_retain_available_0_refuses_retain():
    r = Rig(5)
    r.up(props=[(PR.RETAIN_AVAILABLE, 0)])
    raises(ValueError, r.s.publish, b"r", b"0", 0, True)
    raises(ValueError, r.s.publish, b"r", b"1", 1, True)
    assert r.take() == [] and r.s.pending() == 0
    pid = r.s.publish(b"r", b"1", 1, False)
    assert r.take() == [pub(5, b"r", b"1", 1, pid)]
    r.up(props=[(PR.RETAIN_AVAILABLE, 1)])
    r.s.publish(b"r", b"0", 0, True)
    assert r.take() == [pub(5, b"r", b"0", 0, retain=True)]


def test_MQTT_3_2_2_15_maximum_packet_size_refused_locally():
    props = [(PR.USER_PROPERTY, ("key", "value"))]
    for qos in (0, 1, 2):
        r = Rig(5)
        limit = host.size_publish(5, b"big/topic", b"x" * 40, qos, props)
        r.up(props=[(PR.MAXIMUM_PACKET_SIZE, limit)])
        raises(ValueError, r.s.publish, b"big/topic", b"x" * 41, qos, False, props)
        assert r.take() == [] and r.s.pending() == 0
        r.s.publish(b"big/topic", b"x" * 40, qos, False, props)  # exactly the limit
        got = r.take()
        assert len(got) == 1 and len(got[0]) == limit, hl(got)


def test_MQTT_3_2_2_15_maximum_packet_size_counts_the_topic_alias():
    # A Topic Alias adds 3 bytes: a message that fits without one must not
    # grow past the server's Maximum Packet Size because of it [MQTT-3.2.2-17]
    for topic, payload in ((b"sensors/livingroom/temperature", b"21.5"), (b"ab", b"12345")):
        for qos in (0, 1):
            r = Rig(5)
            limit = host.size_publish(5, topic, payload, qos)
            r.up(props=[(PR.MAXIMUM_PACKET_SIZE, limit), (PR.TOPIC_ALIAS_MAXIMUM, 4)])
            for _ in range(3):
                r.s.publish(topic, payload, qos)
            got = r.take()
            assert len(got) == 3, hl(got)
            for p in got:
                assert len(p) <= limit, "%d bytes > %d: %s" % (len(p), limit, h(p))
                assert SV.decode_packet(_PKT, p, 0, len(p), 5) == codec.PUBLISH
                assert host.payload_bytes(_PKT) == payload
    # Same for the session's own transmit buffer: a message that fits tx_size
    # without an alias is sent, not refused
    r = Rig(5, tx_size=40)
    r.up(props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    payload = b"y" * (40 - host.size_publish(5, b"a/b", b""))
    r.s.publish(b"a/b", payload, 0)
    got = r.take()
    assert len(got) == 1 and len(got[0]) <= 40, hl(got)


def test_MQTT_3_3_4_6_subscription_identifier_in_publish_refused():
    for v in BOTH:
        r = Rig(v)
        r.up()
        for qos in (0, 1, 2):
            raises(ValueError, r.s.publish, b"s", b"p", qos, False, [(PR.SUBSCRIPTION_ID, 5)])
        # Topic aliases are the session's to assign [MQTT-3.3.2-8]
        raises(ValueError, r.s.publish, b"s", b"p", 1, False, [(PR.TOPIC_ALIAS, 1)])
        assert r.take() == [] and r.s.pending() == 0


# ---- Inbound PUBLISH errors ------------------------------------------------------------------

def test_U_3_3_2_b_payload_format_invalid_acked_0x99_not_delivered():
    # [MQTT-3.4.2-1] [MQTT-3.5.2-1] [MQTT-4.3.3-9] [MQTT-4.5.0-2]
    r = Rig(5)
    r.up()
    utf8 = [(PR.PAYLOAD_FORMAT, 1)]
    r.feed(pub(5, b"u", b"\xff\xfe", 1, 7, props=utf8))
    assert r.take() == [unhex("40 03 00 07 99")]
    r.feed(pub(5, b"u", b"\xc3\x28", 2, 8, props=utf8))
    assert r.take() == [unhex("50 03 00 08 99")]
    r.feed(pub(5, b"u", b"\xed\xa0\x80", 0, props=utf8))  # a surrogate, QoS 0: dropped
    assert r.take() == [] and r.msgs == []
    # PUBREC 0x99 ended that flow: the same id is a new message
    r.feed(pub(5, b"u", b"caf\xc3\xa9", 2, 8, props=utf8))
    assert r.take() == [unhex("50 02 00 08")]
    assert r.msgs == [(b"u", b"caf\xc3\xa9", 2, 0, 0, 8)]
    # Binary payloads (no indicator, or indicator 0) are not checked
    r.feed(pub(5, b"u", b"\xff", 1, 9) + pub(5, b"u", b"\xff", 1, 10, props=[(PR.PAYLOAD_FORMAT, 0)]))
    assert r.take() == [unhex("40 02 00 09"), unhex("40 02 00 0A")] and len(r.msgs) == 3
    assert r.s.connected
    # Sending: a payload declared UTF-8 must be UTF-8
    raises(ValueError, r.s.publish, b"u", b"\xff", 1, False, utf8)
    assert r.take() == [] and r.s.pending() == 0


def test_MQTT_3_3_1_4_qos3_publish_is_malformed():
    # Nothing after the DISCONNECT: the PUBLISH behind it is not acknowledged
    # [MQTT-3.14.4-1] [U-4.13.1-a] [MQTT-3.3.1-4 v3.1.1] [MQTT-4.8.0-1 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up()
        bad = bytearray(pub(v, b"q", b"3", 1, 1))
        bad[0] = 0x36
        r.protocol_error(bytes(bad) + pub(v, b"q", b"ok", 1, 2), 0x81)
        assert r.msgs == []
        _after_close_nothing_sent(r)


def test_U_3_3_4_a_inbound_topic_alias_0_or_above_our_maximum():
    # [MQTT-3.3.2-8]
    r = Rig(5, aliases_in=2)
    r.up()
    r.feed(pub(5, b"ok", b"1", alias=2))  # the maximum itself is fine
    r.protocol_error(pub(5, b"t", b"x", alias=3), 0x94)
    assert [m[0] for m in r.msgs] == [b"ok"]
    r = Rig(5, aliases_in=2)
    r.up()
    zero = bytearray(pub(5, b"t", b"x", 1, 4, alias=1))
    i = bytes(zero).find(b"\x23\x00\x01")
    assert i > 0
    zero[i + 2] = 0  # Topic Alias 0
    r.protocol_error(bytes(zero), 0x94)
    # With no aliases announced, any alias is above the maximum
    r = Rig(5, aliases_in=0)
    r.s.connect(60, True)
    (c,) = r.take()
    SV.decode_packet(_PKT, c, 0, len(c), 5)
    assert all(p[0] != PR.TOPIC_ALIAS_MAXIMUM or p[1] == 0 for p in _PKT.extra.props)
    r.feed(connack(5))
    r.protocol_error(pub(5, b"t", b"x", alias=1), 0x94)
    assert r.msgs == []


def test_U_3_3_4_c_unknown_inbound_alias_with_empty_topic():
    r = Rig(5, aliases_in=4)
    r.up()
    r.feed(pub(5, b"one", b"1", alias=1))
    r.protocol_error(pub(5, b"", b"2", 1, 5, alias=2), 0x82)
    assert [m[1] for m in r.msgs] == [b"1"]


def test_U_3_3_4_d_inbound_receive_maximum_exceeded():
    r = Rig(5, inbound=2)
    r.s.connect(60, True)
    (c,) = r.take()
    SV.decode_packet(_PKT, c, 0, len(c), 5)
    assert (PR.RECEIVE_MAXIMUM, 2) in _PKT.extra.props
    r.feed(connack(5))
    r.feed(pub(5, b"i", b"1", 2, 1) + pub(5, b"i", b"2", 2, 2)
           + pub(5, b"i", b"1", 2, 1, dup=True)  # a repeat is not a new one
           + pub(5, b"i", b"q1", 1, 5))  # QoS 1 is acknowledged at once
    assert r.take() == [unhex("50 02 00 01"), unhex("50 02 00 02"), unhex("50 02 00 01"),
                        unhex("40 02 00 05")]
    r.protocol_error(pub(5, b"i", b"3", 2, 3), 0x93)
    assert [m[1] for m in r.msgs] == [b"1", b"2", b"q1"]
    for v in BOTH:
        # A PUBREL frees a place
        r = Rig(v, inbound=2)
        r.up()
        r.feed(pub(v, b"i", b"1", 2, 1) + pub(v, b"i", b"2", 2, 2) + ack(v, PUBREL, 1)
               + pub(v, b"i", b"3", 2, 3))
        assert r.take() == [unhex("50 02 00 01"), unhex("50 02 00 02"), unhex("70 02 00 01"),
                            unhex("50 02 00 03")]
        assert len(r.msgs) == 3
    # 3.1.1 announces no Receive Maximum: one more is delivered and
    # acknowledged, not refused
    r = Rig(4, inbound=2)
    r.up()
    r.feed(pub(4, b"i", b"1", 2, 1) + pub(4, b"i", b"2", 2, 2) + pub(4, b"i", b"3", 2, 3))
    assert r.take() == [unhex("50 02 00 01"), unhex("50 02 00 02"), unhex("50 02 00 03")]
    assert len(r.msgs) == 3 and r.s.connected


def test_MQTT_3_6_2_1_pubrec_for_unknown_id_gets_pubrel_not_found():
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(ack(v, PUBREC, 9))
        assert r.take() == [unhex("62 03 00 09 92" if v == 5 else "62 02 00 09")]
        assert r.s.connected and r.done == []


# ---- Closing ----------------------------------------------------------------------------------

def test_MQTT_3_14_4_1_nothing_sent_after_disconnect():
    # The session drops the link with it [MQTT-3.14.4-2]
    # [MQTT-3.14.4-2 v3.1.1] [MQTT-3.14.4-1 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up(clean=False, keepalive=10)
        p1 = r.s.publish(b"d", b"1", 1)
        r.take()
        r.s.disconnect()
        assert r.take() == [unhex("E0 00")]
        assert not r.s.connected and not r.s.link
        p2 = _after_close_nothing_sent(r)
        # Bytes still buffered from the server get no answer either
        r.feed(pub(v, b"late", b"x", 1, 3))
        assert r.take() == []
        # The session outlives the connection [MQTT-3.1.2-23] [MQTT-3.1.2-4 v3.1.1]
        got = r.up(clean=False, sp=True)
        assert got == [pub(v, b"d", b"1", 1, p1, dup=True), pub(v, b"t", b"1", 1, p2)], hl(got)
    r = Rig(5)
    r.up()
    r.s.disconnect(0x04)  # with Will Message
    assert r.take() == [unhex("E0 01 04")]


def test_MQTT_3_1_2_23_write_failure_keeps_session_state():
    # [MQTT-4.1.0-1] [MQTT-3.1.2-4 v3.1.1]
    for v in BOTH:
        r = Rig(v)
        r.up(clean=False)
        r.fail_writes = True
        pid = r.s.publish(b"w", b"1", 1)
        assert pid > 0 and not r.s.connected and r.s.pending() == 1
        raises(OSError, r.s.publish, b"w", b"0", 0)
        r.fail_writes = False
        got = r.up(clean=False, sp=True)
        assert len(got) == 1 and SV.decode_packet(_PKT, got[0], 0, len(got[0]), v) == codec.PUBLISH
        assert _PKT.pid == pid and host.payload_bytes(_PKT) == b"1"
        r.feed(ack(v, PUBACK, pid))
        assert r.done == [(pid, 0)]


def test_MQTT_3_1_2_20_missing_pingresp_raises_oserror():
    # A half-open link is detected on the fake clock; nothing is sent after
    for v in BOTH:
        r = Rig(v)
        r.up(keepalive=10)
        r.t += 10000
        r.s.tick()
        assert r.take() == [b"\xc0\x00"]
        r.s.tick()  # just sent: no verdict yet
        r.t += 10000  # a whole keep-alive period without PINGRESP
        raises(OSError, r.s.tick)
        assert not r.s.connected
        r.s.tick()  # no connection: nothing to do
        assert r.take() == []
