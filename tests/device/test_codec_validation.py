"""Codec validation rules, one test function per rule.

Function names carry the conformance id (MQTT-x.y.z-n -> MQTT_x_y_z_n,
U-x.y-a -> U_x_y_a) so coverage can be found with grep. Encoders refuse bad
arguments with ValueError (or TypeError); decoders raise codec.MQTTError whose
.reason is the code to send: 0x81 Malformed, 0x82 Protocol Error, 0x94 Topic
Alias invalid. Runs unchanged on CPython and MicroPython.
"""
from _util import raises, unhex
from frugalmqtt import codec, control, publish
from frugalmqtt_host import codec as host
from frugalmqtt_host import server
from frugalmqtt import props as P

BUF = bytearray(512)
PKT = publish.Packet()

PUBACK = codec.PUBACK
PUBREC = codec.PUBREC
PUBREL = codec.PUBREL
PUBCOMP = codec.PUBCOMP


def h(b):
    return " ".join("%02X" % x for x in b)


def packet(first, body):
    """A whole packet: first byte, minimal remaining length, body."""
    b = bytearray(5)
    b[0] = first
    n = codec.put_vbi(b, 1, len(body))
    return bytes(b[:n]) + bytes(body)


def pub5(props_hex="", topic=b"a", payload=b"", first=0x30, pid=None):
    """A 5.0 PUBLISH with a raw property block."""
    props = unhex(props_hex)
    body = bytearray()
    body += bytes((len(topic) >> 8, len(topic) & 0xFF)) + topic
    if pid is not None:
        body += bytes((pid >> 8, pid & 0xFF))
    b = bytearray(4)
    n = codec.put_vbi(b, 0, len(props))
    body += b[:n] + props + payload
    return packet(first, body)


def pub4(topic=b"a", payload=b"", first=0x30, pid=None):
    body = bytearray()
    body += bytes((len(topic) >> 8, len(topic) & 0xFF)) + topic
    if pid is not None:
        body += bytes((pid >> 8, pid & 0xFF))
    body += payload
    return packet(first, body)


def decode_ok(data, v):
    """Decode a whole packet, both through decode_packet and a Framer."""
    t = server.decode_packet(PKT, data, 0, len(data), v)
    f = codec.Framer(len(data) + 4)
    assert host.feed(f, data, 0, len(data)) == len(data) and host.done(f)
    assert server.decode(PKT, f.first, f.buf, 0, f.rl, v) == t
    return t


def reason(data, v):
    """Decoding must fail with MQTTError, the same way through decode_packet
    and through a Framer; returns the reason code."""
    e = raises(codec.MQTTError, server.decode_packet, PKT, data, 0, len(data), v)
    f = codec.Framer(len(data) + 4)
    assert host.feed(f, data, 0, len(data)) == len(data) and host.done(f), h(data)
    e2 = raises(codec.MQTTError, server.decode, PKT, f.first, f.buf, 0, f.rl, v)
    assert e2.reason == e.reason, (h(data), e.reason, e2.reason)
    return e.reason


def enc_pub(*args, **kw):
    n = host.encode_publish(BUF, 0, *args, **kw)
    return bytes(BUF[:n])


def bad_pub(*args, **kw):
    """encode_publish must refuse these arguments with ValueError."""
    raises(ValueError, host.encode_publish, BUF, 0, *args, **kw)


# ---- UTF-8 [MQTT-1.5.4-x] ---------------------------------------------------------------

VALID_UTF8 = (
    "C2 80",  # U+0080
    "DF BF",  # U+07FF
    "E0 A0 80",  # U+0800
    "ED 9F BF",  # U+D7FF, just below the surrogates
    "EE 80 80",  # U+E000, just above
    "EF BF BF",  # U+FFFF
    "F0 90 80 80",  # U+10000
    "F4 8F BF BF",  # U+10FFFF
    "01", "7F",
)


def test_MQTT_1_5_4_1_valid_utf8_accepted():
    for hx in VALID_UTF8:
        topic = b"x" + unhex(hx) + b"y"
        for v, data in ((4, pub4(topic)), (5, pub5(topic=topic))):
            assert decode_ok(data, v) == codec.PUBLISH, hx
            assert host.topic_bytes(PKT) == topic
        assert enc_pub(5, topic, b"")[2:] == b"\x00" + bytes((len(topic),)) + topic + b"\x00"
    s = "x\u0080\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffffy"
    topic = b"x" + b"".join(unhex(hx) for hx in VALID_UTF8[:8]) + b"y"
    assert codec.str_len(s) == len(topic)
    assert enc_pub(4, s, b"")[4:] == topic


def test_MQTT_1_5_4_2_nul_rejected():
    for v, data in ((4, pub4(b"a\x00b")), (5, pub5(topic=b"a\x00b")), (5, pub5(topic=b"\x00"))):
        assert reason(data, v) == 0x81, h(data)
    # in a string property
    assert reason(pub5("03 00 02 61 00"), 5) == 0x81
    # encoders
    bad_pub(4, "a\x00b", b"")
    bad_pub(5, b"a\x00b", b"")
    bad_pub(5, "a", b"", props=((P.CONTENT_TYPE, "t\x00"),))
    raises(ValueError, codec.str_len, "\x00")
    raises(ValueError, codec.str_len, b"\x00")


