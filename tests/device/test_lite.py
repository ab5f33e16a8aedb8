"""lite.Publisher, the publish-only profile, against a scripted broker peer:
the broker's bytes come from the codec's encoders, and every byte the
Publisher sends is decoded with the codec. Runs on CPython and MicroPython."""
import errno
from _util import raises, no_alloc
from _session_rig import BOTH, pub, ack, connack, rel, h
from frugalmqtt_host.ref import codec
from frugalmqtt_host.ref import props as PR
from frugalmqtt_host.ref import publish as P
from frugalmqtt.err import MQTTError, ServerError
from frugalmqtt.lite import Publisher, SESSION_LOST
from frugalmqtt.liteprops import props
from frugalmqtt_host import server as SV
from _lite_rig import Peer, Lite, TX, PING

_PKT = P.Packet()


def start(v, sp=False, ca_props=None, clean=True, **kw):
    """A connected Lite and its peer; the CONNECT it sent is consumed."""
    peer = Peer()
    peer.give(connack(v, sp, 0, ca_props))
    p = Lite("lite", "broker", version=v, clean=clean, **kw)
    assert p.connect(sock=peer) == sp
    out = peer.sent()
    assert len(out) == 1 and out[0][0] == 0x10, [h(x) for x in out]
    return p, peer


def decoded(packet, v):
    t = SV.decode_packet(_PKT, packet, 0, len(packet), v)
    return t, _PKT


def test_connect_fields_both_versions():
    for v in BOTH:
        peer = Peer()
        peer.give(connack(v))
        p = Lite("dev-1", "b", version=v, user="u", password=b"pw", keepalive=30,
                 will=("dev/state", b"offline", 1, True), clean=False, rx_size=100)
        p.connect(sock=peer)
        t, pkt = decoded(peer.sent()[0], v)
        c = pkt.extra
        assert t == codec.CONNECT and c.version == v and c.client_id == "dev-1"
        assert not c.clean and c.keepalive == 30
        assert c.username == "u" and bytes(c.password) == b"pw"
        assert c.will is not None
        if v == 5:
            got = dict(c.props)
            # We only accept what fits rx [MQTT-3.1.2-24]; short acks [MQTT-3.1.2-29];
            # a persistent session needs a session expiry [MQTT-3.1.2-23]
            assert got[PR.MAXIMUM_PACKET_SIZE] == 100
            assert got[PR.REQUEST_PROBLEM_INFO] == 0
            assert got[PR.SESSION_EXPIRY] == 0xFFFFFFFF


def test_publish_bytes_match_the_codec():
    pr = props(content_type="application/json", expiry=60, utf8=True,
               response_topic="r/t", correlation=b"\x01\x02", user=(("unit", "C"), ("k", "v")))
    cprops = [(PR.PAYLOAD_FORMAT, 1), (PR.MESSAGE_EXPIRY, 60),
              (PR.CONTENT_TYPE, "application/json"), (PR.RESPONSE_TOPIC, "r/t"),
              (PR.CORRELATION_DATA, b"\x01\x02"), (PR.USER_PROPERTY, ("unit", "C")),
              (PR.USER_PROPERTY, ("k", "v"))]
    for v in BOTH:
        p, peer = start(v)
        p.publish("a/b", b"hello", 0, True, pr if v == 5 else None)
        p.publish(b"a/\xc3\xa9", "h\u00e9", 1)
        p.publish("t", b"x" * 200, 2)
        out = peer.sent()
        assert out[0] == pub(v, "a/b", b"hello", 0, 0, True, False, cprops if v == 5 else None)
        assert out[1] == pub(v, "a/\u00e9", "h\u00e9".encode(), 1, 1)
        assert out[2] == pub(v, "t", b"x" * 200, 2, 2)  # two-byte remaining length


def test_qos1_puback_ends_the_flow():
    for v in BOTH:
        p, peer = start(v)
        done = []
        p.on_done = lambda pid, r: done.append((pid, r))
        assert p.publish("t", b"1", 1) == 1
        assert p.pending() == 1
        peer.give(ack(v, codec.PUBACK, 1, 0x10 if v == 5 else 0))
        assert p.poll(0)
        assert p.pending() == 0 and done == [(1, 0x10 if v == 5 else 0)]  # [MQTT-4.3.2-3]
        assert peer.sent() == [pub(v, "t", b"1", 1, 1)]


