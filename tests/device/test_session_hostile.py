"""What a broken or malicious broker gets from Session: each case closed with
the spec's reason code (DISCONNECT on 5.0, just closing on 3.1.1), a typed
exception to the caller (MQTTError, ServerError), nothing delivered, nothing
more sent. Scripted broker bytes through the session's framer, or through
the client's read path (ClientBase._read) where the framer refuses a packet.
Runs unchanged on CPython and on the MicroPython unix port.
"""
from _util import raises
from frugalmqtt import control as C
from frugalmqtt import props as PR
from frugalmqtt.codec import MQTTError, PUBACK, PUBREC, PUBREL
from frugalmqtt.err import ServerError
from _session_rig import BOTH, Rig, hl, pub, ack, connack, u16, client, read_all


def _waiting(v, **sizes):
    """A Rig that sent CONNECT and waits for the CONNACK."""
    r = Rig(v, **sizes)
    r.s.connect(60, True)
    r.take()
    return r


def test_MQTT_3_2_0_1_publish_before_connack_closes_and_delivers_nothing():
    # The first packet from the server must be CONNACK [U-4.13.1-a] [MQTT-4.8.0-1 v3.1.1]
    for v in BOTH:
        for qos in (0, 1):
            r = _waiting(v)
            r.protocol_error(pub(v, b"early", b"x", qos, qos) + connack(v), 0x82)
            assert r.msgs == [] and not r.s.connected
        for early in (ack(v, PUBACK, 1), b"\xd0\x00", b"\x90\x03\x00\x01\x00"):
            r = _waiting(v)
            r.protocol_error(early, 0x82)


def test_U_4_13_1_a_connect_to_the_client_is_a_protocol_error():
    # Refused by type before it is decoded: no ValueError from the broker-
    # direction decoder, whatever the CONNECT holds
    buf = bytearray(64)
    for v in BOTH:
        for cid, will in (("x", None), ("", C.Will("w", b"p", 1))):
            n = C.encode_connect(buf, 0, v, cid, 30, False, None, will, "u", b"p")
            r = Rig(v)
            r.up()
            r.protocol_error(bytes(buf[:n]), 0x82)
        r = Rig(v)
        r.up()
        r.protocol_error(b"\x10\x03\x00\x00\x00", 0x82)  # not even a CONNECT body
        # Protocol name "MQTX": the broker-direction decoder answered 0x84,
        # a code no DISCONNECT carries, and ValueError('bad reason') escaped
        bad = bytearray(buf[:n])
        bad[7] = 0x58
        r = Rig(v)
        r.up()
        r.protocol_error(bytes(bad), 0x82)


def test_U_4_13_1_a_second_connack_is_a_protocol_error():
    for v in BOTH:
        for sp in (False, True):
            r = Rig(v)
            r.up(clean=False)
            r.protocol_error(connack(v, sp), 0x82)


def test_U_4_13_1_a_connack_authentication_never_asked_for():
    # No Authentication Method in our CONNECT: the server may not start
    # enhanced authentication (5.0 4.12), in CONNACK or with AUTH
    for props in ([(PR.AUTH_DATA, b"key")], [(PR.AUTH_METHOD, "SCRAM-SHA-1")],
                  [(PR.AUTH_METHOD, "SCRAM-SHA-1"), (PR.AUTH_DATA, b"key")]):
        r = _waiting(5)
        r.protocol_error(connack(5, props=props), 0x82)
    r = Rig(5)
    r.up()
    r.protocol_error(b"\xf0\x00", 0x82)  # AUTH
    # Asked for: accepted
    r = Rig(5)
    r.s.connect(60, True, [(PR.AUTH_METHOD, "TOKEN"), (PR.AUTH_DATA, b"t")])
    r.take()
    r.feed(connack(5, props=[(PR.AUTH_METHOD, "TOKEN"), (PR.AUTH_DATA, b"ok")]))
    assert r.s.connected


def test_MQTT_2_2_1_5_ack_with_packet_id_0_is_a_protocol_error():
    # [MQTT-2.3.1-6 v3.1.1]
    for v in BOTH:
        for first in (0x40, 0x50, 0x62, 0x70):
            r = Rig(v)
            r.up()
            r.s.publish(b"t", b"x", 2)
            r.take()
            r.protocol_error(bytes((first, 2, 0, 0)), 0x82)
            assert r.done == []


def test_MQTT_2_1_3_1_pingresp_with_a_body_is_malformed():
    for v in BOTH:
        for bad in (b"\xd0\x01\x00", b"\xd0\x02\x00\x00", b"\xd1\x00"):
            r = Rig(v)
            r.up(keepalive=10)
            r.t += 10000
            r.s.tick()
            r.take()
            r.protocol_error(bad, 0x81)


def test_U_3_3_2_c_repeated_properties_are_a_protocol_error():
    cases = (
        b"\x20\x08\x00\x00\x05\x21\x00\x05\x21\x00\x05",  # Receive Maximum twice
        b"\x20\x07\x00\x00\x04\x24\x01\x24\x01",  # Maximum QoS twice
        b"\x20\x0d\x00\x00\x0a\x27\x00\x00\x01\x00\x27\x00\x00\x01\x00",  # Max Packet Size
    )
    for packet in cases:
        r = _waiting(5)
        r.protocol_error(packet, 0x82)
    # In an ack: Reason String twice
    r = Rig(5)
    r.up()
    pid = r.s.publish(b"t", b"x", 1)
    r.take()
    r.protocol_error(b"\x40\x0b" + u16(pid) + b"\x00\x07\x1f\x00\x01a\x1f\x00\x01b", 0x82)
    assert r.done == []