def test_MQTT_4_7_3_2_nul_in_topic_filter_rejected():
    raises(ValueError, control.encode_subscribe, BUF, 0, 4, 1, (("a/\x00", 0),))
    raises(ValueError, control.encode_unsubscribe, BUF, 0, 5, 1, (b"a\x00",))
    assert reason(packet(0x82, unhex("00 01 00 03 61 00 62 00")), 4) == 0x81


SURROGATES = ("ED A0 80", "ED BF BF", "ED B0 80")  # U+D800, U+DFFF, U+DC00


def test_MQTT_1_5_4_1_surrogates_rejected():
    for hx in SURROGATES:
        topic = b"a" + unhex(hx)
        assert reason(pub4(topic), 4) == 0x81, hx
        assert reason(pub5(topic=topic), 5) == 0x81, hx
        bad_pub(5, topic, b"")
    bad_pub(4, "a\ud800", b"")
    bad_pub(5, "\udfff", b"")
    raises(ValueError, codec.str_len, "\udc00")


BAD_UTF8 = (
    "C0 80",  # overlong U+0000
    "C1 BF",  # overlong U+007F
    "E0 80 80",  # overlong 3-byte
    "E0 9F BF",  # overlong U+07FF
    "F0 80 80 80",  # overlong 4-byte
    "F0 8F BF BF",  # overlong U+FFFF
    "F4 90 80 80",  # above U+10FFFF
    "F5 80 80 80", "F8 88 80 80 80", "FE", "FF",  # not UTF-8 lead bytes
    "80", "BF",  # lone continuation bytes
    "C3 41", "E2 82 41", "F0 9F 98 41",  # lead byte followed by ASCII
    "E2 41 82",
)
TRUNCATED_UTF8 = ("C3", "E2 82", "E2", "F0 9F 98", "F0")  # at the end of the string


def test_MQTT_1_5_4_1_overlong_and_truncated_rejected():
    for hx in BAD_UTF8 + TRUNCATED_UTF8:
        topic = b"a" + unhex(hx)
        assert reason(pub4(topic), 4) == 0x81, hx
        assert reason(pub5(topic=topic), 5) == 0x81, hx
        bad_pub(4, topic, b"")
    # Truncated inside the string, even though more bytes (the payload) follow
    # in the packet: the length prefix bounds the string.
    assert reason(pub4(b"a\xe2\x82", payload=b"\xac"), 4) == 0x81
    assert reason(pub5(topic=b"\xf0\x9f", payload=b"\x98\x80"), 5) == 0x81


def test_MQTT_1_5_4_3_bom_kept():
    topic = b"\xef\xbb\xbfa/b"
    for v, data in ((4, pub4(topic, b"p")), (5, pub5(topic=topic, payload=b"p"))):
        assert decode_ok(data, v) == codec.PUBLISH
        assert PKT.topic_len == 6 and host.topic_bytes(PKT) == topic  # not stripped
        assert host.payload_bytes(PKT) == b"p"
    # encoding a str with U+FEFF writes EF BB BF
    assert enc_pub(4, "\ufeffa/b", b"") == unhex("30 08 00 06 EF BB BF 61 2F 62")
    assert enc_pub(5, topic, b"")[4:10] == topic
    # in the middle of a string property too
    assert decode_ok(pub5("03 00 04 61 EF BB BF"), 5) == codec.PUBLISH
    assert PKT.props.get_bytes(P.CONTENT_TYPE) == b"a\xef\xbb\xbf"


def test_MQTT_1_5_7_1_user_property_strings_checked():
    # key and value both validated on receipt
    assert reason(pub5("26 00 01 00 00 01 76"), 5) == 0x81
    assert reason(pub5("26 00 01 6B 00 02 ED A0"), 5) == 0x81
    assert reason(pub5("26 00 01 6B 00 03 ED A0 80"), 5) == 0x81
    assert reason(pub5("26 00 01 C0 00 01 76"), 5) == 0x81
    # and when sending
    bad_pub(5, "a", b"", props=((P.USER_PROPERTY, ("k\x00", "v")),))
    bad_pub(5, "a", b"", props=((P.USER_PROPERTY, ("k", b"\xed\xa0\x80")),))
    raises(ValueError, publish.encode_ack, BUF, 0, 5, PUBACK, 1, 0,
           ((P.USER_PROPERTY, (b"\xc0\x80", "v")),))


def test_U_1_5_4_a_string_length_prefix_bounds_field():
    # a string length running past the end of the packet
    assert reason(packet(0x30, unhex("00 05 61 2F 62")), 4) == 0x81
    assert reason(packet(0x30, unhex("00")), 4) == 0x81
    # a property string running past the property block
    assert reason(pub5("03 00 05 61", payload=b"bcde"), 5) == 0x81


# ---- Variable Byte Integer ---------------------------------------------------------------

def test_MQTT_1_5_5_1_vbi_non_minimal_rejected():
    c = codec.Cur()
    for hx in ("80 00", "FF 00", "80 80 00", "80 80 80 00"):
        data = unhex(hx)
        c.set(data, 0, len(data))
        assert raises(codec.MQTTError, c.vbi).reason == 0x81, hx
    # a non-minimal property length and subscription identifier
    assert reason(packet(0x30, unhex("00 01 61 80 00")), 5) == 0x81
    assert reason(pub5("0B 81 00"), 5) == 0x81


