"""Byte-exact codec vectors: /work/shared/spec/vectors.md plus captured MQTT 5 packets.

Every vector is checked in both directions (our encoder produces it, our
decoder reads it back) and on both protocol levels where it applies
(v=4: MQTT 3.1.1, v=5: MQTT 5.0). Runs unchanged on CPython and MicroPython.
"""
from _util import raises, unhex
from frugalmqtt import codec, control, publish
from frugalmqtt_host import codec as host
from frugalmqtt_host import server
from frugalmqtt import props as P

BUF = bytearray(512)
PKT = publish.Packet()


def h(b):
    """bytes -> 'AA BB' (for assertion messages)."""
    return " ".join("%02X" % x for x in b)


def enc(fn, *args, **kw):
    """Encode into BUF at offset 0 and return the packet as bytes."""
    n = fn(BUF, 0, *args, **kw)
    return bytes(BUF[:n])


def check_enc(want_hex, fn, *args, **kw):
    got = enc(fn, *args, **kw)
    want = unhex(want_hex)
    assert got == want, "%s%r: got %s, want %s" % (fn.__name__, args, h(got), h(want))
    # The same packet written at a non-zero offset is identical.
    n = fn(BUF, 7, *args, **kw)
    assert n == len(want) and bytes(BUF[7:7 + n]) == want
    return got


def dec(data, v):
    """Decode a whole packet two ways, decode_packet and Framer + decode, and
    check both agree; returns the packet type (PKT holds the fields)."""
    f = codec.Framer(len(data) + 4)
    off = host.feed(f, data, 0, len(data))
    assert off == len(data) and host.done(f), h(data)
    t = server.decode(PKT, f.first, f.buf, 0, f.rl, v)
    framed = (t, PKT.first, PKT.pid, PKT.reason, PKT.qos, PKT.dup, PKT.retain,
              PKT.topic_len, PKT.data_len)
    t2 = server.decode_packet(PKT, data, 0, len(data), v)
    assert t2 == t
    assert framed == (t, PKT.first, PKT.pid, PKT.reason, PKT.qos, PKT.dup, PKT.retain,
                      PKT.topic_len, PKT.data_len)
    return t


def dec_err(data, v):
    e = raises(codec.MQTTError, server.decode_packet, PKT, data, 0, len(data), v)
    return e.reason


# ---- 1. Variable Byte Integer ------------------------------------------------

VBI = (
    (0, "00"),
    (127, "7F"),
    (128, "80 01"),
    (16383, "FF 7F"),
    (16384, "80 80 01"),
    (2097151, "FF FF 7F"),
    (2097152, "80 80 80 01"),
    (268435455, "FF FF FF 7F"),
    (64, "40"),  # v3.1.1 2.2.3 non-normative example
    (321, "C1 02"),  # 65 + 2*128
)


def test_vbi_encode_table():
    for value, hx in VBI:
        want = unhex(hx)
        b = bytearray(8)
        end = codec.put_vbi(b, 2, value)
        assert end == 2 + len(want), value
        assert bytes(b[2:end]) == want, "%d -> %s" % (value, h(b[2:end]))
        assert b[0] == 0 and b[1] == 0 and b[end] == 0  # nothing written around it
        assert codec.vbi_size(value) == len(want), value


def test_vbi_decode_table():
    c = codec.Cur()
    for value, hx in VBI:
        data = b"\xaa" + unhex(hx) + b"\x55"
        c.set(data, 1, len(data))
        assert c.vbi() == value, hx
        assert c.pos == 1 + len(unhex(hx))  # stops right after the VBI
        assert c.u8() == 0x55


def test_vbi_encode_out_of_range():
    b = bytearray(8)
    raises(ValueError, codec.put_vbi, b, 0, 268435456)
    raises(ValueError, codec.put_vbi, b, 0, -1)
    raises(ValueError, codec.vbi_size, 268435456)


def test_vbi_five_bytes_malformed():
    c = codec.Cur()
    for hx in ("FF FF FF FF 7F", "80 80 80 80 01", "FF FF FF FF 01"):
        data = unhex(hx)
        c.set(data, 0, len(data))
        assert raises(codec.MQTTError, c.vbi).reason == 0x81, hx
    # As a remaining length of a whole packet
    assert dec_err(unhex("30 FF FF FF FF 7F"), 5) == 0x81


