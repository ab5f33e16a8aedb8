"""The device's MQTT 5 property module (frugalmqtt.props) and UTF-8 check
(lite.text) against the validation vectors of test_codec_validation.py
that concern received properties (Props.parse) and the properties a client
builds (props.build). Props.parse returns the offset after the block, or
minus the reason code to disconnect with: 0x81 Malformed, 0x82 Protocol
Error, 0x94 Topic Alias invalid. Runs unchanged on CPython and MicroPython.
"""
from _util import raises, unhex
from frugalmqtt import props as P
from frugalmqtt.lite import text as utf8
from test_codec_validation import VALID_UTF8, BAD_UTF8, TRUNCATED_UTF8, SURROGATES

PR = P.Props()


def _vbi(n):
    b = bytearray()
    while True:
        b.append(n & 0x7F | (0x80 if n > 127 else 0))
        n >>= 7
        if not n:
            return bytes(b)


def parse(props_hex, where=3, tail=b"", length=None):
    """Props.parse over a block of the given properties (its length, unless
    `length` gives the raw length bytes), with `tail` (a payload) after it."""
    p = unhex(props_hex)
    b = bytearray((unhex(length) if length else _vbi(len(p))) + p + tail)
    return PR.parse(b, 0, len(b), where)


def ok(props_hex, where=3):
    r = parse(props_hex, where)
    assert r == len(_vbi(len(unhex(props_hex)))) + len(unhex(props_hex)), (props_hex, r)
    return PR


# ---- UTF-8 [MQTT-1.5.4-x] -------------------------------------------------------------------

def test_MQTT_1_5_4_1_utf8_vectors():
    for hx in VALID_UTF8:
        b = b"x" + unhex(hx) + b"y"
        assert utf8(b, 0, len(b)), hx
        assert ok("03" + "%04X" % len(b) + b.hex()).get_bytes(P.CONTENT_TYPE) == b
    for hx in BAD_UTF8 + TRUNCATED_UTF8 + SURROGATES:
        b = b"a" + unhex(hx)
        assert not utf8(b, 0, len(b)), hx
        assert parse("03" + "%04X" % len(b) + b.hex()) == -0x81, hx
    # the string's length bounds it, whatever follows
    assert not utf8(b"a\xe2\x82\xac", 0, 3)


def test_MQTT_1_5_4_2_nul_rejected():
    assert not utf8(b"a\x00", 0, 2)
    assert parse("03 00 02 61 00") == -0x81
    raises(ValueError, P.build, [(P.CONTENT_TYPE, "t\x00")])


def test_MQTT_1_5_4_3_bom_kept():
    assert ok("03 00 04 61 EF BB BF").get_bytes(P.CONTENT_TYPE) == b"a\xef\xbb\xbf"
    assert P.build([(P.CONTENT_TYPE, "\ufeffa")]) == unhex("03 00 04 EF BB BF 61")


def test_MQTT_1_5_7_1_user_property_strings_checked():
    for hx in ("26 00 01 00 00 01 76", "26 00 01 6B 00 02 ED A0", "26 00 01 6B 00 03 ED A0 80",
               "26 00 01 C0 00 01 76"):
        assert parse(hx) == -0x81, hx
    raises(ValueError, P.build, [(P.USER_PROPERTY, ("k\x00", "v"))])
    raises(ValueError, P.build, [(P.USER_PROPERTY, ("k", "\ud800"))])


def test_U_1_5_4_a_string_length_prefix_bounds_field():
    # a property string running past the property block, into the payload
    assert parse("03 00 05 61", tail=b"bcde") == -0x81


# ---- Variable Byte Integer ------------------------------------------------------------------

def test_MQTT_1_5_5_1_vbi_non_minimal_rejected():
    assert parse("0B 81 00") == -0x81  # a subscription identifier
    assert parse("", length="80 00") == -0x81  # the property length
    assert ok("0B 81 01").get_int(P.SUBSCRIPTION_ID) == 129


def test_U_1_5_5_a_vbi_at_most_4_bytes():
    assert parse("0B FF FF FF FF 7F") == -0x81
    assert ok("0B FF FF FF 7F").get_int(P.SUBSCRIPTION_ID) == 268435455
    assert parse("", length="FF FF FF FF 7F") == -0x81
    raises(ValueError, P.build, [(P.SUBSCRIPTION_ID, 268435456)], 8)


# ---- Properties (MQTT 5) --------------------------------------------------------------------

def test_U_2_2_2_a_property_not_allowed_or_unknown():
    for hx in ("04 00", "00 00", "2B 00", "FF 00", "11 00 00 00 0A", "1F 00 01 61",
               "21 00 05", "15 00 01 61", "12 00 01 61"):
        assert parse(hx) == -0x81, hx  # in a PUBLISH
    assert parse("23 00 01", 4) == -0x81  # topic alias in PUBACK
    assert parse("03 00 01 61", 5) == -0x81  # content type in PUBREC
    assert parse("02 00 00 00 01", 6) == -0x81  # message expiry in PUBREL
    assert parse("23 00 01", 9) == -0x81  # topic alias in SUBACK
    assert ok("1F 00 01 61 26 00 01 6B 00 01 76", 4).get_str(P.REASON_STRING) == "a"
    assert ok("1F 00 01 61", 11).has(P.REASON_STRING)  # UNSUBACK
    for pairs in ([(P.SESSION_EXPIRY, 10)], [(0x04, 1)], [(0, 1)], [(0x2B, 1)],
                  [(P.REASON_STRING, "r")], [(P.RECEIVE_MAXIMUM, 5)]):
        raises(ValueError, P.build, pairs)
    raises(ValueError, P.build, [(P.MESSAGE_EXPIRY, 1)], 8)  # not in a SUBSCRIBE
    raises(TypeError, P.build, [(P.CORRELATION_DATA, "text")])
    # a value cut short by the block; a block longer than the packet
    assert parse("02 00 00") == -0x81
    assert parse("23 00") == -0x81
    b = bytearray(unhex("05 01 01"))
    assert PR.parse(b, 0, 3, 3) == -0x81