def test_U_1_5_5_a_vbi_at_most_4_bytes():
    c = codec.Cur()
    data = unhex("FF FF FF FF 7F")
    c.set(data, 0, 5)
    assert raises(codec.MQTTError, c.vbi).reason == 0x81
    data = unhex("FF FF FF 7F")
    c.set(data, 0, 4)
    assert c.vbi() == 268435455
    raises(ValueError, codec.put_vbi, bytearray(8), 0, 268435456)
    raises(ValueError, host.encode_publish, BUF, 0, 5, "a", b"",
           props=((P.SUBSCRIPTION_ID, 268435456),))


# ---- Fixed header flags [MQTT-2.1.3-1] ---------------------------------------------------

# (first byte, body): packets that are valid apart from the first byte
RESERVED_OK = (
    (0x20, "00 00"), (0x40, "00 0A"), (0x50, "00 0A"), (0x62, "00 0A"), (0x70, "00 0A"),
    (0x82, "00 0A 00 01 61 00"), (0x90, "00 0A 00"), (0xA2, "00 0A 00 01 61"),
    (0xB0, "00 0A"), (0xC0, ""), (0xD0, ""), (0xE0, ""),
)


def test_MQTT_2_1_3_1_reserved_flags_rejected():
    for first, body in RESERVED_OK:
        data = packet(first, unhex(body))
        assert decode_ok(data, 4) == first >> 4
        correct = first & 0x0F
        for flags in range(16):
            if flags != correct:
                assert reason(packet((first & 0xF0) | flags, unhex(body)), 4) == 0x81, \
                    "%02X accepted" % ((first & 0xF0) | flags)
    # the examples: PUBACK 0x41, SUBSCRIBE 0x80
    assert reason(unhex("41 02 00 0A"), 5) == 0x81
    assert reason(unhex("80 06 00 0A 00 01 61 00"), 4) == 0x81
    assert reason(unhex("80 07 00 0A 00 00 01 61 00"), 5) == 0x81
    # packet type 0 is reserved; AUTH does not exist in 3.1.1
    assert reason(unhex("00 00"), 5) == 0x81
    assert reason(unhex("F0 00"), 4) == 0x81
    assert decode_ok(unhex("F0 00"), 5) == codec.AUTH


def test_MQTT_3_6_1_1_pubrel_flags_0010():
    for v in (4, 5):
        assert decode_ok(unhex("62 02 00 0A"), v) == PUBREL
        assert reason(unhex("60 02 00 0A"), v) == 0x81
        assert reason(unhex("63 02 00 0A"), v) == 0x81
        assert reason(unhex("6A 02 00 0A"), v) == 0x81
    for v in (4, 5):
        n = publish.encode_ack(BUF, 0, v, PUBREL, 10)
        assert BUF[0] == 0x62 and n == 4
    n = publish.encode_ack(BUF, 0, 5, PUBREL, 10, 0x92)
    assert BUF[0] == 0x62 and bytes(BUF[:n]) == unhex("62 03 00 0A 92")


def test_MQTT_3_3_1_4_qos3_malformed():
    for first in (0x36, 0x37, 0x3E, 0x3F):
        for v in (4, 5):
            assert reason(pub4(first=first, pid=1) if v == 4 else pub5(first=first, pid=1), v) \
                == 0x81, hex(first)
    bad_pub(5, "a", b"", qos=3, pid=1)
    bad_pub(4, "a", b"", qos=-1)


def test_MQTT_3_3_1_2_dup_on_qos0():
    assert reason(pub4(first=0x38), 4) == 0x81
    assert reason(pub5(first=0x38), 5) == 0x81
    assert reason(pub5(first=0x39), 5) == 0x81
    bad_pub(4, "a", b"", dup=True)
    bad_pub(5, "a", b"", qos=0, dup=True)
    # DUP is fine on QoS 1 and 2
    assert decode_ok(pub4(first=0x3A, pid=1), 4) == codec.PUBLISH and PKT.dup == 1
    assert decode_ok(pub5(first=0x3C, pid=1), 5) == codec.PUBLISH and PKT.dup == 1


# ---- Packet identifiers -------------------------------------------------------------------

def test_MQTT_2_2_1_2_no_packet_id_on_qos0():
    bad_pub(4, "a", b"", qos=0, pid=1)
    bad_pub(5, "a", b"", pid=10)
    assert enc_pub(4, "a", b"") == unhex("30 03 00 01 61")
    # on receipt the two bytes after the topic are payload, not a packet id
    assert decode_ok(pub4(payload=b"\x00\x0a"), 4) == codec.PUBLISH
    assert PKT.pid == 0 and host.payload_bytes(PKT) == b"\x00\x0a"