def test_vbi_non_minimal_malformed():
    # [MQTT-1.5.5-1]
    c = codec.Cur()
    for hx in ("80 00", "FF 00", "80 80 00", "FF FF 00", "80 80 80 00"):
        data = unhex(hx)
        c.set(data, 0, len(data))
        assert raises(codec.MQTTError, c.vbi).reason == 0x81, hx
    # As a remaining length: PINGRESP with RL 0 written as 80 00
    assert dec_err(unhex("D0 80 00"), 4) == 0x81
    # As a property length: PUBACK id 10, RC 0, property length 80 00
    assert dec_err(unhex("40 05 00 0A 00 80 00"), 5) == 0x81


def test_vbi_truncated_malformed():
    c = codec.Cur()
    for hx in ("80", "FF FF", "80 80 80"):
        data = unhex(hx)
        c.set(data, 0, len(data))
        assert raises(codec.MQTTError, c.vbi).reason == 0x81, hx


def test_remaining_length_boundaries():
    # PUBLISH "a" (3 bytes of topic) on 3.1.1 QoS 0: RL = 3 + payload length.
    big = bytearray(16400)
    for rl, head in ((127, "30 7F"), (128, "30 80 01"), (16383, "30 FF 7F"),
                     (16384, "30 80 80 01")):
        payload = bytes(rl - 3)
        assert host.size_publish(4, "a", payload) == len(unhex(head)) + rl
        n = host.encode_publish(big, 0, 4, "a", payload)
        hl = len(unhex(head))
        assert n == hl + rl
        assert bytes(big[:hl + 3]) == unhex(head + " 00 01 61"), rl
        t = server.decode_packet(PKT, big, 0, n, 4)
        assert t == codec.PUBLISH and PKT.data == hl + 3 and PKT.data_len == rl - 3


# ---- 2. UTF-8 Encoded String ----------------------------------------------------

UTF8_VECTOR = "00 05 41 F0 AA 9B 94"  # "A" U+2A6D4 (v5.0 Fig 1-2, v3.1.1 Fig 1.2)


def test_utf8_string_encode():
    s = "A\U0002A6D4"
    assert codec.str_len(s) == 5
    b = bytearray(9)
    assert codec.put_str(b, 1, s, 5) == 8
    assert bytes(b[1:8]) == unhex(UTF8_VECTOR)
    # The same string given as bytes
    raw = unhex("41 F0 AA 9B 94")
    assert codec.str_len(raw) == 5
    b = bytearray(7)
    assert codec.put_str(b, 0, raw, 5) == 7
    assert bytes(b) == unhex(UTF8_VECTOR)


def test_utf8_string_decode():
    data = unhex(UTF8_VECTOR + " 7E")
    c = codec.Cur()
    c.set(data, 0, len(data))
    o = c.string()
    assert o == 2 and c.n == 5 and c.pos == 7
    assert bytes(data[o:o + c.n]).decode() == "A\U0002A6D4"


def test_utf8_string_as_topic_both_versions():
    s = "A\U0002A6D4"
    check_enc("30 08 " + UTF8_VECTOR + " 78", host.encode_publish, 4, s, b"x")
    check_enc("30 09 " + UTF8_VECTOR + " 00 78", host.encode_publish, 5, s, b"x")
    for v, hx in ((4, "30 08 " + UTF8_VECTOR + " 78"), (5, "30 09 " + UTF8_VECTOR + " 00 78")):
        assert dec(unhex(hx), v) == codec.PUBLISH
        assert host.topic_bytes(PKT) == unhex("41 F0 AA 9B 94")
        assert host.topic_bytes(PKT).decode() == s
        assert host.payload_bytes(PKT) == b"x"


# ---- 3. PUBLISH -------------------------------------------------------------------