def test_U_2_2_2_a_property_value_range():
    assert parse("01 02") == -0x82
    assert ok("01 01").get_int(P.PAYLOAD_FORMAT) == 1
    raises(ValueError, P.build, [(P.PAYLOAD_FORMAT, 2)])
    raises(ValueError, P.build, [(P.MESSAGE_EXPIRY, -1)])
    raises(ValueError, P.build, [(P.MESSAGE_EXPIRY, 1 << 32)])


def test_U_3_3_2_c_duplicate_property():
    for hx in ("03 00 01 78 03 00 01 79", "23 00 01 23 00 02", "08 00 01 72 08 00 01 73",
               "09 00 01 01 09 00 00", "02 00 00 00 01 02 00 00 00 01", "01 00 01 01"):
        assert parse(hx) == -0x82, hx
    assert parse("1F 00 01 61 1F 00 01 62", 4) == -0x82  # reason string twice in PUBACK
    for pairs in ([(P.CONTENT_TYPE, "x"), (P.CONTENT_TYPE, "y")],
                  [(P.CORRELATION_DATA, b"x"), (P.MESSAGE_EXPIRY, 1), (P.CORRELATION_DATA, b"y")],
                  [(P.RESPONSE_TOPIC, "r"), (P.RESPONSE_TOPIC, "r")]):
        raises(ValueError, P.build, pairs)
    raises(ValueError, P.build, [(P.SUBSCRIPTION_ID, 1), (P.SUBSCRIPTION_ID, 2)], 8)


def test_U_3_3_2_c_user_property_repeats_keep_order():
    pairs = [(P.USER_PROPERTY, ("b", "1")), (P.USER_PROPERTY, ("a", "2")),
             (P.USER_PROPERTY, ("b", "3")), (P.MESSAGE_EXPIRY, 9), (P.USER_PROPERTY, ("a", "2"))]
    b = P.build(pairs)
    assert ok(b.hex()).user_properties() == [("b", "1"), ("a", "2"), ("b", "3"), ("a", "2")]
    assert PR.get_int(P.MESSAGE_EXPIRY) == 9
    # two subscription identifiers in a received PUBLISH are allowed too
    assert ok("0B 01 0B 80 01").get_int(P.SUBSCRIPTION_ID) == 1


def test_U_3_3_2_d_subscription_identifier_zero():
    assert parse("0B 00") == -0x82
    assert parse("0B 01 0B 00") == -0x82
    raises(ValueError, P.build, [(P.SUBSCRIPTION_ID, 0)], 8)
    assert P.build([(P.SUBSCRIPTION_ID, 268435455)], 8) == unhex("0B FF FF FF 7F")


def test_MQTT_3_3_2_8_topic_alias_zero():
    assert parse("23 00 00") == -0x94
    assert ok("23 00 01").get_int(P.TOPIC_ALIAS) == 1
    raises(ValueError, P.build, [(P.TOPIC_ALIAS, 1)])  # the client sets aliases itself


def test_MQTT_3_3_2_14_response_topic_wildcard():
    assert parse("08 00 03 72 2F 23") == -0x82
    assert parse("08 00 03 72 2F 2B") == -0x82
    for rt in ("r/#", "r/+", "+", "#"):
        raises(ValueError, P.build, [(P.RESPONSE_TOPIC, rt)])
    assert ok("08 00 03 72 2F 31").get_str(P.RESPONSE_TOPIC) == "r/1"


def test_MQTT_3_3_2_13_response_topic_utf8():
    assert parse("08 00 02 72 C0") == -0x81
    raises(ValueError, P.build, [(P.RESPONSE_TOPIC, "r\ud800")])


def test_U_3_3_2_b_payload_format_indicator_built_first():
    # the core finds the indicator at the start of the properties it is given
    b = P.build([(P.USER_PROPERTY, ("k", "v")), (P.PAYLOAD_FORMAT, 1), (P.MESSAGE_EXPIRY, 5)])
    assert b[:2] == b"\x01\x01" and ok(b.hex()).user_properties() == [("k", "v")]
    assert PR.get_int(P.MESSAGE_EXPIRY) == 5


def test_MQTT_1_5_5_1_connack_property_length_non_minimal():
    # the core reads the CONNACK's properties itself: the same rule there
    from _session_rig import Rig
    r = Rig(5)
    r.begin(True)
    r.take()
    r.protocol_error(unhex("20 04 00 00 80 00"), 0x81)
    r = Rig(5)
    r.begin(True)
    r.feed(unhex("20 03 00 00 00"))
    assert r.s.up