def test_MQTT_2_2_1_3_packet_id_nonzero():
    for v in (4, 5):
        for qos in (1, 2):
            bad_pub(v, "a", b"", qos=qos)
            bad_pub(v, "a", b"", qos=qos, pid=0)
            bad_pub(v, "a", b"", qos=qos, pid=0x10000)
            bad_pub(v, "a", b"", qos=qos, pid=-1)
        raises(ValueError, control.encode_subscribe, BUF, 0, v, 0, (("a", 0),))
        raises(ValueError, control.encode_unsubscribe, BUF, 0, v, 0, ("a",))
    assert enc_pub(4, "a", b"", qos=1, pid=0xFFFF)[5:7] == b"\xff\xff"
    # a received QoS>0 PUBLISH with packet id 0
    assert reason(pub4(first=0x32, pid=0), 4) == 0x82
    assert reason(pub5(first=0x34, pid=0), 5) == 0x82


def test_MQTT_2_2_1_5_ack_packet_id_nonzero():
    for v in (4, 5):
        for ptype in (PUBACK, PUBREC, PUBREL, PUBCOMP):
            raises(ValueError, publish.encode_ack, BUF, 0, v, ptype, 0)
            raises(ValueError, publish.encode_ack, BUF, 0, v, ptype, 0x10000)
        assert reason(unhex("40 02 00 00"), v) == 0x82
        assert reason(unhex("62 02 00 00"), v) == 0x82


# ---- Topic names and filters --------------------------------------------------------------

def test_MQTT_3_3_2_2_wildcard_in_topic_name():
    for topic in ("a/+", "a/#", "+", "#", "a+b", "sport/tennis#"):
        for v in (4, 5):
            bad_pub(v, topic, b"")
            bad_pub(v, topic.encode(), b"")
            bad_pub(v, bytearray(topic.encode()), b"")
            bad_pub(v, memoryview(topic.encode()), b"")
        assert reason(pub4(topic.encode()), 4) == 0x82, topic
        assert reason(pub5(topic=topic.encode()), 5) == 0x82, topic
    # with an alias too
    bad_pub(5, "a/#", b"", alias=1)


def test_MQTT_4_7_3_1_empty_topic_name_and_filter():
    bad_pub(4, "", b"")
    bad_pub(5, b"", b"")
    raises(ValueError, control.encode_subscribe, BUF, 0, 4, 1, (("", 0),))
    raises(ValueError, control.encode_unsubscribe, BUF, 0, 5, 1, ("",))
    assert reason(pub4(b""), 4) == 0x81
    assert reason(packet(0x82, unhex("00 01 00 00 00")), 4) == 0x81


VALID_FILTERS = ("sport/tennis/player1/#", "#", "sport/tennis/#", "+", "+/tennis/#",
                 "sport/+/player1", "$SYS/#", "$SYS/monitor/+", "/", "+/+", "/+", "sport/",
                 "//", "a/+/+/#", "Accounts payable")
INVALID_HASH = ("sport/tennis#", "sport/tennis/#/ranking", "#/a", "##", "a/#/", "a#")
INVALID_PLUS = ("sport+", "+sport", "a/b+/c", "a/+b", "++", "a/++/b")


def _sub_roundtrip(v, f):
    n = control.encode_subscribe(BUF, 0, v, 1, ((f, 1),))
    data = bytes(BUF[:n])
    assert decode_ok(data, v) == codec.SUBSCRIBE
    assert PKT.extra == [(f, 1)], f
    n = control.encode_unsubscribe(BUF, 0, v, 1, (f,))
    data = bytes(BUF[:n])
    assert decode_ok(data, v) == codec.UNSUBSCRIBE
    assert PKT.extra == [f], f


def _sub_packet(v, f):
    fb = f.encode()
    body = b"\x00\x01" + (b"\x00" if v == 5 else b"") + bytes((0, len(fb))) + fb + b"\x01"
    return packet(0x82, body)


def test_MQTT_4_7_1_1_hash_filter_rules():
    for v in (4, 5):
        for f in VALID_FILTERS:
            _sub_roundtrip(v, f)
        for f in INVALID_HASH:
            raises(ValueError, control.encode_subscribe, BUF, 0, v, 1, ((f, 0),))
            raises(ValueError, control.encode_unsubscribe, BUF, 0, v, 1, (f,))
            assert reason(_sub_packet(v, f), v) == 0x81, f


def test_MQTT_4_7_1_2_plus_filter_rules():
    for v in (4, 5):
        for f in INVALID_PLUS:
            raises(ValueError, control.encode_subscribe, BUF, 0, v, 1, ((f, 0),))
            raises(ValueError, control.encode_subscribe, BUF, 0, v, 1, ((f.encode(), 0),))
            raises(ValueError, control.encode_unsubscribe, BUF, 0, v, 1, (f,))
            assert reason(_sub_packet(v, f), v) == 0x81, f
    # one bad filter among good ones refuses the whole packet
    raises(ValueError, control.encode_subscribe, BUF, 0, 5, 1, (("a/#", 0), ("sport+", 1)))


def test_MQTT_4_8_2_2_shared_subscription_filters():
    for f in ("$share/consumer1/sport/tennis/+", "$share/consumer1//finance", "$share/g/#"):
        _sub_roundtrip(5, f)
    for f in ("$share/co+n/a", "$share/c#/a", "$share//a", "$share/name", "$share/name/"):
        raises(ValueError, control.encode_subscribe, BUF, 0, 5, 1, ((f, 0),))