def test_qos2_pubrec_pubrel_pubcomp():
    for v in BOTH:
        p, peer = start(v)
        done = []
        p.on_done = lambda pid, r: done.append((pid, r))
        p.publish("t", b"2", 2)
        peer.give(ack(v, codec.PUBREC, 1))
        p.poll(0)
        assert peer.sent() == [pub(v, "t", b"2", 2, 1), rel(1)]  # [MQTT-4.3.3-4]
        peer.give(ack(v, codec.PUBREC, 1))  # repeated PUBREC: PUBREL again, never PUBLISH
        p.poll(0)
        assert peer.sent() == [rel(1)]  # [MQTT-4.3.3-6]
        peer.give(ack(v, codec.PUBCOMP, 1))
        p.poll(0)
        assert done == [(1, 0)] and p.pending() == 0  # [MQTT-4.3.3-5]


def test_pubrec_error_ends_the_flow_without_pubrel():
    p, peer = start(5)
    done = []
    p.on_done = lambda pid, r: done.append((pid, r))
    p.publish("t", b"2", 2)
    peer.sent()
    peer.give(ack(5, codec.PUBREC, 1, 0x80))
    p.poll(0)
    assert peer.sent() == [] and done == [(1, 0x80)]  # [MQTT-4.4.0-2]
    peer2 = Peer()
    peer2.give(connack(5, False))
    p.connect(sock=peer2)  # nothing to resend after a reconnect either
    assert len(peer2.sent()) == 1 and p.pending() == 0


def _three_flows(v):
    """pid 1 QoS 1 unacked, pid 2 QoS 2 past PUBREC, pid 3 QoS 1 unacked."""
    p, peer = start(v, clean=False)
    p.publish("t", b"a", 1)
    p.publish("t", b"b", 2)
    p.publish("t", b"c", 1)
    peer.give(ack(v, codec.PUBREC, 2))
    p.poll(0)
    peer.sent()
    return p, peer


def test_resume_with_session_resends_in_order_with_dup():
    for v in BOTH:
        p, peer = _three_flows(v)
        peer2 = Peer()
        peer2.give(connack(v, True))
        assert p.connect(sock=peer2) is True
        out = peer2.sent()[1:]
        # PUBLISH DUP=1, PUBREL, PUBLISH DUP=1: original ids, original order [MQTT-4.4.0-1]
        assert out == [pub(v, "t", b"a", 1, 1, dup=True), rel(2),
                       pub(v, "t", b"c", 1, 3, dup=True)], [h(x) for x in out]


def test_resume_without_session_sends_again_as_new():
    for v in BOTH:
        p, peer = _three_flows(v)
        done = []
        p.on_done = lambda pid, r: done.append((pid, r))
        peer2 = Peer()
        peer2.give(connack(v, False))
        assert p.connect(sock=peer2) is False
        out = peer2.sent()[1:]
        # the QoS 2 release went with the old session [MQTT-3.2.2-5]
        assert done == [(2, SESSION_LOST)]
        assert out == [pub(v, "t", b"a", 1, 1), pub(v, "t", b"c", 1, 3)], [h(x) for x in out]


def test_receive_maximum_limits_the_window():
    p, peer = start(5, ca_props=[(PR.RECEIVE_MAXIMUM, 2)], slots=3)
    p.publish("t", b"1", 1)
    p.publish("t", b"2", 2)
    # a third QoS>0 publish is stored and waits for the quota [MQTT-3.3.4-7]
    # [MQTT-4.9.0-2]: nothing sent, nothing blocked
    assert p.publish("t", b"3", 1, False, None, 0) == 3 and p.pending() == 3
    assert [x[0] for x in peer.sent()] == [0x32, 0x34]
    # every slot taken: publish waits for one, up to timeout_ms
    e = raises(OSError, p.publish, "t", b"4", 1, False, None, 0)
    assert e.args[0] == errno.ETIMEDOUT and p.pending() == 3  # not stored
    p.publish("t", b"0", 0)  # QoS 0 keeps flowing [MQTT-4.9.0-3]
    peer.give(ack(5, codec.PUBACK, 1))
    p.poll(0)  # the ack frees the quota: the held message goes
    assert peer.sent() == [b"\x30\x05\x00\x01t\x000", pub(5, "t", b"3", 1, 3)]


def test_smaller_quota_after_reconnect_holds_the_rest():
    p, peer = start(5, clean=False, slots=4)
    p.publish("t", b"1", 1)
    p.publish("t", b"2", 1)
    peer2 = Peer()
    peer2.give(connack(5, True, 0, [(PR.RECEIVE_MAXIMUM, 1)]))
    p.connect(sock=peer2)
    assert peer2.sent()[1:] == [pub(5, "t", b"1", 1, 1, dup=True)]
    peer2.give(ack(5, codec.PUBACK, 1))
    p.poll(0)
    assert peer2.sent() == [pub(5, "t", b"2", 1, 2, dup=True)]