def test_publish_variable_header_v311():
    got = check_enc("32 07 00 03 61 2F 62 00 0A", host.encode_publish, 4, "a/b", b"",
                    qos=1, pid=10)
    assert got[2:] == unhex("00 03 61 2F 62 00 0A")  # SPEC v3.1.1 Fig 3.11
    assert host.size_publish(4, "a/b", b"", 1) == 9
    assert dec(got, 4) == codec.PUBLISH
    assert PKT.qos == 1 and PKT.pid == 10 and PKT.dup == 0 and PKT.retain == 0
    assert host.topic_bytes(PKT) == b"a/b" and PKT.data_len == 0
    assert host.props_items(PKT.props) == []


def test_publish_variable_header_v5():
    got = check_enc("32 08 00 03 61 2F 62 00 0A 00", host.encode_publish, 5, "a/b", b"",
                    qos=1, pid=10)
    assert got[2:] == unhex("00 03 61 2F 62 00 0A 00")  # SPEC v5.0 Fig 3-9
    assert host.size_publish(5, "a/b", b"", 1) == 10
    assert dec(got, 5) == codec.PUBLISH
    assert PKT.qos == 1 and PKT.pid == 10 and PKT.dup == 0 and PKT.retain == 0
    assert host.topic_bytes(PKT) == b"a/b" and PKT.data_len == 0
    assert host.props_items(PKT.props) == []


def test_publish_topic_as_bytes_same_encoding():
    check_enc("32 07 00 03 61 2F 62 00 0A", host.encode_publish, 4, b"a/b", b"", qos=1, pid=10)
    check_enc("32 08 00 03 61 2F 62 00 0A 00", host.encode_publish, 5, bytearray(b"a/b"),
              memoryview(b""), qos=1, pid=10)


def test_publish_qos0_has_no_packet_id():
    got = check_enc("30 05 00 03 61 2F 62", host.encode_publish, 4, "a/b", b"")
    assert dec(got, 4) == codec.PUBLISH
    assert PKT.qos == 0 and PKT.pid == 0 and host.topic_bytes(PKT) == b"a/b" and PKT.data_len == 0
    got = check_enc("30 06 00 03 61 2F 62 00", host.encode_publish, 5, "a/b", b"")
    assert dec(got, 5) == codec.PUBLISH
    assert PKT.qos == 0 and PKT.pid == 0 and host.topic_bytes(PKT) == b"a/b" and PKT.data_len == 0
    # A QoS 0 payload that happens to look like a packet id stays payload
    got = check_enc("30 07 00 03 61 2F 62 00 0A", host.encode_publish, 4, "a/b", b"\x00\x0a")
    assert dec(got, 4) == codec.PUBLISH
    assert PKT.pid == 0 and host.payload_bytes(PKT) == b"\x00\x0a"


def test_publish_first_byte_flags():
    # (qos, retain, dup) -> first byte (vectors.md section 3, DERIVED)
    cases = ((0, False, False, 0x30), (0, True, False, 0x31), (1, False, False, 0x32),
             (2, False, False, 0x34), (1, False, True, 0x3A), (2, False, True, 0x3C),
             (1, True, True, 0x3B), (2, True, False, 0x35))
    for v in (4, 5):
        for qos, retain, dup, first in cases:
            pid = 10 if qos else 0
            got = enc(host.encode_publish, v, "a/b", b"p", qos=qos, pid=pid,
                      retain=retain, dup=dup)
            assert got[0] == first, (v, qos, retain, dup, h(got))
            assert dec(got, v) == codec.PUBLISH
            assert (PKT.qos, PKT.retain, PKT.dup, PKT.pid) == (qos, int(retain), int(dup), pid)
            assert PKT.first == first and host.payload_bytes(PKT) == b"p"


CAPTURED_QOS0 = ("30 31 00 07 72 65 71 75 65 73 74 10 02 00 00 01 2c 08 00 08 72 65 73 70 6f 6e"
                 " 73 65 54 68 69 73 20 69 73 20 61 20 51 6f 53 20 30 20 6d 65 73 73 61 67 65")