def test_MQTT_4_7_3_3_string_longer_than_65535_refused():
    big = bytearray(65600)
    n = host.encode_publish(big, 0, 4, "a" * 65535, b"")
    assert n == 1 + 3 + 2 + 65535 and big[4:6] == b"\xff\xff"
    raises(ValueError, host.encode_publish, big, 0, 4, "a" * 65536, b"")
    raises(ValueError, host.encode_publish, big, 0, 5, b"b" * 65536, b"")
    raises(ValueError, host.encode_publish, big, 0, 5, "\u00e9" * 32768, b"")  # 65536 bytes
    raises(ValueError, control.encode_subscribe, big, 0, 4, 1, (("c" * 65536, 0),))
    raises(ValueError, host.encode_publish, big, 0, 5, "a", b"",
           props=((P.USER_PROPERTY, ("k", "v" * 65536)),))
    raises(ValueError, host.encode_publish, big, 0, 5, "a", b"",
           props=((P.CONTENT_TYPE, "t" * 65536),))
    raises(ValueError, control.encode_connect, big, 0, 4, "i" * 65536)


# ---- Properties (MQTT 5) -------------------------------------------------------------------

def test_U_2_2_2_a_property_not_allowed_or_unknown():
    # decode: unknown ids and ids not allowed in the packet
    for props_hex in ("04 00", "00 00", "2B 00", "FF 00", "11 00 00 00 0A", "1F 00 01 61",
                      "21 00 05", "15 00 01 61", "12 00 01 61"):
        assert reason(pub5(props_hex), 5) == 0x81, props_hex
    assert reason(unhex("40 07 00 0A 00 03 23 00 01"), 5) == 0x81  # topic alias in PUBACK
    assert reason(unhex("50 08 00 0A 00 04 03 00 01 61"), 5) == 0x81  # content type in PUBREC
    assert reason(unhex("62 09 00 0A 00 05 02 00 00 00 01"), 5) == 0x81
    assert reason(unhex("90 07 00 0A 03 23 00 01 00"), 5) == 0x81  # topic alias in SUBACK
    assert reason(unhex("20 05 00 00 02 0B 01"), 5) == 0x81  # subscription id in CONNACK
    # encode
    for props in (((P.SESSION_EXPIRY, 10),), ((0x04, 1),), ((0, 1),), ((0x2B, 1),),
                  ((P.REASON_STRING, "r"),), ((P.RECEIVE_MAXIMUM, 5),)):
        bad_pub(5, "a", b"", props=props)
    raises(ValueError, publish.encode_ack, BUF, 0, 5, PUBACK, 1, 0, ((P.CONTENT_TYPE, "t"),))
    raises(ValueError, publish.encode_ack, BUF, 0, 5, PUBREL, 1, 0, ((P.TOPIC_ALIAS, 1),))
    raises(ValueError, control.encode_subscribe, BUF, 0, 5, 1, (("a", 0),),
           ((P.MESSAGE_EXPIRY, 1),))
    # a value of the wrong type
    raises(TypeError, host.encode_publish, BUF, 0, 5, "a", b"",
           props=((P.CORRELATION_DATA, "text"),))
    # a value cut short by the property block
    assert reason(pub5("02 00 00"), 5) == 0x81
    assert reason(pub5("23 00"), 5) == 0x81
    # a property block longer than the packet
    assert reason(packet(0x30, unhex("00 01 61 05 01 01")), 5) == 0x81


def test_U_2_2_2_a_property_value_range():
    # payload format indicator and other byte flags take 0 or 1 only
    assert reason(pub5("01 02"), 5) == 0x82
    bad_pub(5, "a", b"", props=((P.PAYLOAD_FORMAT, 2),))
    assert decode_ok(pub5("01 01"), 5) == codec.PUBLISH and PKT.props.get_int(P.PAYLOAD_FORMAT) == 1
    bad_pub(5, "a", b"", props=((P.MESSAGE_EXPIRY, -1),))
    # Receive Maximum 0 in CONNACK
    assert reason(unhex("20 06 00 00 03 21 00 00"), 5) == 0x82


def test_U_3_3_2_c_duplicate_property():
    # decode: each single-valued PUBLISH property twice
    for props_hex in ("03 00 01 78 03 00 01 79",  # content type
                      "23 00 01 23 00 02",  # topic alias
                      "08 00 01 72 08 00 01 73",  # response topic
                      "09 00 01 01 09 00 00",  # correlation data
                      "02 00 00 00 01 02 00 00 00 01",  # message expiry
                      "01 00 01 01"):  # payload format
        assert reason(pub5(props_hex), 5) == 0x82, props_hex
    assert reason(unhex("40 0C 00 0A 10 08 1F 00 01 61 1F 00 01 62"), 5) == 0x82
    # encode
    bad_pub(5, "a", b"", props=((P.CONTENT_TYPE, "x"), (P.CONTENT_TYPE, "y")))
    bad_pub(5, "a", b"", props=((P.CORRELATION_DATA, b"x"), (P.MESSAGE_EXPIRY, 1),
                                (P.CORRELATION_DATA, b"y")))
    bad_pub(5, "a", b"", props=((P.RESPONSE_TOPIC, "r"), (P.RESPONSE_TOPIC, "r")))
    bad_pub(5, "a", b"", props=((P.TOPIC_ALIAS, 1), (P.TOPIC_ALIAS, 2)))
    bad_pub(5, "a", b"", props=((P.TOPIC_ALIAS, 1),), alias=1)  # alias argument and property
    raises(ValueError, publish.encode_ack, BUF, 0, 5, PUBACK, 1, 0x10,
           ((P.REASON_STRING, "a"), (P.REASON_STRING, "b")))