def test_connack_limits_refuse_locally():
    p, peer = start(5, ca_props=[(PR.MAXIMUM_QOS, 1), (PR.RETAIN_AVAILABLE, 0),
                                 (PR.MAXIMUM_PACKET_SIZE, 40)])
    raises(ValueError, p.publish, "t", b"x", 2)  # [MQTT-3.2.2-11]
    raises(ValueError, p.publish, "t", b"x", 0, True)  # [MQTT-3.2.2-14]
    e = raises(ValueError, p.publish, "t", b"x" * 40, 1)  # [MQTT-3.2.2-15]
    assert "Maximum Packet Size" in str(e.args[0])
    assert p.pending() == 0 and peer.sent() == []


def test_bad_arguments():
    p, peer = start(5, max_packet=64)
    raises(ValueError, p.publish, "a/+", b"")  # [MQTT-3.3.2-2]
    raises(ValueError, p.publish, b"a/#", b"")
    raises(ValueError, p.publish, "", b"")  # [MQTT-4.7.3-1]
    raises(ValueError, p.publish, b"\xff", b"")  # [MQTT-1.5.4-1]
    raises(ValueError, p.publish, "t", b"x" * 64)
    raises(ValueError, p.publish, "t", "\u00e9" * 40)
    raises(ValueError, Publisher, "", "b", version=4, clean=False)  # [MQTT-3.1.3-7]
    raises(ValueError, props, response_topic="a/#")  # [MQTT-3.3.2-14]
    assert peer.sent() == []


def _fails_with(v, packet, reason):
    p, peer = start(v)
    peer.give(packet)
    e = raises(MQTTError, p.poll, 0)
    assert e.reason == reason, (h(packet), e.reason)
    assert p.sock is None and peer.closed
    if v == 5:
        assert peer.sent() == [bytes((0xE0, 1, reason))]  # [U-4.13.1-a]
    else:
        assert peer.sent() == []  # 3.1.1 closes [MQTT-4.8.0-1]


def test_protocol_errors_from_the_server():
    for v in BOTH:
        _fails_with(v, b"\x36\x05\x00\x01t\x00\x01", 0x81)  # QoS 3 [MQTT-3.3.1-4]
        _fails_with(v, b"\x41\x02\x00\x01", 0x81)  # PUBACK flags [MQTT-2.1.3-1]
        _fails_with(v, b"\x90\x03\x00\x01\x00", 0x82)  # SUBACK: never subscribed
        _fails_with(v, b"\x40\x80\x01", 0x95)  # 128 bytes > rx_size, body never read
    _fails_with(5, b"\x40\x03\x00\x01\x05", 0x81)  # not a PUBACK reason [MQTT-3.4.2-1]
    _fails_with(4, b"\x40\x03\x00\x01\x00", 0x81)  # 3.1.1 PUBACK is 2 bytes


def _connack5(props):
    """A 5.0 CONNACK (no session, success) carrying the raw property bytes."""
    return bytes((0x20, 3 + len(props), 0, 0, len(props))) + props


def _raw_pub(v, first, topic, rest):
    """A PUBLISH the codec would refuse to build: first byte, topic bytes, then
    rest (packet id if any, and payload); 5.0 gets an empty property block
    after the packet id (QoS > 0) or the topic."""
    body = bytes((0, len(topic))) + topic
    if v == 5:
        k = 2 if first & 6 else 0
        rest = rest[:k] + b"\x00" + rest[k:]
    body += rest
    return bytes((first, len(body))) + body


def _connect_fails_with(v, packet, reason):
    """connect() gets `packet` where the CONNACK should be: refused, closed."""
    peer = Peer()
    peer.give(packet)
    e = raises(MQTTError, Lite("x", "b", version=v).connect, None, peer)
    assert e.reason == reason, (h(packet), e.reason)
    assert peer.closed
    out = peer.sent()
    assert out[0][0] == 0x10  # the CONNECT
    assert out[1:] == ([bytes((0xE0, 1, reason))] if v == 5 else []), [h(x) for x in out]


def test_MQTT_3_2_0_1_first_packet_must_be_connack():
    for v in BOTH:
        # a PUBLISH (QoS 0 or 1) before the CONNACK: closed, not acknowledged
        _connect_fails_with(v, pub(v, "t", b"x", 1, 5), 0x82)
        _connect_fails_with(v, pub(v, "t", b"x"), 0x82)
        _connect_fails_with(v, b"\xd0\x00", 0x82)  # PINGRESP