def test_captured_v5_qos0_publish_encode():
    check_enc(CAPTURED_QOS0, host.encode_publish, 5, "request", b"This is a QoS 0 message",
              props=((P.MESSAGE_EXPIRY, 300), (P.RESPONSE_TOPIC, "response")))
    # bytes-valued properties encode the same
    check_enc(CAPTURED_QOS0, host.encode_publish, 5, b"request", b"This is a QoS 0 message",
              props=[(P.MESSAGE_EXPIRY, 300), (P.RESPONSE_TOPIC, b"response")])
    assert host.size_publish(5, "request", b"This is a QoS 0 message",
                                props=((P.MESSAGE_EXPIRY, 300), (P.RESPONSE_TOPIC, "response"))) == 51


def test_captured_v5_qos0_publish_decode():
    data = unhex(CAPTURED_QOS0)
    assert len(data) == 51
    assert dec(data, 5) == codec.PUBLISH
    assert PKT.first == 0x30 and PKT.qos == 0 and PKT.pid == 0 and PKT.retain == 0
    assert host.topic_bytes(PKT) == b"request"
    assert host.payload_bytes(PKT) == b"This is a QoS 0 message"
    pr = PKT.props
    assert pr.has(P.MESSAGE_EXPIRY) and pr.get_int(P.MESSAGE_EXPIRY) == 300
    assert pr.get_str(P.RESPONSE_TOPIC) == "response"
    assert pr.get_bytes(P.RESPONSE_TOPIC) == b"response"
    assert not pr.has(P.CONTENT_TYPE) and pr.get_int(P.TOPIC_ALIAS) is None
    assert host.props_items(pr) == [(P.MESSAGE_EXPIRY, 300), (P.RESPONSE_TOPIC, "response")]
    assert pr.n_user == 0 and pr.n_subid == 0


def test_publish_all_publish_properties_roundtrip():
    props = ((P.PAYLOAD_FORMAT, 1), (P.MESSAGE_EXPIRY, 0x01020304), (P.CONTENT_TYPE, "text/plain"),
             (P.RESPONSE_TOPIC, "r/1"), (P.CORRELATION_DATA, b"\x00\xff"),
             (P.SUBSCRIPTION_ID, 128), (P.USER_PROPERTY, ("k", "v")))
    # The alias is written first, then the properties in the order given.
    want = ("3C 34 00 01 74 12 34 2C 23 00 07 01 01 02 01 02 03 04"
            " 03 00 0A 74 65 78 74 2F 70 6C 61 69 6E 08 00 03 72 2F 31"
            " 09 00 02 00 FF 0B 80 01 26 00 01 6B 00 01 76 68 69")
    got = check_enc(want, host.encode_publish, 5, "t", b"hi", qos=2, pid=0x1234, dup=True,
                    props=props, alias=7)
    assert host.size_publish(5, "t", b"hi", 2, props, 7) == len(got)
    assert dec(got, 5) == codec.PUBLISH
    assert PKT.qos == 2 and PKT.dup == 1 and PKT.pid == 0x1234 and host.payload_bytes(PKT) == b"hi"
    assert host.props_items(PKT.props) == [(P.TOPIC_ALIAS, 7)] + list(props)
    assert PKT.props.get_int(P.SUBSCRIPTION_ID) == 128
    assert PKT.props.get_int(P.MESSAGE_EXPIRY) == 0x01020304
    assert PKT.props.get_bytes(P.CORRELATION_DATA) == b"\x00\xff"


# ---- 4. PUBACK / PUBREC / PUBREL / PUBCOMP ------------------------------------------

ACKS = ((codec.PUBACK, "40"), (codec.PUBREC, "50"), (codec.PUBREL, "62"), (codec.PUBCOMP, "70"))


def test_v311_acks_id_10():
    for ptype, first in ACKS:
        want = first + " 02 00 0A"
        got = check_enc(want, publish.encode_ack, 4, ptype, 10)
        assert host.size_ack(4, ptype) == 4
        for v in (4, 5):  # a 5.0 receiver reads the same 4 bytes as Success
            assert dec(got, v) == ptype
            assert PKT.pid == 10 and PKT.reason == 0 and host.props_items(PKT.props) == []
        # our 5.0 encoder uses the same shortest form for Success without properties
        check_enc(want, publish.encode_ack, 5, ptype, 10)