def test_U_3_8_2_subscription_identifier_once_in_subscribe():
    # Repeated in a PUBLISH (one per matching subscription) is fine, in a SUBSCRIBE it is not.
    data = packet(0x82, unhex("00 0A 04 0B 01 0B 02 00 01 61 00"))
    assert reason(data, 5) == 0x82
    raises(ValueError, control.encode_subscribe, BUF, 0, 5, 10, (("a", 0),),
           ((P.SUBSCRIPTION_ID, 1), (P.SUBSCRIPTION_ID, 2)))


def test_U_3_3_2_c_user_property_repeats_keep_order():
    props = ((P.USER_PROPERTY, ("b", "1")), (P.USER_PROPERTY, ("a", "2")),
             (P.USER_PROPERTY, ("b", "3")), (P.MESSAGE_EXPIRY, 9), (P.USER_PROPERTY, ("a", "2")))
    data = enc_pub(5, "t", b"x", props=props)
    assert decode_ok(data, 5) == codec.PUBLISH
    assert PKT.props.n_user == 4
    assert host.props_items(PKT.props) == list(props)
    assert host.user_properties(PKT.props) == [("b", "1"), ("a", "2"), ("b", "3"), ("a", "2")]
    # two subscription identifiers in a received PUBLISH are allowed too
    assert decode_ok(pub5("0B 01 0B 80 01"), 5) == codec.PUBLISH
    assert PKT.props.n_subid == 2
    assert host.props_items(PKT.props) == [(P.SUBSCRIPTION_ID, 1), (P.SUBSCRIPTION_ID, 128)]


def test_U_3_3_2_d_subscription_identifier_zero():
    assert reason(pub5("0B 00"), 5) == 0x82
    assert reason(pub5("0B 01 0B 00"), 5) == 0x82
    assert reason(packet(0x82, unhex("00 0A 02 0B 00 00 01 61 00")), 5) == 0x82
    bad_pub(5, "a", b"", props=((P.SUBSCRIPTION_ID, 0),))
    raises(ValueError, control.encode_subscribe, BUF, 0, 5, 1, (("a", 0),),
           ((P.SUBSCRIPTION_ID, 0),))
    assert decode_ok(pub5("0B FF FF FF 7F"), 5) == codec.PUBLISH
    assert PKT.props.get_int(P.SUBSCRIPTION_ID) == 268435455


def test_MQTT_3_3_2_8_topic_alias_zero():
    assert reason(pub5("23 00 00"), 5) == 0x94
    assert reason(pub5("23 00 00", topic=b""), 5) == 0x94
    bad_pub(5, "a", b"", props=((P.TOPIC_ALIAS, 0),))
    bad_pub(5, "a", b"", alias=0x10000)
    bad_pub(5, "a", b"", alias=-1)
    bad_pub(4, "a", b"", alias=1)  # no aliases in 3.1.1
    assert enc_pub(5, "a", b"", alias=0xFFFF) == unhex("30 07 00 01 61 03 23 FF FF")
    assert decode_ok(pub5("23 00 01"), 5) == codec.PUBLISH and PKT.props.get_int(P.TOPIC_ALIAS) == 1


def test_U_3_3_2_a_empty_topic_needs_alias():
    assert reason(pub5(topic=b""), 5) == 0x82
    assert reason(pub5("02 00 00 00 05", topic=b"", payload=b"x"), 5) == 0x82
    data = pub5("23 00 05", topic=b"", payload=b"x")
    assert data == unhex("30 07 00 00 03 23 00 05 78")
    assert decode_ok(data, 5) == codec.PUBLISH
    assert PKT.topic_len == 0 and PKT.props.get_int(P.TOPIC_ALIAS) == 5 and host.payload_bytes(PKT) == b"x"
    # encoder: empty topic only with an alias
    bad_pub(5, "", b"x")
    assert enc_pub(5, "", b"x", alias=5) == data
    assert enc_pub(5, b"", b"x", qos=1, pid=2, alias=5) == unhex("32 09 00 00 00 02 03 23 00 05 78")
    bad_pub(4, "", b"x", alias=5)


def test_MQTT_3_3_2_14_response_topic_wildcard():
    assert reason(pub5("08 00 03 72 2F 23"), 5) == 0x82
    assert reason(pub5("08 00 03 72 2F 2B"), 5) == 0x82
    for rt in ("r/#", "r/+", b"+", bytearray(b"#")):
        bad_pub(5, "a", b"", props=((P.RESPONSE_TOPIC, rt),))
    assert decode_ok(pub5("08 00 03 72 2F 31"), 5) == codec.PUBLISH
    assert PKT.props.get_str(P.RESPONSE_TOPIC) == "r/1"


def test_MQTT_3_3_2_13_response_topic_utf8():
    assert reason(pub5("08 00 02 72 C0"), 5) == 0x81
    bad_pub(5, "a", b"", props=((P.RESPONSE_TOPIC, b"r\xc0"),))