def test_connect_or_a_second_connack_from_the_server_is_a_protocol_error():
    for v in BOTH:
        _fails_with(v, connack(v), 0x82)  # on an open connection [MQTT-3.2.0-1]
        _fails_with(v, b"\x10\x02\x00\x00", 0x82)  # CONNECT: server-bound only


def test_MQTT_2_2_1_3_packet_id_0_is_a_protocol_error():
    for v in BOTH:
        _fails_with(v, b"\x40\x02\x00\x00", 0x82)  # PUBACK
        _fails_with(v, b"\x50\x02\x00\x00", 0x82)  # PUBREC
        _fails_with(v, b"\x62\x02\x00\x00", 0x82)  # PUBREL
        _fails_with(v, b"\x70\x02\x00\x00", 0x82)  # PUBCOMP
        # QoS 1 PUBLISH to "t" with id 0: no PUBACK with id 0
        _fails_with(v, _raw_pub(v, 0x32, b"t", b"\x00\x00x"), 0x82)


def test_MQTT_3_3_2_2_wildcard_topic_from_the_server_is_a_protocol_error():
    for v in BOTH:
        _fails_with(v, _raw_pub(v, 0x32, b"#", b"\x00\x03x"), 0x82)
        _fails_with(v, _raw_pub(v, 0x30, b"a/+/b", b"x"), 0x82)
        # no topic: an alias, and we allow none (5.0 3.3.2.3.4)
        _fails_with(v, _raw_pub(v, 0x30, b"", b"x"), 0x82)


def test_MQTT_1_5_4_1_topic_from_the_server_must_be_utf8():
    for v in BOTH:
        _fails_with(v, _raw_pub(v, 0x32, b"\xc0\x80", b"\x00\x07"), 0x81)  # overlong NUL


def test_pingresp_with_a_body_is_malformed():
    for v in BOTH:
        _fails_with(v, b"\xd0\x01\x00", 0x81)


def test_connack_property_rules():
    # each at most once (5.0 3.2.2.3.3): Receive Maximum twice
    _connect_fails_with(5, _connack5(b"\x21\x00\x05\x21\x00\x05"), 0x82)
    _connect_fails_with(5, _connack5(b"\x24\x02"), 0x82)  # Maximum QoS is 0 or 1
    _connect_fails_with(5, _connack5(b"\x24\x03"), 0x82)
    _connect_fails_with(5, _connack5(b"\x25\x02"), 0x82)  # Retain Available is 0 or 1
    _connect_fails_with(5, _connack5(b"\x21\x00\x00"), 0x82)  # Receive Maximum 0
    _connect_fails_with(5, _connack5(b"\x27\x00\x00\x00\x00"), 0x82)  # Maximum Packet Size 0
    # Authentication Method / Data, though we never asked for enhanced auth (5.0 3.2.2.3.17)
    _connect_fails_with(5, _connack5(b"\x15\x00\x01m"), 0x82)
    _connect_fails_with(5, _connack5(b"\x16\x00\x01d"), 0x82)
    # User Property may repeat; a valid CONNACK with two connects
    peer = Peer()
    peer.give(_connack5(b"\x26\x00\x01a\x00\x01b\x26\x00\x01a\x00\x01c\x24\x01"))
    p = Lite("x", "b")
    assert p.connect(sock=peer) is False and p.max_qos == 1


def test_MQTT_1_5_4_1_connack_strings_must_be_utf8():
    # Assigned Client Identifier overlong, Reason String a surrogate, a user
    # property with U+0000 [MQTT-1.5.4-2]: malformed
    _connect_fails_with(5, _connack5(b"\x12\x00\x02\xc0\x80"), 0x81)
    _connect_fails_with(5, _connack5(b"\x1f\x00\x03\xed\xa0\x80"), 0x81)
    _connect_fails_with(5, _connack5(b"\x26\x00\x01\x00\x00\x01b"), 0x81)
    _connect_fails_with(5, _connack5(b"\x1f\x00\x05ab"), 0x81)  # string past the end