def test_v5_puback_id_10_success_three_encodings():
    for hx in ("40 02 00 0A", "40 03 00 0A 00", "40 04 00 0A 00 00"):
        assert dec(unhex(hx), 5) == codec.PUBACK, hx
        assert PKT.pid == 10 and PKT.reason == 0 and host.props_items(PKT.props) == [], hx
    check_enc("40 02 00 0A", publish.encode_ack, 5, codec.PUBACK, 10, 0)


def test_v5_puback_not_authorized():
    for hx in ("40 03 00 0A 87", "40 04 00 0A 87 00"):
        assert dec(unhex(hx), 5) == codec.PUBACK
        assert PKT.pid == 10 and PKT.reason == 0x87 and host.props_items(PKT.props) == []
    check_enc("40 03 00 0A 87", publish.encode_ack, 5, codec.PUBACK, 10, 0x87)
    assert host.size_ack(5, codec.PUBACK, 0x87) == 5


# Captured from a real MQTT 5 exchange: (bytes, type, pid, reason, our shortest encoding)
CAPTURED_ACKS = (
    ("40 04 64 4a 10 00", codec.PUBACK, 0x644A, 0x10, "40 03 64 4a 10"),
    ("50 04 11 c2 10 00", codec.PUBREC, 0x11C2, 0x10, "50 03 11 c2 10"),
    ("62 03 11 c2 00", codec.PUBREL, 0x11C2, 0x00, "62 02 11 c2"),
    ("70 04 11 c2 00 00", codec.PUBCOMP, 0x11C2, 0x00, "70 02 11 c2"),
)


def test_captured_v5_acks_decode():
    for hx, ptype, pid, reason, _ in CAPTURED_ACKS:
        assert dec(unhex(hx), 5) == ptype, hx
        assert PKT.pid == pid and PKT.reason == reason, hx
        assert host.props_items(PKT.props) == [] and PKT.props.n_user == 0, hx


def test_captured_v5_acks_our_encoding():
    for _, ptype, pid, reason, ours in CAPTURED_ACKS:
        got = check_enc(ours, publish.encode_ack, 5, ptype, pid, reason)
        assert host.size_ack(5, ptype, reason) == len(got)
        assert dec(got, 5) == ptype
        assert PKT.pid == pid and PKT.reason == reason


def test_v5_ack_with_properties():
    props = ((P.REASON_STRING, "no"), (P.USER_PROPERTY, ("k", "v")))
    body = " 0C 1F 00 02 6E 6F 26 00 01 6B 00 01 76"
    for ptype, first in ACKS:
        reason = 0x92 if ptype >= codec.PUBREL else 0x10
        for rc in (0, reason):
            want = first + " 10 00 0A %02X" % rc + body
            got = check_enc(want, publish.encode_ack, 5, ptype, 10, rc, props)
            assert host.size_ack(5, ptype, rc, props) == len(got)
            assert dec(got, 5) == ptype
            assert PKT.pid == 10 and PKT.reason == rc
            assert host.props_items(PKT.props) == [(P.REASON_STRING, "no"), (P.USER_PROPERTY, ("k", "v"))]
            assert PKT.props.get_str(P.REASON_STRING) == "no" and PKT.props.n_user == 1


# ---- 6. SUBSCRIBE / SUBACK / UNSUBSCRIBE / UNSUBACK / PING / DISCONNECT ---------------

SUB_PAYLOAD = "00 03 61 2F 62 01 00 03 63 2F 64 02"  # SPEC v3.1.1 Fig 3.23
UNSUB_PAYLOAD = "00 03 61 2F 62 00 03 63 2F 64"  # SPEC v3.1.1 Fig 3.30


