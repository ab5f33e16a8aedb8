"""Client-side requirements of the conformance checklist not covered by the
other device tests: strings and lengths, topic names and filters, shared
subscription filters, the acks' optional properties, session lifetime,
transient errors and the transport. Each asserts Session's (or the
transport's) behaviour; MQTT 5.0 numbering unless tagged v3.1.1.
Runs unchanged on CPython and on the MicroPython unix port.
"""
import socket
import time
from _util import raises, unhex
from frugalmqtt_host.ref import codec
from frugalmqtt_host.ref import props as PR
from frugalmqtt_host import codec as HC
from frugalmqtt_host.ref.codec import PUBACK, PUBREC, PUBREL, PUBCOMP
from frugalmqtt.err import MQTTError
from _session_rig import BOTH, Rig, hl, pub, ack, connack, u16, client, read_all
from _session_rig import props as PB

_BUF = bytearray(128)


def _raw_publish(v, topic, qos=0, pid=1, props=b""):
    """A PUBLISH with any topic bytes (the codec's encoder refuses bad ones)."""
    body = u16(len(topic)) + topic + (u16(pid) if qos else b"")
    if v == 5:
        body += bytes((len(props),)) + props
    body += b"p"
    return bytes((0x30 | qos << 1, len(body))) + body


# ---- strings ----------------------------------------------------------------------------------

def test_MQTT_3_3_2_1_topic_name_first_as_a_utf8_string():
    # Sent: the Topic Name right after the fixed header, a two-byte length
    # and UTF-8 bytes; received: one that is not UTF-8 is Malformed
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.s.publish("caf\u00e9/t", b"x", 1)
        (p,) = r.take()
        assert p[2:4] == u16(7) and p[4:11] == "caf\u00e9/t".encode()
        r.protocol_error(_raw_publish(v, b"caf\xe9", 1), 0x81)
        assert r.msgs == []