def test_MQTT_1_5_4_3_utf8_check():
    from frugalmqtt.lite import text as utf8  # (lite.py's checker, named text)
    good = [b"", b"abc", b"\xc2\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80",
            b"\xef\xbb\xbfx",  # U+FEFF kept, not skipped [MQTT-1.5.4-3]
            b"\xf4\x8f\xbf\xbf", b"\xed\x9f\xbf"]
    bad = [b"\x00", b"a\x00b",  # [MQTT-1.5.4-2]
           b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xf0\x80\x80\x80",  # overlong
           b"\xed\xa0\x80", b"\xed\xbf\xbf",  # surrogates [MQTT-1.5.4-1]
           b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xff",  # past U+10FFFF
           b"\xe2\x82", b"\xc2", b"\x80", b"\xe2\x28\xa1"]  # cut short, stray, bad continuation
    for b in good:
        assert utf8(b, 0, len(b)), h(b)
    for b in bad:
        assert not utf8(b, 0, len(b)), h(b)


def test_server_disconnect_and_refusal():
    p, peer = start(5)
    peer.give(b"\xe0\x01\x8b")
    e = raises(ServerError, p.poll, 0)
    assert e.args[0] == 0x8B and p.sock is None
    for v in BOTH:
        peer = Peer()
        peer.give(connack(v, False, 0x87 if v == 5 else 5))
        e = raises(ServerError, Lite("x", "b", version=v).connect, None, peer)
        assert e.args[0] == (0x87 if v == 5 else 5)
        peer = Peer()
        peer.give(connack(v, True))
        e = raises(MQTTError, Lite("x", "b", version=v).connect, True, peer)
        assert e.reason == 0x82  # session present after clean start [MQTT-3.2.2-4]


def test_inbound_publish_is_acknowledged_not_delivered():
    for v in BOTH:
        p, peer = start(v)
        peer.give(pub(v, "old/sub", b"x", 1, 7), pub(v, "old/sub", b"y", 2, 8), rel(8))
        p.poll(0)
        # every flow acknowledged [MQTT-4.5.0-2]; lite records no inbound QoS 2
        # id, so the PUBREL finds none: 0x92 on 5.0 [MQTT-3.7.2-1]
        assert peer.sent() == [ack(v, codec.PUBACK, 7), ack(v, codec.PUBREC, 8),
                               ack(v, codec.PUBCOMP, 8, 0x92 if v == 5 else 0)]


def test_keep_alive_ping_and_timeout():
    from frugalmqtt.lite import ticks_ms
    p, peer = start(5, keepalive=1)
    p.state[TX] = ticks_ms() - 1500
    p.poll(0)
    assert peer.sent() == [b"\xc0\x00"]
    peer.give(b"\xd0\x00")
    p.poll(0)
    assert p.state[PING] == -1  # no PINGREQ due a PINGRESP
    p.state[TX] = ticks_ms() - 1500
    p.poll(0)
    p.state[PING] = ticks_ms() - 1500  # PINGRESP never came: a half-open link
    raises(OSError, p.poll, 0)
    assert p.sock is None


def test_publish_and_acks_allocate_nothing():
    pr = props(content_type="text/plain", user=(("unit", "C"),))
    payload = bytes(32)
    for v in BOTH:
        p, peer = start(v, slots=4)
        peer.give(ack(v, codec.PUBACK, 1), ack(v, codec.PUBREC, 2), ack(v, codec.PUBCOMP, 2))
        no_alloc(p.publish, "t/x", payload, 0, False, pr if v == 5 else None)
        no_alloc(p.publish, "t/x", payload, 1, False, pr if v == 5 else None)
        no_alloc(p.publish, "t/x", payload, 2, False, pr if v == 5 else None)
        no_alloc(p.poll, 0)
        assert p.pending() == 0
        peer.give(pub(v, "in", b"x", 1, 9))
        no_alloc(p.poll, 0)
        assert len(peer.sent()) == 5  # 3 PUBLISH, PUBREL, PUBACK


class BrokenPeer(Peer):
    def write(self, b, o, n):
        raise OSError(104)  # ECONNRESET

    def sendall(self, mv):
        raise OSError(104)


def test_stored_messages_survive_a_dead_link_and_go_after_connect():
    for v in BOTH:
        p, peer = start(v, clean=False)
        p.sock = BrokenPeer()
        assert p.publish("t", b"a", 1) == 1  # stored; the send failed, link closed
        assert not p.connected
        assert p.publish("t", b"b", 2) == 2  # offline: stored, sent after connect()
        raises(OSError, p.publish, "t", b"q0", 0)  # QoS 0 is not stored
        peer2 = Peer()
        peer2.give(connack(v, True))
        p.connect(sock=peer2)
        # the first was on the wire once (DUP=1 now); the second never was
        assert peer2.sent()[1:] == [pub(v, "t", b"a", 1, 1, dup=True), pub(v, "t", b"b", 2, 2)]