def test_subscribe_vectors():
    subs = (("a/b", 1), ("c/d", 2))
    got = check_enc("82 0E 00 0A " + SUB_PAYLOAD, control.encode_subscribe, 4, 10, subs)
    assert got[2:4] == unhex("00 0A")  # v3.1.1 variable header
    assert host.size_subscribe(4, 10, subs) == len(got)
    assert dec(got, 4) == codec.SUBSCRIBE
    assert PKT.first == 0x82 and PKT.pid == 10 and PKT.extra == [("a/b", 1), ("c/d", 2)]
    got = check_enc("82 0F 00 0A 00 " + SUB_PAYLOAD, control.encode_subscribe, 5, 10, subs)
    assert got[2:5] == unhex("00 0A 00")  # v5.0 variable header, no properties
    assert host.size_subscribe(5, 10, subs) == len(got)
    assert dec(got, 5) == codec.SUBSCRIBE
    assert PKT.pid == 10 and PKT.extra == [("a/b", 1), ("c/d", 2)] and host.props_items(PKT.props) == []


def test_subscribe_v5_options_and_subscription_id():
    # QoS 1 | No Local | Retain As Published | Retain Handling 2 = 0x2D
    subs = (("a/+", 0x2D),)
    got = check_enc("82 0B 00 0A 02 0B 05 00 03 61 2F 2B 2D", control.encode_subscribe, 5, 10,
                    subs, props=((P.SUBSCRIPTION_ID, 5),))
    assert dec(got, 5) == codec.SUBSCRIBE
    assert PKT.extra == [("a/+", 0x2D)] and host.props_items(PKT.props) == [(P.SUBSCRIPTION_ID, 5)]


def test_suback_vectors():
    got = check_enc("90 05 00 0A 00 02 80", server.encode_suback, 4, 10, (0, 2, 0x80))
    assert server.size_suback(4, 10, (0, 2, 0x80)) == len(got)
    assert dec(got, 4) == codec.SUBACK
    assert PKT.pid == 10 and bytes(PKT.buf[PKT.data:PKT.data + PKT.data_len]) == unhex("00 02 80")
    got = check_enc("90 06 00 0A 00 00 02 80", server.encode_suback, 5, 10, (0, 2, 0x80))
    assert dec(got, 5) == codec.SUBACK
    assert PKT.pid == 10 and host.payload_bytes(PKT) == unhex("00 02 80")


def test_unsubscribe_vectors():
    filters = ("a/b", "c/d")
    got = check_enc("A2 0C 00 0A " + UNSUB_PAYLOAD, control.encode_unsubscribe, 4, 10, filters)
    assert host.size_unsubscribe(4, 10, filters) == len(got)
    assert dec(got, 4) == codec.UNSUBSCRIBE
    assert PKT.first == 0xA2 and PKT.pid == 10 and PKT.extra == ["a/b", "c/d"]
    got = check_enc("A2 0D 00 0A 00 " + UNSUB_PAYLOAD, control.encode_unsubscribe, 5, 10, filters)
    assert dec(got, 5) == codec.UNSUBSCRIBE
    assert PKT.pid == 10 and PKT.extra == ["a/b", "c/d"]


def test_unsuback_vectors():
    got = check_enc("B0 02 00 0A", server.encode_unsuback, 4, 10)
    assert server.size_unsuback(4, 10) == 4
    assert dec(got, 4) == codec.UNSUBACK
    assert PKT.pid == 10 and PKT.data_len == 0
    got = check_enc("B0 05 00 0A 00 00 11", server.encode_unsuback, 5, 10, (0, 0x11))
    assert server.size_unsuback(5, 10, (0, 0x11)) == len(got)
    assert dec(got, 5) == codec.UNSUBACK
    assert PKT.pid == 10 and host.payload_bytes(PKT) == unhex("00 11")


def test_ping_and_disconnect_vectors():
    got = check_enc("C0 00", control.encode_ping, codec.PINGREQ)
    for v in (4, 5):
        assert dec(got, v) == codec.PINGREQ
    got = check_enc("D0 00", control.encode_ping, codec.PINGRESP)
    for v in (4, 5):
        assert dec(got, v) == codec.PINGRESP
    got = check_enc("E0 00", control.encode_disconnect, 4)
    assert host.size_disconnect(4) == 2
    for v in (4, 5):  # 5.0 short form: Normal disconnection, no properties
        assert dec(got, v) == codec.DISCONNECT and PKT.reason == 0
    check_enc("E0 00", control.encode_disconnect, 5)
    got = check_enc("E0 01 81", control.encode_disconnect, 5, 0x81)
    assert dec(got, 5) == codec.DISCONNECT and PKT.reason == 0x81
    got = check_enc("E0 07 8E 05 11 00 00 00 00", control.encode_disconnect, 5, 0x8E,
                    ((P.SESSION_EXPIRY, 0),))
    assert dec(got, 5) == codec.DISCONNECT
    assert PKT.reason == 0x8E and host.props_items(PKT.props) == [(P.SESSION_EXPIRY, 0)]


