"""Bad arguments get a TypeError or ValueError that names the argument (and
for sizes the size and the limit), the same on both runtimes and in every
profile (lite, the telemetry driver and the full engine), and nothing is
sent; the two exceptions print their reason code and its name. Runs on
CPython and MicroPython."""
from _util import raises
from _session_rig import BOTH, Rig, connack
from _lite_rig import Peer, Lite
from frugalmqtt.err import MQTTError, ServerError
from frugalmqtt.liteprops import props
from frugalmqtt.telem import Telemetry


class _Telem(Telemetry):
    """Telemetry whose readiness comes from the peer's script (the peer is
    its own poller, as in _lite_rig.Lite)."""

    def connect(self, clean=None, sock=None, timeout_ms=0):
        if sock is not None:
            self.poller = sock
        return Telemetry.connect(self, clean, sock, timeout_ms)


def _publishers(v):
    """(name, publish function, what it sent) for each profile, connected."""
    out = []
    for cls in (Lite, _Telem):
        peer = Peer()
        peer.give(connack(v))
        p = cls("args", "broker", version=v, max_packet=64, slots=2)
        p.connect(sock=peer)
        peer.sent()
        out.append((cls.__name__, p.publish, peer.sent))
    r = Rig(v, slot_size=64 + 3, tx_size=64 + 3)
    r.up()
    out.append(("Session", r.s.publish, r.take))
    return out


def test_wrong_types_name_the_argument_and_send_nothing():
    for v in BOTH:
        for name, publish, sent in _publishers(v):
            for qos in (0, 1):
                e = raises(TypeError, publish, "t/a", [1, 2, 3], qos)
                assert str(e).startswith("payload: ") and "list" in str(e), (name, str(e))
                e = raises(TypeError, publish, 5, b"x", qos)
                assert str(e).startswith("topic: ") and "int" in str(e), (name, str(e))
                if v == 5:
                    e = raises(TypeError, publish, "t/a", b"x", qos, False, 5)
                    assert str(e).startswith("props: "), (name, str(e))
            assert sent() == [], name


def test_MQTT_1_5_4_1_bad_topics_are_refused_before_sending():
    # an overlong encoding, a surrogate (ED A0 80), U+0000, a wildcard, empty
    for v in BOTH:
        for name, publish, sent in _publishers(v):
            for t in (b"a/\xc0\xaf", b"a/\xed\xa0\x80", b"a\x00b", "a/#", "a/+/b", "", b""):
                for qos in (0, 1):
                    e = raises(ValueError, publish, t, b"x", qos)
                    assert str(e).startswith("topic: "), (name, t, str(e))
            assert sent() == [], name


def test_size_errors_name_the_size_and_the_limit():
    for v in BOTH:
        for name, publish, sent in _publishers(v):
            for qos, where in ((0, "buffer"), (1, "slot")):
                n = 80
                while True:  # the largest payload that fits: one byte more must not
                    try:
                        publish("t/a", bytes(n), qos)
                        break
                    except ValueError as e:
                        last = str(e)
                    n -= 1
                assert sent(), name
                head = 2 + 2 + 3 + (2 if qos else 0) + (1 if v == 5 else 0)
                want = "payload: a PUBLISH of %d bytes, over the %d its %s holds" % (
                    head + n + 1, head + n, where)
                assert last == want, (name, last, want)


def test_liteprops_names_the_response_topic():
    e = raises(ValueError, props, response_topic="r/#")
    assert str(e).startswith("response_topic: ")


def test_exceptions_print_their_code_and_its_name():
    assert str(ServerError(0x87)) == "0x87 Not authorized"
    assert str(ServerError(5)) == "0x05 MQTT 3.1.1 CONNACK: not authorized"
    assert str(MQTTError(0x95)) == "0x95 Packet too large"
    assert str(ServerError(0)) == "0x00 Normal disconnection"
    assert ServerError(0x87).args == (0x87,)


def test_props_build_names_what_is_not_a_pair():
    from frugalmqtt import props as P
    for bad in ([5], [(P.USER_PROPERTY,)], [(P.CONTENT_TYPE,)], [("x", 1)],
                [(P.USER_PROPERTY, "ab")], [(P.USER_PROPERTY, ("a",))]):
        e = raises(TypeError, P.build, bad)
        assert str(e).startswith("props: "), (bad, str(e))
    assert P.build([(P.USER_PROPERTY, ("a", "b"))]) == b"\x26\x00\x01a\x00\x01b"