def test_MQTT_2_2_2_1_publish_property_length_always_present():
    assert enc_pub(5, "a/b", b"") == unhex("30 06 00 03 61 2F 62 00")
    assert enc_pub(5, "a/b", b"x", qos=1, pid=1, props=()) == unhex("32 09 00 03 61 2F 62 00 01 00 78")
    # a 3.1.1-shaped PUBLISH read as 5.0: no property length -> malformed
    assert reason(unhex("30 05 00 03 61 2F 62"), 5) == 0x81
    assert reason(unhex("32 07 00 03 61 2F 62 00 0A"), 5) == 0x81
    # the first payload byte would be read as a property length larger than what is left
    assert reason(unhex("30 06 00 03 61 2F 62 78"), 5) == 0x81


def test_v311_properties_refused_by_encoders():
    bad_pub(4, "a", b"", props=((P.MESSAGE_EXPIRY, 1),))
    raises(ValueError, publish.encode_ack, BUF, 0, 4, PUBACK, 1, 0, ((P.REASON_STRING, "r"),))
    raises(ValueError, control.encode_subscribe, BUF, 0, 4, 1, (("a", 0),), ((P.SUBSCRIPTION_ID, 1),))
    raises(ValueError, control.encode_disconnect, BUF, 0, 4, 0, ((P.SESSION_EXPIRY, 1),))


# ---- Acks ------------------------------------------------------------------------------------

def _short_forms(ptype, first, rc):
    f = "%02X" % first
    for hx, want_rc in ((f + " 02 00 0A", 0), (f + " 03 00 0A 00", 0), (f + " 04 00 0A 00 00", 0),
                        (f + " 03 00 0A %02X" % rc, rc), (f + " 04 00 0A %02X 00" % rc, rc),
                        (f + " 08 00 0A %02X 04 1F 00 01 78" % rc, rc)):
        assert decode_ok(unhex(hx), 5) == ptype, hx
        assert PKT.pid == 10 and PKT.reason == want_rc, hx
    assert PKT.props.get_str(P.REASON_STRING) == "x"
    # shorter than a packet id, or a property length that overruns
    assert reason(unhex(f + " 01 00"), 5) == 0x81
    assert reason(unhex(f + " 00"), 5) == 0x81
    assert reason(unhex(f + " 04 00 0A 00 05"), 5) == 0x81
    # our encoder picks the shortest form
    n = publish.encode_ack(BUF, 0, 5, ptype, 10)
    assert bytes(BUF[:n]) == unhex(f + " 02 00 0A")
    n = publish.encode_ack(BUF, 0, 5, ptype, 10, rc)
    assert bytes(BUF[:n]) == unhex(f + " 03 00 0A %02X" % rc)
    n = publish.encode_ack(BUF, 0, 5, ptype, 10, 0, ())
    assert bytes(BUF[:n]) == unhex(f + " 02 00 0A")


def test_U_3_4_2_a_puback_short_forms():
    _short_forms(PUBACK, 0x40, 0x10)


def test_U_3_5_2_a_pubrec_short_forms():
    _short_forms(PUBREC, 0x50, 0x80)


def test_U_3_6_2_a_pubrel_short_forms():
    _short_forms(PUBREL, 0x62, 0x92)


def test_U_3_7_2_a_pubcomp_short_forms():
    _short_forms(PUBCOMP, 0x70, 0x92)


PUB_REASONS = (0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)
REL_REASONS = (0x00, 0x92)


def _reason_codes(ptype, first, allowed):
    for rc in range(256):
        data = unhex("%02X 03 00 0A %02X" % (first, rc))
        if rc in allowed:
            n = publish.encode_ack(BUF, 0, 5, ptype, 10, rc)
            assert BUF[n - 1] == rc or rc == 0
            assert decode_ok(data, 5) == ptype and PKT.reason == rc
        else:
            raises(ValueError, publish.encode_ack, BUF, 0, 5, ptype, 10, rc)
            assert reason(data, 5) == 0x81, hex(rc)
    raises(ValueError, publish.encode_ack, BUF, 0, 5, ptype, 10, 256)
    raises(ValueError, publish.encode_ack, BUF, 0, 5, ptype, 10, -1)


def test_MQTT_3_4_2_1_puback_reason_codes():
    _reason_codes(PUBACK, 0x40, PUB_REASONS)


def test_MQTT_3_5_2_1_pubrec_reason_codes():
    _reason_codes(PUBREC, 0x50, PUB_REASONS)


def test_MQTT_3_6_2_1_pubrel_reason_codes():
    _reason_codes(PUBREL, 0x62, REL_REASONS)


def test_MQTT_3_7_2_1_pubcomp_reason_codes():
    _reason_codes(PUBCOMP, 0x70, REL_REASONS)


def test_U_3_4_a_v311_ack_exactly_4_bytes():
    for first in ("40", "50", "62", "70"):
        assert decode_ok(unhex(first + " 02 00 0A"), 4) > 0
        assert reason(unhex(first + " 03 00 0A 00"), 4) == 0x81
        assert reason(unhex(first + " 04 00 0A 00 00"), 4) == 0x81
        assert reason(unhex(first + " 01 0A"), 4) == 0x81
        assert reason(unhex(first + " 00"), 4) == 0x81
    for ptype in (PUBACK, PUBREC, PUBREL, PUBCOMP):
        raises(ValueError, publish.encode_ack, BUF, 0, 4, ptype, 10, 0x10 if ptype < PUBREL else 0x92)
        n = publish.encode_ack(BUF, 0, 4, ptype, 10)
        assert n == 4
    raises(ValueError, publish.encode_ack, BUF, 0, 5, codec.PUBLISH, 10)
    raises(ValueError, publish.encode_ack, BUF, 0, 5, codec.SUBACK, 10)