def test_MQTT_1_5_3_1_ill_formed_utf8_topic_closes_the_connection():
    # 3.1.1: ill-formed UTF-8, a surrogate (U+D800..U+DFFF), an overlong form:
    # the connection is closed, nothing acknowledged or delivered
    for bad in (b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff"):
        r = Rig(4)
        r.up()
        r.protocol_error(_raw_publish(4, b"a" + bad, 1), 0x81)
        assert r.msgs == []
    r = Rig(4)
    r.up()
    raises(ValueError, r.s.publish, b"a\xed\xa0\x80", b"x", 0)  # never sent either
    raises(ValueError, r.s.publish, "a\ud800", b"x", 1)
    assert r.take() == [] and r.s.pending() == 0


def test_MQTT_1_5_3_2_u0000_in_a_topic_closes_the_connection():
    r = Rig(4)
    r.up()
    r.protocol_error(_raw_publish(4, b"a\x00b", 1), 0x81)
    assert r.msgs == []
    r = Rig(4)
    r.up()
    raises(ValueError, r.s.publish, b"a\x00b", b"x", 0)
    raises(ValueError, r.s.publish, "a\u0000b", b"x", 0)
    assert r.take() == []


def test_MQTT_1_5_3_3_bom_is_kept_not_stripped():
    # EF BB BF is U+FEFF, part of the topic: delivered as received, sent as given
    for v in BOTH:
        r = Rig(v)
        r.up()
        r.feed(pub(v, b"\xef\xbb\xbfa", b"x", 1, 4))
        assert r.msgs[0][0] == b"\xef\xbb\xbfa" and r.take() == [unhex("40 02 00 04")]
        r.s.publish("\ufeffb", b"y", 0)
        assert r.take() == [pub(v, b"\xef\xbb\xbfb", b"y")]


def test_U_1_5_3_a_strings_at_most_65535_bytes():
    # A two-byte length prefix: a topic of 65,536 bytes is refused before
    # anything is sent; 65,535 is encodable (the codec's size)
    r = Rig(4)
    r.up()
    raises(ValueError, r.s.publish, b"t" * 65536, b"x", 0)
    raises(ValueError, r.s.subscribe, [(b"t" * 65536, 0)])
    assert r.take() == []
    assert HC.size_publish(4, b"t" * 65535, b"") == 1 + 3 + 2 + 65535


def test_U_2_2_3_a_remaining_length_at_most_four_bytes():
    # Received: a fifth length byte is Malformed; four bytes of 268,435,455
    # are more than our buffer (too large, 0x95). Sent: never over 268,435,455.
    for v in BOTH:
        r = Rig(v)
        r.up()
        e = raises(MQTTError, r.feed, b"\x30\xff\xff\xff\xff\x01")
        assert e.reason == 0x81
        r = Rig(v)
        r.up()
        e = raises(MQTTError, r.feed, b"\x30\xff\xff\xff\x7f")
        assert e.reason == 0x95
    b = bytearray(5)
    assert codec.put_vbi(b, 0, 268435455) == 4 and bytes(b[:4]) == b"\xff\xff\xff\x7f"
    raises(ValueError, codec.put_vbi, b, 0, 268435456)
    raises(ValueError, codec.vbi_size, 268435456)


def test_MQTT_3_3_2_19_content_type_is_a_utf8_string():
    r = Rig(5)
    r.up()
    # Sent: checked once, where the properties are built; a string is a str
    # or UTF-8 bytes, never an int
    for bad in ("a\ud800", "a\x00", b"\xc3\x28"):
        raises(ValueError, PB, [(PR.CONTENT_TYPE, bad)])
    raises(TypeError, PB, [(PR.CONTENT_TYPE, 5)])
    assert PB([(PR.CONTENT_TYPE, b"text/plain")]) == PB([(PR.CONTENT_TYPE, "text/plain")])
    assert r.take() == [] and r.s.pending() == 0
    r.s.publish(b"t", b"x", 0, False, PB([(PR.CONTENT_TYPE, "text/plain")]))
    assert r.take() == [pub(5, b"t", b"x", props=[(PR.CONTENT_TYPE, "text/plain")])]
    # Received: ill-formed Content Type is Malformed
    r.protocol_error(_raw_publish(5, b"t", 1, 1, b"\x03\x00\x02\xc3\x28"), 0x81)
    assert r.msgs == []


# ---- the acks' optional properties -------------------------------------------------------------

def test_MQTT_3_4_2_2_acks_never_carry_a_reason_string_or_user_property():
    # The client sends no Reason String and no User Property in PUBACK,
    # PUBREC, PUBREL or PUBCOMP, so neither can take an ack over the server's
    # Maximum Packet Size; even with error reason codes an ack is at most 5
    # bytes, within the smallest limit a server sets here.
    # [MQTT-3.4.2-3] [MQTT-3.5.2-2/3] [MQTT-3.6.2-2/3] [MQTT-3.7.2-2/3]
    r = Rig(5)
    r.up(props=[(PR.MAXIMUM_PACKET_SIZE, 16)])
    utf8 = [(PR.PAYLOAD_FORMAT, 1)]
    r.feed(pub(5, b"u", b"\xff", 1, 1, props=utf8) + pub(5, b"u", b"\xff", 2, 2, props=utf8)
           + pub(5, b"u", b"ok", 2, 3) + ack(5, PUBREL, 3) + ack(5, PUBREL, 9)
           + ack(5, PUBREC, 8))
    got = r.take()
    assert got == [unhex("40 03 00 01 99"), unhex("50 03 00 02 99"), unhex("50 02 00 03"),
                   unhex("70 02 00 03"), unhex("70 03 00 09 92"), unhex("62 03 00 08 92")], hl(got)
    r.s.ack(5)  # the manual PUBACK too
    assert r.take() == [unhex("40 02 00 05")]


# ---- topic names and filters -----------------------------------------------------------------

def _subscribed(r, filt):
    pid = r.s.subscribe([(filt, 1)])
    (p,) = r.take()
    r.feed(b"\x90" + bytes((3 + (r.v == 5),)) + u16(pid) + (b"\x00" if r.v == 5 else b"")
           + b"\x01")
    return p


def test_MQTT_4_7_0_1_wildcards_in_filters_never_in_names():
    # [MQTT-3.3.2-2]
    for v in BOTH:
        r = Rig(v)
        r.up()
        for f in ("#", "+", "a/+/c", "a/#", "+/+", "/+", "sport/tennis/#"):
            p = _subscribed(r, f)
            assert f.encode() in p
        for t in ("#", "+", "a/+/c", "a/#", "a+", "a#"):
            raises(ValueError, r.s.publish, t, b"x", 0)
            raises(ValueError, r.s.publish, t, b"x", 1)
        assert r.take() == [] and r.s.pending() == 0
        r.protocol_error(_raw_publish(v, b"a/+", 1), 0x82)


def test_v311_MQTT_4_7_1_1_wildcards_in_filters_never_in_names():
    # The 3.1.1 numbering of MQTT-4.7.0-1 (5.0)
    r = Rig(4)
    r.up()
    assert b"a/+/#" in _subscribed(r, "a/+/#")
    raises(ValueError, r.s.publish, "a/+/#", b"x", 0)
    r.protocol_error(_raw_publish(4, b"a/#", 0), 0x82)


def _refused_filters(v, filters):
    r = Rig(v)
    r.up()
    for f in filters:
        raises(ValueError, r.s.subscribe, [(f, 0)])
        raises(ValueError, r.s.unsubscribe, [f])
    assert r.take() == [] and not any(r.s.sub_pids)


def test_v311_MQTT_4_7_1_2_multi_level_wildcard_alone_or_after_slash_and_last():
    # [MQTT-4.7.1-1] (5.0 numbering)
    for v in BOTH:
        _refused_filters(v, ("a#", "a/#/b", "#/", "a/b#", "##", "#a"))
        r = Rig(v)
        r.up()
        for f in ("#", "a/#", "/#"):
            assert f.encode() in _subscribed(r, f)


def test_v311_MQTT_4_7_1_3_single_level_wildcard_occupies_a_whole_level():
    # [MQTT-4.7.1-2] (5.0 numbering)
    for v in BOTH:
        _refused_filters(v, ("a+", "+a", "a/+b", "a/b+/c", "++"))
        r = Rig(v)
        r.up()
        for f in ("+", "+/", "/+", "+/+/+", "a/+/b"):
            assert f.encode() in _subscribed(r, f)


def test_MQTT_4_8_2_1_shared_subscription_filter_syntax():
    # "$share/" then a ShareName of one character or more without '/', '+',
    # '#', then '/' and a Topic Filter [MQTT-4.8.2-2]
    _refused_filters(5, ("$share//a", "$share/g", "$share/g/", "$share/g+/a", "$share/#/a",
                         "$share/g/a#"))
    r = Rig(5)
    r.up()
    for f in ("$share/g/a", "$share/group-1/sensors/+/t", "$share/g/#"):
        assert f.encode() in _subscribed(r, f)


# ---- session and connection ------------------------------------------------------------------

def test_v311_MQTT_4_1_0_2_session_lasts_as_long_as_the_connection():
    # CleanSession=1: the session ends with the connection, but lives while it
    # is open: in-flight QoS 1/2 state and inbound QoS 2 state stay through
    # any other traffic and keep-alive; a new clean connection starts empty
    # [MQTT-3.1.2-6 v3.1.1]
    r = Rig(4)
    r.up(keepalive=10)
    p1 = r.s.publish(b"a", b"1", 1)
    p2 = r.s.publish(b"a", b"2", 2)
    r.feed(pub(4, b"in", b"x", 2, 9) + ack(4, PUBREC, p2))
    for _ in range(5):
        r.s.publish(b"q", b"0", 0)
        r.feed(pub(4, b"in", b"y", 1, 10))
        r.t += 10000
        r.s.tick()
        r.feed(b"\xd0\x00")
    r.take()
    assert r.s.pending() == 2
    r.feed(ack(4, PUBACK, p1) + ack(4, PUBCOMP, p2) + ack(4, PUBREL, 9))
    assert r.done == [(p1, 0), (p2, 0)] and r.take() == [unhex("70 02 00 09")]
    p3 = r.s.publish(b"a", b"3", 1)
    r.feed(pub(4, b"in", b"z", 2, 11))  # PUBREC sent, PUBREL not yet
    r.feed(pub(4, b"in", b"z", 2, 11, dup=True))  # same session: not delivered again
    assert [m[1] for m in r.msgs].count(b"z") == 1
    r.take()
    r.s.close()
    got = r.up(clean=True)  # the clean session's state went with the connection
    assert got == [pub(4, b"a", b"3", 1, p3)], hl(got)  # sent again as a new message
    r.feed(pub(4, b"in", b"z", 2, 11, dup=True))  # a new session: a new message
    assert [m[1] for m in r.msgs].count(b"z") == 2


def test_MQTT_4_8_0_2_transient_error_closes_the_connection():
    # 3.1.1 has no Maximum Packet Size: a packet larger than our receive
    # buffer is a transient error (out of resources). The connection is
    # closed, nothing sent; the session stays for the next connection.
    # A write that fails closes it too.
    c, out = client(4, 32)
    c.begin(True)
    read_all(c, connack(4))
    pid = c.s.publish(b"t", b"1", 1)
    del out[:]
    e = raises(MQTTError, read_all, c, pub(4, b"t", b"x" * 40, 1, 7))
    assert e.reason == 0x95 and out == [] and c.s.sock is None
    assert c.s.pending() == 1
    c.begin(False)
    del out[:]
    read_all(c, connack(4, True))
    assert out == [pub(4, b"t", b"1", 1, pid, dup=True)]
    r = Rig(4)
    r.up(clean=False)
    r.fail_writes = True
    raises(OSError, r.feed, pub(4, b"in", b"x", 1, 3))  # its PUBACK cannot be written
    assert r.s.sock is None and not r.s.up and r.closed == 1


def _sleep_ms(ms):
    if hasattr(time, "sleep_ms"):
        time.sleep_ms(ms)
    else:
        time.sleep(ms / 1000)


def _listen():
    """A listening loopback socket and its port."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    port = 0
    if hasattr(srv, "getsockname"):
        srv.bind(socket.getaddrinfo("127.0.0.1", 0)[0][-1])
        port = srv.getsockname()[1]
    else:  # the unix port has no getsockname: try ports until one is free
        base = 20000 + time.ticks_ms() % 20000
        for k in range(50):
            try:
                srv.bind(socket.getaddrinfo("127.0.0.1", base + k)[0][-1])
                port = base + k
                break
            except OSError:
                pass
    srv.listen(1)
    return srv, port


def _recv_exactly(conn, n):
    got = b""
    while len(got) < n:
        b = conn.recv(n - len(got))
        if not b:
            break
        got += b
    return got


def test_MQTT_4_2_0_1_transport_is_an_ordered_lossless_byte_stream():
    # The transport is TCP (or TLS over TCP), opened by the client's own
    # socket driver (lite.Publisher.connect under client.MQTTClient): every
    # byte once, in order, both ways; packets split across reads (sent in
    # 37-byte pieces) reassembled by the driver's framing
    import _thread
    from frugalmqtt.client import MQTTClient
    srv, port = _listen()
    big = bytes((i * 7) & 0xFF for i in range(3000))
    stream = b""
    for i in range(40):
        stream += pub(5, b"n", bytes((i,)) * (i % 7), 1, i + 1)
    stream += pub(5, b"n", big[:300], 1, 41)  # a remaining length of two bytes
    want = b"".join(unhex("40 02") + u16(i + 1) for i in range(41)) + pub(5, b"n", big)
    box = {}

    def server():
        conn = srv.accept()[0]
        try:
            head = _recv_exactly(conn, 2)  # CONNECT, its length in one byte
            box["connect"] = head + _recv_exactly(conn, head[1])
            conn.send(connack(5))
            for k in range(0, len(stream), 37):
                conn.send(stream[k:k + 37])
                _sleep_ms(1)
            box["rx"] = _recv_exactly(conn, len(want))
        finally:
            conn.close()
            box["done"] = True

    _thread.start_new_thread(server, ())
    c = MQTTClient("transport", "127.0.0.1", port, version=5, reconnect=False, tx_size=4096,
                   max_packet=512, timeout_ms=5000)
    seen = []
    c.on_message = lambda m: seen.append((m.pid, bytes(m.payload)))
    try:
        c.connect()
        for _ in range(200):
            if len(seen) == 41:
                break
            c.poll(50)
        assert [p for p, _ in seen] == list(range(1, 42))
        assert seen[-1][1] == big[:300] and seen[9][1] == bytes((9, 9))
        assert c.publish(b"n", big, 0) == 0
        for _ in range(500):
            if box.get("done"):
                break
            _sleep_ms(10)
        assert box["connect"][0] == 0x10 and box.get("rx") == want
    finally:
        c.close()
        srv.close()