# ---- CONNECT / CONNACK (SPEC examples: v3.1.1 Fig 3.6, v5.0 Fig 3-6) -------------------

def test_connect_variable_header_v311():
    will = control.Will("w", b"x", qos=1)
    got = enc(control.encode_connect, 4, "c", keepalive=10, will=will, username="u",
              password=b"p")
    # protocol name, level 4, flags: user, password, will QoS 1, will, clean = 0xCE, keep alive 10
    assert got[2:12] == unhex("00 04 4D 51 54 54 04 CE 00 0A"), h(got)
    assert got[12:] == unhex("00 01 63 00 01 77 00 01 78 00 01 75 00 01 70")
    assert got[:2] == unhex("10 19")
    assert host.size_connect(4, "c", 10, True, None, will, "u", b"p") == len(got)
    assert dec(got, 4) == codec.CONNECT
    c = PKT.extra
    assert (c.version, c.client_id, c.clean, c.keepalive, c.username, c.password) == \
        (4, "c", True, 10, "u", b"p")
    assert (c.will.topic, c.will.payload, c.will.qos, c.will.retain) == ("w", b"x", 1, False)


def test_connect_variable_header_v5():
    will = control.Will("w", b"x", qos=1)
    got = enc(control.encode_connect, 5, "c", keepalive=10, props=((P.SESSION_EXPIRY, 10),),
              will=will, username="u", password=b"p")
    # ... level 5, flags 0xCE, keep alive 10, property length 5, session expiry 10
    assert got[2:18] == unhex("00 04 4D 51 54 54 05 CE 00 0A 05 11 00 00 00 0A"), h(got)
    assert dec(got, 5) == codec.CONNECT
    c = PKT.extra
    assert c.version == 5 and c.props == [(P.SESSION_EXPIRY, 10)] and c.will.props == []


def test_connack_vectors():
    got = check_enc("20 02 00 00", server.encode_connack, 4)
    assert dec(got, 4) == codec.CONNACK and PKT.sp == 0 and PKT.reason == 0
    got = check_enc("20 02 01 00", server.encode_connack, 4, True)
    assert dec(got, 4) == codec.CONNACK and PKT.sp == 1
    got = check_enc("20 02 00 05", server.encode_connack, 4, False, 5)
    assert dec(got, 4) == codec.CONNACK and PKT.reason == 5
    got = check_enc("20 03 00 00 00", server.encode_connack, 5)
    assert dec(got, 5) == codec.CONNACK and PKT.sp == 0 and host.props_items(PKT.props) == []
    got = check_enc("20 09 01 00 06 22 00 0A 21 00 14", server.encode_connack, 5, True, 0,
                    ((P.TOPIC_ALIAS_MAXIMUM, 10), (P.RECEIVE_MAXIMUM, 20)))
    assert dec(got, 5) == codec.CONNACK and PKT.sp == 1
    assert PKT.props.get_int(P.TOPIC_ALIAS_MAXIMUM) == 10 and PKT.props.get_int(P.RECEIVE_MAXIMUM) == 20


# ---- 7. Packet Identifier independence -----------------------------------------------

def test_same_packet_id_both_directions():
    # Client PUBLISH 0x1234 ->, <- Server PUBLISH 0x1234, PUBACKs both ways: all valid.
    for v in (4, 5):
        got = enc(host.encode_publish, v, "a/b", b"", qos=1, pid=0x1234)
        assert got[7:9] == unhex("12 34")
        assert dec(got, v) == codec.PUBLISH and PKT.pid == 0x1234
        got = check_enc("40 02 12 34", publish.encode_ack, v, codec.PUBACK, 0x1234)
        assert dec(got, v) == codec.PUBACK and PKT.pid == 0x1234