# ---- Other packets -------------------------------------------------------------------------

def test_MQTT_3_2_2_1_connack_reserved_flags():
    assert decode_ok(unhex("20 02 01 00"), 4) == codec.CONNACK and PKT.sp == 1
    for flags in (0x02, 0x80, 0xFE, 0x03):
        assert reason(unhex("20 02 %02X 00" % flags), 4) == 0x81, flags
        assert reason(unhex("20 03 %02X 00 00" % flags), 5) == 0x81, flags
    # session present with a refusal [MQTT-3.2.2-6]
    assert reason(unhex("20 02 01 05"), 4) == 0x81
    assert reason(unhex("20 03 01 87 00"), 5) == 0x81
    # CONNACK first byte flags
    assert reason(unhex("21 02 00 00"), 4) == 0x81
    # an unknown return code
    assert reason(unhex("20 02 00 06"), 4) == 0x81
    raises(ValueError, server.encode_connack, BUF, 0, 4, False, 6)


def test_malformed_trailing_bytes_rejected():
    for data, v in ((unhex("D0 01 00"), 4), (unhex("D0 01 00"), 5), (unhex("C0 01 00"), 5),
                    (unhex("E0 01 00"), 4), (unhex("20 03 00 00 00"), 4),
                    (unhex("20 04 00 00 00 00"), 5), (unhex("40 05 00 0A 00 00 00"), 5),
                    (unhex("40 09 00 0A 10 04 1F 00 01 78 00"), 5),
                    (unhex("B0 03 00 0A 00"), 4), (unhex("E0 03 00 00 00"), 5)):
        assert reason(data, v) == 0x81, h(data)
    # whole packets whose remaining length does not match the data
    for data in (unhex("40 02 00 0A 00"), unhex("40 03 00 0A"), unhex("C0 00 00"), unhex("C0")):
        e = raises(codec.MQTTError, server.decode_packet, PKT, data, 0, len(data), 4)
        assert e.reason == 0x81, h(data)
    e = raises(codec.MQTTError, server.decode_packet, PKT, b"", 0, 0, 4)
    assert e.reason == 0x81


def test_subscribe_options_reserved_bits():
    # 3.1.1: only QoS bits; 5.0: retain handling 3 and bits 6-7 are malformed [MQTT-3.8.3-5]
    assert reason(packet(0x82, unhex("00 01 00 01 61 04")), 4) == 0x81
    assert reason(packet(0x82, unhex("00 01 00 00 01 61 03")), 5) == 0x81
    assert reason(packet(0x82, unhex("00 01 00 00 01 61 30")), 5) == 0x81
    assert reason(packet(0x82, unhex("00 01 00 00 01 61 40")), 5) == 0x81
    for opts, v in ((4, 4), (3, 5), (0x30, 5), (0x80, 5)):
        raises(ValueError, control.encode_subscribe, BUF, 0, v, 1, (("a", opts),))
    # no filter at all
    assert reason(packet(0x82, unhex("00 01")), 4) == 0x82
    raises(ValueError, control.encode_subscribe, BUF, 0, 4, 1, ())


def test_encoder_buffer_too_small():
    small = bytearray(8)
    raises(ValueError, host.encode_publish, small, 0, 4, "a/b", b"toolong")
    raises(ValueError, host.encode_publish, small, 4, 4, "a/b", b"")
    raises(ValueError, publish.encode_ack, small, 5, 5, PUBACK, 1, 0x10)
    assert publish.encode_ack(small, 4, 5, PUBACK, 1) == 4
    raises(TypeError, host.encode_publish, BUF, 0, 4, "a", "str payload")


def test_client_decode_refuses_broker_direction_packets():
    # A client never receives CONNECT, SUBSCRIBE or UNSUBSCRIBE: control.decode
    # calls each a protocol error (0x82) without decoding it; the host's
    # server.decode reads the same bodies.
    conn = BUF[:control.encode_connect(BUF, 0, 5, "dev")]
    sub = BUF[:control.encode_subscribe(BUF, 0, 5, 7, (("a/#", 1),))]
    unsub = BUF[:control.encode_unsubscribe(BUF, 0, 4, 8, ("a/#",))]
    for data, v, t in ((conn, 5, codec.CONNECT), (sub, 5, codec.SUBSCRIBE),
                       (unsub, 4, codec.UNSUBSCRIBE)):
        data = bytes(data)
        f = codec.Framer(64)
        assert host.feed(f, data, 0, len(data)) == len(data) and host.done(f)
        e = raises(codec.MQTTError, control.decode, PKT, f.first, f.buf, 0, f.rl, v)
        assert e.reason == 0x82, h(data)
        assert server.decode(PKT, f.first, f.buf, 0, f.rl, v) == t
    assert PKT.extra == ["a/#"]