def test_MQTT_3_2_2_14_connack_byte_properties_out_of_range():
    # Maximum QoS 2 or 3, Retain Available / Wildcard / Subscription
    # Identifier / Shared Subscription Available 2: Protocol Error
    # [MQTT-3.2.2-11]
    for pid, value in ((0x24, 2), (0x24, 3), (0x25, 2), (0x28, 2), (0x29, 2), (0x2A, 0xFF)):
        r = _waiting(5)
        r.protocol_error(b"\x20\x05\x00\x00\x02" + bytes((pid, value)), 0x82)


def test_MQTT_1_5_4_1_invalid_utf8_in_connack_strings_is_malformed():
    # Assigned Client Identifier, Reason String, Response Information,
    # Server Reference, a User Property: ill-formed, a surrogate, U+0000
    # [MQTT-1.5.4-2] [MQTT-1.5.7-1]
    for bad in (b"\xc3\x28", b"\xed\xa0\x80", b"a\x00"):
        s = u16(len(bad)) + bad
        for prop in (b"\x12" + s, b"\x1f" + s, b"\x1a" + s, b"\x1c" + s,
                     b"\x26" + s + b"\x00\x01v", b"\x26\x00\x01k" + s):
            r = _waiting(5)
            r.protocol_error(b"\x20" + bytes((3 + len(prop), 0, 0, len(prop))) + prop, 0x81)


def _client(v, max_packet):
    """The client's read path, CONNECT sent."""
    c, out = client(v, max_packet)
    c.s.connect(60, True)
    del out[:]
    return c, out


def test_MQTT_3_1_2_24_publish_one_byte_over_our_maximum_packet_size():
    # Refused from its fixed header, before the body is read: 0x95 Packet too
    # large, DISCONNECT on 5.0 [U-4.13.1-a], just closed on 3.1.1 [MQTT-4.8.0-1 v3.1.1]
    for v in BOTH:
        c, out = _client(v, 48)
        fit = pub(v, b"t", b"x" * (48 - len(pub(v, b"t", b"", 1, 1))), 1, 1)
        assert len(fit) == 48
        read_all(c, connack(v) + fit)
        assert out == [b"\x40\x02\x00\x01"] and c.s.connected
        del out[:]
        over = pub(v, b"t", b"x" * (49 - len(pub(v, b"t", b"", 1, 1))), 1, 2)
        assert len(over) == 49
        e = raises(MQTTError, read_all, c, over)
        assert e.reason == 0x95
        assert out == ([b"\xe0\x01\x95"] if v == 5 else []), hl(out)
        assert not c.s.connected and not c.s.link


def test_MQTT_3_1_3_7_v311_empty_client_id_needs_a_clean_session():
    # Refused before anything is sent; 5.0 lets the server assign one
    r = Rig(4)
    r.s.client_id = ""
    raises(ValueError, r.s.connect, 60, False)
    assert r.take() == [] and not r.s.link
    r.s.connect(60, True)
    assert len(r.take()) == 1
    r = Rig(5)
    r.s.client_id = ""
    r.s.connect(60, False)
    assert len(r.take()) == 1


def test_U_3_3_4_e_publish_above_the_maximum_qos_gets_disconnect_0x9b():
    # The server's CONNACK said Maximum QoS 1 (or 0); no subscription can be
    # granted above it, so such a PUBLISH is unsolicited: DISCONNECT 0x9B
    for mq in (0, 1):
        for qos in range(mq + 1, 3):
            r = Rig(5)
            r.up(props=[(PR.MAXIMUM_QOS, mq)])
            r.feed(pub(5, b"t", b"ok", mq, mq))
            r.take()  # its PUBACK
            r.protocol_error(pub(5, b"t", b"x", qos, 7), 0x9B)
            assert [m[1] for m in r.msgs] == [b"ok"]


def test_MQTT_2_2_1_6_suback_for_no_subscribe_of_ours_is_a_protocol_error():
    for v in BOTH:
        r = Rig(v)
        r.up()
        pid = r.s.subscribe([("a", 1)])
        r.take()
        props = b"\x00" if v == 5 else b""
        r.protocol_error(b"\x90" + bytes((3 + len(props),)) + u16(pid + 1) + props + b"\x01", 0x82)
        r = Rig(v)
        r.up()
        r.protocol_error(b"\xb0\x02\x00\x07" if v == 4 else b"\xb0\x04\x00\x07\x00\x00", 0x82)


def test_hostile_bytes_raise_only_typed_errors():
    # Mutated server streams (a fixed pseudo-random sequence): every outcome
    # is handling, MQTTError or ServerError; never another exception from
    # inside the client (IndexError, ValueError, ...)
    seed = 12345
    streams = []
    for v in BOTH:
        streams.append((v, connack(v) + pub(v, b"a/b", b"payload", 1, 3) + ack(v, PUBREC, 1)
                        + ack(v, PUBREL, 3) + b"\xd0\x00"))
    n = 0
    for v, good in streams:
        for _ in range(400):
            seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
            data = bytearray(good)
            for k in range(1 + seed % 3):
                i = (seed >> (4 + k * 5)) % len(data)
                data[i] = (seed >> (8 + k)) & 0xFF
            c, out = _client(v, 64)
            c.s.publish(b"t", b"x", 2)
            try:
                read_all(c, bytes(data))
            except (MQTTError, ServerError):
                n += 1
                assert not c.s.link
    assert n > 100  # most mutations break the stream
