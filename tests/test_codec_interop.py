"""Cross-check the codec against independent MQTT implementations, 3.1.1 and 5.0.

1. paho-mqtt (2.2.0) talks to a loopback "capture server" built on our codec:
   every packet paho sends must decode to exactly what paho was asked to send,
   and paho must accept our CONNACK/PUBACK/PUBREC/PUBCOMP/SUBACK/UNSUBACK/
   PINGRESP (its callbacks fire with the reason codes and properties we sent).
2. mosquitto_pub / mosquitto_sub against the same capture server (mosquitto_sub
   also receives PUBLISH packets that we encode and prints them).
3. A real mosquitto broker, spoken to over raw sockets with our encoder and
   decoder only: CONNECT, SUBSCRIBE, PUBLISH QoS 0/1/2 with every PUBLISH
   property, topic aliases, PUBREL flows, retained messages, wills, UNSUBSCRIBE,
   PINGREQ, DISCONNECT; checked from our own decoder and from mosquitto_sub.

As a further check, each packet received from a foreign implementation is
re-encoded with our encoder from its decoded fields, which must reproduce the
foreign bytes exactly (both sides write the shortest valid form).
"""
import os
import shutil
import socket
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from frugalmqtt import codec, control, publish
from frugalmqtt_host import codec as host
from frugalmqtt_host import server
from frugalmqtt import props as P
from frugalmqtt.codec import (CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP,
                              SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP,
                              DISCONNECT)

TIMEOUT = 10.0
NAMES = {CONNECT: "CONNECT", CONNACK: "CONNACK", PUBLISH: "PUBLISH", PUBACK: "PUBACK",
         PUBREC: "PUBREC", PUBREL: "PUBREL", PUBCOMP: "PUBCOMP", SUBSCRIBE: "SUBSCRIBE",
         SUBACK: "SUBACK", UNSUBSCRIBE: "UNSUBSCRIBE", UNSUBACK: "UNSUBACK",
         PINGREQ: "PINGREQ", PINGRESP: "PINGRESP", DISCONNECT: "DISCONNECT"}


def _tool(name):
    for path in ("/usr/bin/" + name, shutil.which(name)):
        if path and os.access(path, os.X_OK):
            return path
    pytest.fail("%s not found: run `make setup` (apt-get install mosquitto-clients)" % name,
                pytrace=False)


def _wait(pred, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.01)


# --- decoded packets as plain values -------------------------------------------

def snapshot(pkt, t, v, raw):
    """Copy everything decoded into `pkt` (whose buffer is reused) into plain values."""
    d = SimpleNamespace(type=t, name=NAMES.get(t, str(t)), v=v, raw=raw, first=pkt.first)
    if t == PUBLISH:
        d.topic = host.topic_bytes(pkt).decode()
        d.payload = host.payload_bytes(pkt)
        d.qos, d.retain, d.dup, d.pid = pkt.qos, pkt.retain, pkt.dup, pkt.pid
        d.props = host.props_items(pkt.props)
    elif PUBACK <= t <= PUBCOMP:
        d.pid, d.reason, d.props = pkt.pid, pkt.reason, host.props_items(pkt.props)
    elif t == CONNECT:
        d.connect = pkt.extra
    elif t == CONNACK:
        d.sp, d.reason, d.props = pkt.sp, pkt.reason, host.props_items(pkt.props)
    elif t in (SUBSCRIBE, UNSUBSCRIBE):
        d.pid, d.filters, d.props = pkt.pid, list(pkt.extra), host.props_items(pkt.props)
    elif t in (SUBACK, UNSUBACK):
        d.pid, d.props = pkt.pid, host.props_items(pkt.props)
        d.codes = list(pkt.buf[pkt.data:pkt.data + pkt.data_len])
    elif t == DISCONNECT:
        d.reason, d.props = pkt.reason, host.props_items(pkt.props)
    return d


def reencode(d):
    """Encode a decoded packet again with our encoder; returns bytes."""
    buf = bytearray(1 << 16)
    v = d.v
    if d.type == PUBLISH:
        n = host.encode_publish(buf, 0, v, d.topic, d.payload, d.qos, d.pid, d.retain,
                                   d.dup, d.props or None)
    elif PUBACK <= d.type <= PUBCOMP:
        n = publish.encode_ack(buf, 0, v, d.type, d.pid, d.reason, d.props or None)
    elif d.type == CONNECT:
        c = d.connect
        will = None
        if c.will:
            w = c.will
            will = control.Will(w.topic, w.payload, w.qos, w.retain, w.props or None)
        n = control.encode_connect(buf, 0, c.version, c.client_id, c.keepalive, c.clean,
                                   c.props or None, will, c.username, c.password)
    elif d.type == SUBSCRIBE:
        n = control.encode_subscribe(buf, 0, v, d.pid, d.filters, d.props or None)
    elif d.type == UNSUBSCRIBE:
        n = control.encode_unsubscribe(buf, 0, v, d.pid, d.filters, d.props or None)
    elif d.type == CONNACK:
        n = server.encode_connack(buf, 0, v, d.sp, d.reason, d.props or None)
    elif d.type == SUBACK:
        n = server.encode_suback(buf, 0, v, d.pid, d.codes, d.props or None)
    elif d.type == UNSUBACK:
        n = server.encode_unsuback(buf, 0, v, d.pid, d.codes if v >= 5 else (),
                                    d.props or None)
    elif d.type == DISCONNECT:
        n = control.encode_disconnect(buf, 0, v, d.reason, d.props or None)
    elif d.type in (PINGREQ, PINGRESP):
        n = control.encode_ping(buf, 0, d.type)
    else:
        raise AssertionError("no re-encoder for %s" % d.name)
    return bytes(buf[:n])


def assert_reencodes(packets):
    for d in packets:
        if d.type == PUBLISH and any(pid == P.TOPIC_ALIAS for pid, _ in d.props):
            continue  # our encoder puts the alias first (alias=); covered by decode checks
        assert reencode(d) == d.raw, "%s re-encoded differently:\n ours  %s\n peer  %s" % (
            d.name, reencode(d).hex(" "), d.raw.hex(" "))


class Receiver:
    """Frames and decodes a byte stream with codec.Framer + server.decode (both directions)."""

    def __init__(self, v):
        self.v = v
        self.framer = codec.Framer(1 << 16)
        self.pkt = publish.Packet()

    def packets(self, data):
        """Yield a snapshot for each whole packet completed by `data`."""
        off, end = 0, len(data)
        f = self.framer
        while off < end:
            off = host.feed(f, data, off, end)
            if host.done(f):
                hdr = bytearray(5)
                n = codec.put_vbi(hdr, 0, f.rl)
                raw = bytes([f.first]) + bytes(hdr[:n]) + bytes(f.buf[:f.rl])
                t = server.decode(self.pkt, f.first, f.buf, 0, f.rl, self.v)
                if t == CONNECT:
                    self.v = self.pkt.extra.version
                yield snapshot(self.pkt, t, self.v, raw)


# --- 1 + 2: a capture server built on our codec ----------------------------------

class CaptureServer:
    """Loopback MQTT endpoint that records every packet it receives, decoded by
    our codec, and answers with packets encoded by our codec.

    connack_props / puback: optional MQTT 5 extras to send (to check the peer
    parses them). push: packets (encode_publish keyword dicts) sent to a client
    right after its SUBACK (to feed mosquitto_sub).
    """

    def __init__(self, connack_props=None, puback=None, push=()):
        self.connack_props = connack_props
        self.puback = puback  # (reason, props) for MQTT 5 PUBACK
        self.push = list(push)
        self.packets = []  # snapshots, all connections, arrival order
        self.sent = []  # (connection no, bytes) we sent
        self.errors = []
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.closing = False
        self.conn_threads = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def close(self):
        self.closing = True
        self.thread.join(5)
        for t in self.conn_threads:
            t.join(5)
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self):
        n = 0
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            n += 1
            t = threading.Thread(target=self._serve, args=(conn, n), daemon=True)
            self.conn_threads.append(t)
            t.start()

    def of(self, ptype, conn=None):
        with self.lock:
            return [d for d in self.packets
                    if d.type == ptype and (conn is None or d.conn == conn)]

    def wait_for(self, ptype, count=1, timeout=TIMEOUT):
        _wait(lambda: len(self.of(ptype)) >= count or self.errors,
              "%d x %s (got %s)" % (count, NAMES[ptype], [d.name for d in self.packets]),
              timeout)
        assert not self.errors, self.errors

    def _serve(self, conn, n):
        rx = Receiver(5)
        out = bytearray(1 << 16)
        conn.settimeout(0.2)

        def send(nbytes):
            data = bytes(out[:nbytes])
            self.sent.append((n, data))
            conn.sendall(data)

        try:
            while not self.closing:
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    return
                for d in rx.packets(data):
                    d.conn = n
                    with self.lock:
                        self.packets.append(d)
                    v = rx.v
                    if d.type == CONNECT:
                        send(server.encode_connack(out, 0, v, False, 0,
                                                    self.connack_props if v >= 5 else None))
                    elif d.type == PUBLISH and d.qos == 1:
                        reason, props = self.puback if (self.puback and v >= 5) else (0, None)
                        send(publish.encode_ack(out, 0, v, PUBACK, d.pid, reason, props))
                    elif d.type == PUBLISH and d.qos == 2:
                        send(publish.encode_ack(out, 0, v, PUBREC, d.pid))
                    elif d.type == PUBREL:
                        send(publish.encode_ack(out, 0, v, PUBCOMP, d.pid))
                    elif d.type == PUBREC:
                        send(publish.encode_ack(out, 0, v, PUBREL, d.pid))
                    elif d.type == SUBSCRIBE:
                        codes = [opts & 3 for _, opts in d.filters]
                        send(server.encode_suback(out, 0, v, d.pid, codes))
                        for i, kw in enumerate(self.push):
                            kw = dict(kw)
                            if kw.get("qos"):
                                kw.setdefault("pid", 100 + i)
                            if v < 5:
                                kw["props"] = None
                            send(host.encode_publish(out, 0, v, **kw))
                    elif d.type == UNSUBSCRIBE:
                        codes = [0] * len(d.filters) if v >= 5 else ()
                        send(server.encode_unsuback(out, 0, v, d.pid, codes))
                    elif d.type == PINGREQ:
                        send(control.encode_ping(out, 0, PINGRESP))
                    elif d.type == DISCONNECT:
                        return
        except Exception as e:  # reported by the test
            self.errors.append("connection %d: %r" % (n, e))
        finally:
            conn.close()


# --- 1: paho-mqtt -----------------------------------------------------------

def _paho_props(ptype, pairs):
    p = Properties(ptype)
    for name, value in pairs:
        setattr(p, name, value)
    return p


def _paho_order(pairs):
    """paho writes properties in ascending identifier order (its name table's
    order) and repeated ones (user properties) in the order given."""
    return sorted(pairs, key=lambda iv: iv[0])


# Properties in (paho attribute name, our id, value) form, with our decoded values.
PAHO_PUBLISH_PROPS = [
    ("UserProperty", P.USER_PROPERTY, ("unit", "C")),
    ("MessageExpiryInterval", P.MESSAGE_EXPIRY, 30),
    ("ContentType", P.CONTENT_TYPE, "application/json"),
    ("ResponseTopic", P.RESPONSE_TOPIC, "reply/dev1"),
    ("CorrelationData", P.CORRELATION_DATA, b"\x00corr\xff"),
    ("UserProperty", P.USER_PROPERTY, ("température", "21 °C")),
    ("UserProperty", P.USER_PROPERTY, ("unit", "F")),  # repeated key: order kept
    ("PayloadFormatIndicator", P.PAYLOAD_FORMAT, 1),
]


@pytest.mark.parametrize("v", [4, 5])
def test_paho_packets_decode(v):
    srv = CaptureServer(
        connack_props=[(P.RECEIVE_MAXIMUM, 20), (P.TOPIC_ALIAS_MAXIMUM, 5),
                       (P.USER_PROPERTY, ("server", "frugal"))],
        puback=(0x10, [(P.REASON_STRING, "no subscribers"), (P.USER_PROPERTY, ("ack", "1"))]),
    )
    with srv:
        _paho_session(srv, v)


def _paho_session(srv, v):
    proto = paho.MQTTv5 if v == 5 else paho.MQTTv311
    cid = "paho-interop-v%d" % v
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid, protocol=proto)
    events = {"connect": [], "publish": {}, "subscribe": [], "unsubscribe": [], "disconnect": []}
    connected = threading.Event()
    client.on_connect = lambda c, u, flags, rc, props: (events["connect"].append((rc, props)),
                                                        connected.set())
    client.on_publish = lambda c, u, mid, rc, props: events["publish"].__setitem__(mid, (rc, props))
    client.on_subscribe = lambda c, u, mid, rcs, props: events["subscribe"].append((mid, rcs, props))
    client.on_unsubscribe = lambda c, u, mid, rcs, props: events["unsubscribe"].append((mid, rcs, props))
    client.on_disconnect = lambda c, u, flags, rc, props: events["disconnect"].append(rc)

    will_pairs = [("WillDelayInterval", P.WILL_DELAY, 5), ("ContentType", P.CONTENT_TYPE, "text/plain"),
                  ("UserProperty", P.USER_PROPERTY, ("why", "lost"))]
    if v == 5:
        client.will_set("wills/" + cid, b"gone", qos=1, retain=True,
                        properties=_paho_props(PacketTypes.WILLMESSAGE,
                                               [(a, val) for a, _, val in will_pairs]))
    else:
        client.will_set("wills/" + cid, b"gone", qos=1, retain=True)
    client.username_pw_set("alice", "s3cr\u00e9t")
    connect_pairs = [("SessionExpiryInterval", P.SESSION_EXPIRY, 120),
                     ("UserProperty", P.USER_PROPERTY, ("client", "paho")),
                     ("ReceiveMaximum", P.RECEIVE_MAXIMUM, 7),
                     ("MaximumPacketSize", P.MAXIMUM_PACKET_SIZE, 4096),
                     ("RequestProblemInformation", P.REQUEST_PROBLEM_INFO, 1)]
    keepalive = 2
    kw = {}
    if v == 5:
        kw = dict(clean_start=True, properties=_paho_props(
            PacketTypes.CONNECT, [(a, val) for a, _, val in connect_pairs]))
    client.connect("127.0.0.1", srv.port, keepalive=keepalive, **kw)
    client.loop_start()
    try:
        assert connected.wait(TIMEOUT), "paho never got our CONNACK: %s" % srv.errors
        rc, cprops = events["connect"][0]
        assert not rc.is_failure and rc.value == 0
        if v == 5:  # paho parsed our CONNACK properties
            assert cprops.ReceiveMaximum == 20 and cprops.TopicAliasMaximum == 5
            assert cprops.UserProperty == [("server", "frugal")]

        # PUBLISH QoS 0/1/2, retain, properties; then a topic alias (MQTT 5)
        pub_props = None
        if v == 5:
            pub_props = _paho_props(PacketTypes.PUBLISH, [(a, val) for a, _, val in PAHO_PUBLISH_PROPS])
        sent = [
            ("sensors/dev1/temp", b'{"t":21.5}', 0, False),
            ("sensors/dev1/temp", b'{"t":21.6}', 1, True),
            ("sensors/dev1/\u00fcber", b"", 2, False),  # empty payload, non-ASCII topic
            ("sensors/dev1/big", bytes(range(256)) * 70, 2, True),  # 3-byte remaining length
        ]
        infos = []
        for topic, payload, qos, retain in sent:
            props = pub_props if (v == 5 and payload[:1] == b"{") else None
            infos.append(client.publish(topic, payload, qos=qos, retain=retain, properties=props))
        if v == 5:
            alias1 = _paho_props(PacketTypes.PUBLISH, [("TopicAlias", 3)])
            infos.append(client.publish("sensors/dev1/aliased", b"a1", qos=1, properties=alias1))
            alias2 = _paho_props(PacketTypes.PUBLISH, [("TopicAlias", 3)])
            infos.append(client.publish("", b"a2", qos=1, properties=alias2))
        for info in infos:
            info.wait_for_publish(TIMEOUT)
            assert info.is_published()

        # SUBSCRIBE with options, UNSUBSCRIBE
        if v == 5:
            subs = [("sensors/+/temp", SubscribeOptions(qos=1, noLocal=True, retainAsPublished=True,
                                                        retainHandling=SubscribeOptions.RETAIN_SEND_IF_NEW_SUB)),
                    ("alerts/#", SubscribeOptions(qos=2, retainHandling=SubscribeOptions.RETAIN_DO_NOT_SEND)),
                    ("$share/grp/jobs/+", SubscribeOptions(qos=0))]
            sub_props = _paho_props(PacketTypes.SUBSCRIBE, [("SubscriptionIdentifier", 42),
                                                           ("UserProperty", ("s", "1"))])
            _, sub_mid = client.subscribe(subs, properties=sub_props)
        else:
            _, sub_mid = client.subscribe([("sensors/+/temp", 1), ("alerts/#", 2), ("jobs/+", 0)])
        _wait(lambda: events["subscribe"], "paho on_subscribe")
        mid, rcs, _ = events["subscribe"][0]
        assert mid == sub_mid and [rc.value for rc in rcs] == [1, 2, 0]  # paho parsed our SUBACK

        unsub_filters = ["sensors/+/temp", "alerts/#"]
        if v == 5:
            _, unsub_mid = client.unsubscribe(unsub_filters, properties=_paho_props(
                PacketTypes.UNSUBSCRIBE, [("UserProperty", ("u", "2"))]))
        else:
            _, unsub_mid = client.unsubscribe(unsub_filters)
        _wait(lambda: events["unsubscribe"], "paho on_unsubscribe")
        assert events["unsubscribe"][0][0] == unsub_mid

        # idle past the keepalive: paho sends PINGREQ and must accept our PINGRESP
        srv.wait_for(PINGREQ, timeout=keepalive * 3 + 2)
        _wait(lambda: any(c == 1 and data == b"\xd0\x00" for c, data in srv.sent), "PINGRESP sent")
        time.sleep(0.2)
        assert client.is_connected()

        if v == 5:
            client.disconnect(properties=_paho_props(PacketTypes.DISCONNECT,
                                                     [("SessionExpiryInterval", 0),
                                                      ("UserProperty", ("bye", "now"))]))
        else:
            client.disconnect()
        srv.wait_for(DISCONNECT)
    finally:
        # loop_stop() alone waits for unfinished QoS flows: disconnect first, so a
        # broken ack fails the test instead of hanging it
        client.disconnect()
        client.loop_stop()
    assert not srv.errors, srv.errors

    # ---- what paho put on the wire, decoded by our codec ----
    pk = list(srv.packets)
    assert {d.conn for d in pk} == {1}
    (c,) = srv.of(CONNECT)
    conn = c.connect
    assert (conn.version, conn.client_id, conn.keepalive, conn.clean) == (v, cid, keepalive, True)
    assert (conn.username, conn.password) == ("alice", "s3cr\u00e9t".encode())
    w = conn.will
    assert (w.topic, w.payload, w.qos, w.retain) == ("wills/" + cid, b"gone", 1, True)
    if v == 5:
        assert conn.props == _paho_order([(i, val) for _, i, val in connect_pairs])
        assert w.props == _paho_order([(i, val) for _, i, val in will_pairs])
    else:
        assert conn.props == [] and w.props is None

    pubs = srv.of(PUBLISH)
    expect_props = _paho_order([(i, val) for _, i, val in PAHO_PUBLISH_PROPS]) if v == 5 else []
    assert [(d.topic, d.payload, d.qos, bool(d.retain), d.dup) for d in pubs[:4]] == \
        [(t, p, q, r, 0) for t, p, q, r in sent]
    for d, (_, payload, qos, _) in zip(pubs, sent):
        assert d.props == (expect_props if payload[:1] == b"{" else [])
        assert (d.pid != 0) == (qos > 0)
    if v == 5:
        assert len(pubs) == 6
        a1, a2 = pubs[4:]
        assert (a1.topic, a1.payload, a1.props) == ("sensors/dev1/aliased", b"a1", [(P.TOPIC_ALIAS, 3)])
        assert (a2.topic, a2.payload, a2.props) == ("", b"a2", [(P.TOPIC_ALIAS, 3)])
    else:
        assert len(pubs) == 4
    pids = [d.pid for d in pubs if d.qos]
    assert len(set(pids)) == len(pids)
    qos2_pids = [d.pid for d in pubs if d.qos == 2]
    assert [d.pid for d in srv.of(PUBREL)] == qos2_pids  # our PUBREC accepted
    # on_publish for every message: QoS 1 after our PUBACK, QoS 2 after our PUBCOMP
    assert set(events["publish"]) == {i.mid for i in infos}
    if v == 5:  # paho parsed our PUBACK reason code and properties
        rc, props = events["publish"][infos[1].mid]
        assert rc.value == 0x10
        assert props.ReasonString == "no subscribers" and props.UserProperty == [("ack", "1")]
        rc, _ = events["publish"][infos[2].mid]
        assert rc.value == 0

    (s,) = srv.of(SUBSCRIBE)
    assert s.pid == sub_mid
    if v == 5:
        assert s.filters == [("sensors/+/temp", 1 | 1 << 2 | 1 << 3 | 1 << 4),
                             ("alerts/#", 2 | 2 << 4), ("$share/grp/jobs/+", 0)]
        assert s.props == [(P.SUBSCRIPTION_ID, 42), (P.USER_PROPERTY, ("s", "1"))]
    else:
        assert s.filters == [("sensors/+/temp", 1), ("alerts/#", 2), ("jobs/+", 0)]
    (u,) = srv.of(UNSUBSCRIBE)
    assert (u.pid, u.filters) == (unsub_mid, unsub_filters)
    assert u.props == ([(P.USER_PROPERTY, ("u", "2"))] if v == 5 else [])
    assert srv.of(PINGREQ)
    (dis,) = srv.of(DISCONNECT)
    assert dis.reason == 0
    assert dis.props == ([(P.SESSION_EXPIRY, 0), (P.USER_PROPERTY, ("bye", "now"))] if v == 5 else [])
    assert_reencodes(pk)


# --- 2: mosquitto_pub / mosquitto_sub into the capture server --------------------

def _run(cmd, timeout=TIMEOUT, input=b""):
    r = subprocess.run(cmd, capture_output=True, timeout=timeout, input=input)
    assert r.returncode == 0, "%s -> %d\n%s\n%s" % (cmd, r.returncode, r.stdout, r.stderr)
    return r


@pytest.mark.parametrize("v", [4, 5])
def test_mosquitto_pub_packets_decode(v):
    version = "mqttv5" if v == 5 else "mqttv311"
    with CaptureServer() as srv:
        base = [_tool("mosquitto_pub"), "-h", "127.0.0.1", "-p", str(srv.port), "-V", version]
        will = ["--will-topic", "wills/mpub", "--will-payload", "bye", "--will-qos", "1",
                "--will-retain"]
        p5 = []
        if v == 5:
            p5 = ["-D", "connect", "session-expiry-interval", "120",
                  "-D", "connect", "user-property", "cu", "cv",
                  "-D", "publish", "user-property", "k", "v",
                  "-D", "publish", "message-expiry-interval", "30",
                  "-D", "publish", "content-type", "text/plain",
                  "-D", "publish", "user-property", "k2", "v\u00e9",
                  "-D", "publish", "response-topic", "reply/here",
                  "-D", "publish", "correlation-data", "corr-1",
                  "-D", "publish", "payload-format-indicator", "1",
                  "-D", "will", "will-delay-interval", "5",
                  "-D", "will", "user-property", "wk", "wv"]
        # 1: QoS 2, retained, all properties, will, credentials, keepalive
        _run(base + ["-i", "mpub-a", "-k", "33", "-u", "alice", "-P", "s3cret", "-t",
                     "sensors/dev1/temp", "-m", "21.5", "-q", "2", "-r"] + will + p5)
        # 2: QoS 1, null (zero-length) message
        _run(base + ["-i", "mpub-b", "-t", "sensors/dev1/null", "-n", "-q", "1"])
        # 3, 4: messages read line by line from stdin, on one connection (none / two)
        _run(base + ["-i", "mpub-c", "-t", "lines/x", "-l", "-q", "0"])
        _run(base + ["-i", "mpub-d", "-t", "lines/y", "-l", "-q", "1"], input=b"one\ntwo\n")
        srv.wait_for(DISCONNECT, 4)
        assert not srv.errors, srv.errors
        pk = list(srv.packets)

    by_conn = {}
    for d in pk:
        by_conn.setdefault(d.conn, []).append(d)
    assert [[d.name for d in by_conn[i]] for i in (1, 2, 3, 4)] == [
        ["CONNECT", "PUBLISH", "PUBREL", "DISCONNECT"],
        ["CONNECT", "PUBLISH", "DISCONNECT"],
        ["CONNECT", "DISCONNECT"],
        ["CONNECT", "PUBLISH", "PUBLISH", "DISCONNECT"],
    ]
    c = by_conn[1][0].connect
    assert (c.version, c.client_id, c.keepalive, c.clean) == (v, "mpub-a", 33, True)
    assert (c.username, c.password) == ("alice", b"s3cret")
    w = c.will
    assert (w.topic, w.payload, w.qos, w.retain) == ("wills/mpub", b"bye", 1, True)
    pub = by_conn[1][1]
    assert (pub.topic, pub.payload, pub.qos, pub.retain, pub.dup) == ("sensors/dev1/temp", b"21.5", 2, 1, 0)
    assert by_conn[1][2].pid == pub.pid
    if v == 5:
        # libmosquitto keeps the order properties were given on the command line
        # (libmosquitto appends its Receive Maximum, 20 by default)
        assert c.props == [(P.SESSION_EXPIRY, 120), (P.USER_PROPERTY, ("cu", "cv")),
                           (P.RECEIVE_MAXIMUM, 20)]
        assert w.props == [(P.WILL_DELAY, 5), (P.USER_PROPERTY, ("wk", "wv"))]
        assert pub.props == [(P.USER_PROPERTY, ("k", "v")), (P.MESSAGE_EXPIRY, 30),
                             (P.CONTENT_TYPE, "text/plain"), (P.USER_PROPERTY, ("k2", "v\u00e9")),
                             (P.RESPONSE_TOPIC, "reply/here"), (P.CORRELATION_DATA, b"corr-1"),
                             (P.PAYLOAD_FORMAT, 1)]
    else:
        assert c.props == [] and w.props is None and pub.props == []
    null = by_conn[2][1]
    assert (null.topic, null.payload, null.qos, null.retain) == ("sensors/dev1/null", b"", 1, 0)
    assert by_conn[3][0].connect.client_id == "mpub-c"
    lines = by_conn[4][1:3]
    assert [(d.topic, d.payload, d.qos) for d in lines] == [("lines/y", b"one", 1), ("lines/y", b"two", 1)]
    assert lines[0].pid != lines[1].pid
    assert_reencodes(pk)


@pytest.mark.parametrize("v", [4, 5])
def test_mosquitto_sub_packets_decode_and_our_publish_prints(v):
    version = "mqttv5" if v == 5 else "mqttv311"
    props5 = [(P.PAYLOAD_FORMAT, 1), (P.MESSAGE_EXPIRY, 30), (P.CONTENT_TYPE, "text/plain"),
              (P.USER_PROPERTY, ("k", "v")), (P.RESPONSE_TOPIC, "reply/x"),
              (P.CORRELATION_DATA, b"c-9"), (P.USER_PROPERTY, ("k2", "v2"))]
    # (a QoS 2 message is printed when its PUBREL arrives: send it last)
    push = [dict(topic="sensors/dev1/temp", payload=b"21.5", qos=1, retain=True, props=props5),
            dict(topic="alerts/low", payload=b"q0", qos=0),
            dict(topic="alerts/fire", payload=b"\xc3\xbc!", qos=2, props=props5)]
    fmt = "%t|%p|%q|%r" + ("|%F|%E|%C|%R|%D|%P" if v == 5 else "")
    with CaptureServer(push=push) as srv:
        cmd = [_tool("mosquitto_sub"), "-h", "127.0.0.1", "-p", str(srv.port), "-V", version,
               "-i", "msub-%d" % v, "-k", "21", "-q", "2", "-t", "sensors/+/temp", "-t", "alerts/#",
               "-U", "old/topic", "-C", "3", "-W", "10", "-F", fmt]
        if v == 5:
            cmd += ["-D", "subscribe", "user-property", "sk", "sv",
                    "-D", "unsubscribe", "user-property", "uk", "uv"]
        r = _run(cmd, timeout=15)
        srv.wait_for(DISCONNECT)
        assert not srv.errors, srv.errors
        pk = list(srv.packets)

    out = r.stdout.decode().splitlines()
    if v == 5:
        # %P prints key:value pairs separated by spaces; %E is the remaining expiry
        assert out == ["sensors/dev1/temp|21.5|1|1|1|30|text/plain|reply/x|c-9|k:v k2:v2",
                       "alerts/low|q0|0|0||||||",
                       "alerts/fire|\u00fc!|2|0|1|30|text/plain|reply/x|c-9|k:v k2:v2"]
    else:
        assert out == ["sensors/dev1/temp|21.5|1|1", "alerts/low|q0|0|0", "alerts/fire|\u00fc!|2|0"]
    names = [d.name for d in pk]
    assert names[0] == "CONNECT" and names[-1] == "DISCONNECT"
    assert sorted(names[1:-1]) == sorted(["SUBSCRIBE", "UNSUBSCRIBE", "PUBACK", "PUBREC", "PUBCOMP"])
    c = pk[0].connect
    assert (c.version, c.client_id, c.keepalive, c.clean, c.will, c.username) == \
        (v, "msub-%d" % v, 21, True, None, None)
    # mosquitto_sub advertises its message count (-C 3) as Receive Maximum
    assert c.props == ([(P.RECEIVE_MAXIMUM, 3)] if v == 5 else [])
    (s,) = [d for d in pk if d.type == SUBSCRIBE]
    assert s.filters == [("sensors/+/temp", 2), ("alerts/#", 2)]
    (u,) = [d for d in pk if d.type == UNSUBSCRIBE]
    assert u.filters == ["old/topic"]
    if v == 5:
        assert s.props == [(P.USER_PROPERTY, ("sk", "sv"))]
        assert u.props == [(P.USER_PROPERTY, ("uk", "uv"))]
    acks = {d.type: d for d in pk if PUBACK <= d.type <= PUBCOMP}
    assert acks[PUBACK].pid == 100 and acks[PUBREC].pid == 102 and acks[PUBCOMP].pid == 102
    assert all(a.reason == 0 and a.props == [] for a in acks.values())
    assert_reencodes(pk)


# --- 3: a real mosquitto broker over raw sockets ----------------------------------

class RawClient:
    """One MQTT connection driven by hand with our encoder and decoder."""

    def __init__(self, broker, v, client_id):
        self.v = v
        self.client_id = client_id
        self.sock = socket.create_connection((broker.host, broker.port), timeout=TIMEOUT)
        self.rx = Receiver(v)
        self.queue = []
        self.out = bytearray(1 << 16)
        self.received = []  # every packet, decoded

    def send(self, n):
        self.sock.sendall(bytes(self.out[:n]))

    def connect(self, **kw):
        self.send(control.encode_connect(self.out, 0, self.v, self.client_id, **kw))
        return self.expect(CONNACK)

    def publish(self, *args, **kw):
        self.send(host.encode_publish(self.out, 0, self.v, *args, **kw))

    def ack(self, ptype, pid):
        self.send(publish.encode_ack(self.out, 0, self.v, ptype, pid))

    def recv(self, timeout=TIMEOUT):
        self.sock.settimeout(timeout)
        while not self.queue:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("%s: connection closed by the broker" % self.client_id)
            self.queue.extend(self.rx.packets(data))
        d = self.queue.pop(0)
        self.received.append(d)
        return d

    def expect(self, ptype, pid=None):
        d = self.recv()
        assert d.type == ptype, "%s: expected %s, got %s" % (self.client_id, NAMES[ptype], d)
        if pid is not None:
            assert d.pid == pid, d
        return d

    def publishes(self, n, timeout=TIMEOUT):
        """Receive n PUBLISH packets, acknowledging them (PUBACK; PUBREC, then
        PUBCOMP for the broker's PUBREL) until no QoS 2 flow is open."""
        got, open_rel = [], set()
        while len(got) < n or open_rel:
            d = self.recv(timeout)
            if d.type == PUBLISH:
                got.append(d)
                if d.qos == 1:
                    self.ack(PUBACK, d.pid)
                elif d.qos == 2:
                    self.ack(PUBREC, d.pid)
                    open_rel.add(d.pid)
            elif d.type == PUBREL:
                assert d.pid in open_rel, d
                open_rel.discard(d.pid)
                self.ack(PUBCOMP, d.pid)
            else:
                raise AssertionError("%s: unexpected %s" % (self.client_id, d))
        return got

    def nothing(self, wait=0.3):
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        raise AssertionError("%s: unexpected data %r" % (self.client_id, list(self.rx.packets(data))))

    def close(self):
        self.sock.close()


def _wait_log(broker, text, count=1):
    _wait(lambda: broker.log().count(text) >= count, "%r in the broker log" % text)


def _start_sub(broker, v, client_id, topic, count, fmt):
    proc = subprocess.Popen(
        [_tool("mosquitto_sub"), "-h", broker.host, "-p", str(broker.port),
         "-V", "mqttv5" if v == 5 else "mqttv311", "-i", client_id, "-q", "2", "-t", topic,
         "-C", str(count), "-W", "15", "-F", fmt],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_log(broker, "Received SUBSCRIBE from " + client_id)
    return proc


def _sub_output(proc):
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    return out.split(b"\n")[:-1]


def _without(props, *ids):
    return [(i, val) for i, val in props if i not in ids]


PUB_PROPS = [
    (P.PAYLOAD_FORMAT, 1),
    (P.USER_PROPERTY, ("unit", "C")),
    (P.MESSAGE_EXPIRY, 3600),
    (P.CONTENT_TYPE, "application/json"),
    (P.USER_PROPERTY, ("température", "21 °C")),
    (P.RESPONSE_TOPIC, "frugal/reply/dev1"),
    (P.CORRELATION_DATA, b"\x00\x01corr\xff"),
    (P.USER_PROPERTY, ("unit", "F")),
    (P.USER_PROPERTY, ("z", "")),
]


@pytest.mark.parametrize("v", [4, 5])
def test_mosquitto_broker_roundtrip(mosquitto, v):
    broker = mosquitto()
    v5 = v == 5
    props = PUB_PROPS if v5 else None
    base = "frugal/it%d/" % v

    # --- CONNECT / CONNACK
    sub = RawClient(broker, v, "frugal-sub-%d" % v)
    ca = sub.connect(keepalive=30, props=[(P.SESSION_EXPIRY, 0), (P.RECEIVE_MAXIMUM, 10),
                                          (P.MAXIMUM_PACKET_SIZE, 65536),
                                          (P.REQUEST_PROBLEM_INFO, 1),
                                          (P.USER_PROPERTY, ("role", "sub"))] if v5 else None)
    assert (ca.sp, ca.reason) == (0, 0)
    if v5:
        # mosquitto's defaults: max_topic_alias 10, max_inflight_messages 20
        assert ca.props == [(P.TOPIC_ALIAS_MAXIMUM, 10), (P.RECEIVE_MAXIMUM, 20)]
    else:
        assert ca.props == []
    pub = RawClient(broker, v, "frugal-pub-%d" % v)
    assert pub.connect(keepalive=0, username="alice", password=b"pw").reason == 0

    # --- SUBSCRIBE / SUBACK: main filter QoS 2 (5.0: retain as published, subscription id)
    opts = 2 | (1 << 3) if v5 else 2
    sub.send(control.encode_subscribe(sub.out, 0, v, 1, [(base + "#", opts), (base + "other/+", 1)],
                                      [(P.SUBSCRIPTION_ID, 42), (P.USER_PROPERTY, ("s", "1"))]
                                      if v5 else None))
    sa = sub.expect(SUBACK, pid=1)
    assert sa.codes == [2, 1]
    if v5:  # the publisher subscribes with No Local: it must not get its own messages back
        pub.send(control.encode_subscribe(pub.out, 0, v, 2, [(base + "q1", 1 | 1 << 2)]))
        assert pub.expect(SUBACK, pid=2).codes == [1]

    fmt = "%t|%p|%q|%r" + ("|%F|%E|%C|%R|%D|%P" if v5 else "")
    msub = _start_sub(broker, v, "msub-%d" % v, base + "#", 3, fmt)

    # --- PUBLISH QoS 0, 1, 2 with every PUBLISH property
    pub.publish(base + "q0", b'{"q":0}', 0, props=props)
    pub.publish(base + "q1", b'{"q":1}', 1, pid=10, props=props)
    pa = pub.expect(PUBACK, pid=10)
    assert (pa.reason, pa.props) == (0, [])
    pub.publish(base + "q2", b'{"q":2}', 2, pid=11, props=props)
    assert pub.expect(PUBREC, pid=11).reason == 0
    pub.ack(PUBREL, 11)
    assert pub.expect(PUBCOMP, pid=11).reason == 0

    got = sub.publishes(3)
    assert [(d.topic, d.payload, d.qos, d.retain, d.dup) for d in got] == [
        (base + "q0", b'{"q":0}', 0, 0, 0), (base + "q1", b'{"q":1}', 1, 0, 0),
        (base + "q2", b'{"q":2}', 2, 0, 0)]
    for d in got:
        if v5:
            # mosquitto writes the Subscription Identifier first, then the other
            # properties as sent, in order, then Message Expiry (the time left)
            left = dict(d.props).get(P.MESSAGE_EXPIRY, -1)
            assert 3598 <= left <= 3600
            assert d.props == [(P.SUBSCRIPTION_ID, 42)] + _without(PUB_PROPS, P.MESSAGE_EXPIRY) + \
                [(P.MESSAGE_EXPIRY, left)]
        else:
            assert d.props == []
    if v5:
        pub.nothing()  # No Local

    lines = _sub_output(msub)
    heads = [(base + 'q%d|{"q":%d}|%d|0' % (q, q, q)).encode() for q in range(3)]
    if v5:
        assert len(lines) == 3
        for line, head in zip(lines, heads):
            f = line.split(b"|")
            assert b"|".join(f[:4]) == head
            assert f[4] == b"1" and 3598 <= int(f[5]) <= 3600  # payload format, expiry left
            assert f[6:] == [b"application/json", b"frugal/reply/dev1", b"\x00\x01corr\xff",
                             "unit:C temp\u00e9rature:21 \u00b0C unit:F z:".encode()]
    else:
        assert lines == heads

    # --- topic alias (5.0): topic once with alias 1, then empty topic + alias 1
    if v5:
        pub.publish(base + "aliased", b"a1", 1, pid=12, props=[(P.USER_PROPERTY, ("n", "1"))], alias=1)
        pub.expect(PUBACK, pid=12)
        pub.publish("", b"a2", 1, pid=13, props=[(P.USER_PROPERTY, ("n", "2"))], alias=1)
        pub.expect(PUBACK, pid=13)
        pub.publish("", b"a3", 2, pid=14, alias=1)
        pub.expect(PUBREC, pid=14)
        pub.ack(PUBREL, 14)
        pub.expect(PUBCOMP, pid=14)
        got = sub.publishes(3)
        assert [(d.topic, d.payload, d.qos) for d in got] == [
            (base + "aliased", b"a1", 1), (base + "aliased", b"a2", 1), (base + "aliased", b"a3", 2)]
        # no Topic Alias forwarded: the subscriber's CONNECT allowed none
        assert [d.props for d in got] == [[(P.SUBSCRIPTION_ID, 42), (P.USER_PROPERTY, ("n", "1"))],
                                          [(P.SUBSCRIPTION_ID, 42), (P.USER_PROPERTY, ("n", "2"))],
                                          [(P.SUBSCRIPTION_ID, 42)]]

    # --- retained message: stored, delivered to a new subscriber, cleared by a zero-byte retain
    rtopic = base + "retained"
    pub.publish(rtopic, b'{"kept":1}', 1, pid=20, retain=True, props=props)
    pub.expect(PUBACK, pid=20)
    (live,) = sub.publishes(1)
    assert (live.topic, live.payload) == (rtopic, b'{"kept":1}')
    assert live.retain == (1 if v5 else 0)  # retain as published only on the 5.0 subscription
    late = RawClient(broker, v, "frugal-late-%d" % v)
    late.connect()
    late.send(control.encode_subscribe(late.out, 0, v, 5, [(rtopic, 1)]))
    late.expect(SUBACK, pid=5)
    (kept,) = late.publishes(1)
    assert (kept.topic, kept.payload, kept.qos, kept.retain) == (rtopic, b'{"kept":1}', 1, 1)
    if v5:
        left = dict(kept.props).get(P.MESSAGE_EXPIRY, -1)
        assert 3598 <= left <= 3600
        assert kept.props == _without(PUB_PROPS, P.MESSAGE_EXPIRY) + [(P.MESSAGE_EXPIRY, left)]
    msub = _start_sub(broker, v, "msub-r%d" % v, rtopic, 1, "%t|%p|%q|%r")
    assert _sub_output(msub) == [(rtopic + '|{"kept":1}|1|1').encode()]

    pub.publish(rtopic, b"", 0, retain=True)  # clears it
    (gone,) = late.publishes(1)
    assert (gone.topic, gone.payload) == (rtopic, b"")
    (gone,) = sub.publishes(1)
    assert (gone.topic, gone.payload) == (rtopic, b"")
    fresh = RawClient(broker, v, "frugal-fresh-%d" % v)
    fresh.connect()
    fresh.send(control.encode_subscribe(fresh.out, 0, v, 6, [(rtopic, 1)]))
    fresh.expect(SUBACK, pid=6)
    pub.publish(rtopic, b"marker", 1, pid=21)  # not retained: must be the first thing fresh sees
    pub.expect(PUBACK, pid=21)
    (first,) = fresh.publishes(1)
    assert (first.payload, first.retain) == (b"marker", 0)
    sub.publishes(1)
    late.publishes(1)

    # --- will message: published by the broker when the connection is lost
    #     (3.1.1: socket closed without DISCONNECT; 5.0: DISCONNECT 0x04)
    wprops = [(P.CONTENT_TYPE, "text/plain"), (P.USER_PROPERTY, ("why", "lost"))] if v5 else None
    willer = RawClient(broker, v, "frugal-will-%d" % v)
    willer.connect(will=control.Will(base + "will", b"gone", 1, False, wprops))
    if v5:
        willer.send(control.encode_disconnect(willer.out, 0, v, 0x04))
    willer.close()
    (wm,) = sub.publishes(1)
    assert (wm.topic, wm.payload, wm.qos, wm.retain) == (base + "will", b"gone", 1, 0)
    if v5:
        assert _without(wm.props, P.SUBSCRIPTION_ID) == wprops

    # --- UNSUBSCRIBE / UNSUBACK, PINGREQ / PINGRESP, DISCONNECT
    sub.send(control.encode_unsubscribe(sub.out, 0, v, 7, [base + "#", "never/subscribed"],
                                        [(P.USER_PROPERTY, ("u", "1"))] if v5 else None))
    ua = sub.expect(UNSUBACK, pid=7)
    assert ua.codes == ([0x00, 0x11] if v5 else [])  # 0x11: no subscription existed
    pub.publish(base + "after", b"x", 1, pid=22)
    pub.expect(PUBACK, pid=22)
    sub.send(control.encode_ping(sub.out, 0, PINGREQ))
    sub.expect(PINGRESP)  # nothing for base+"#" arrived before the PINGRESP
    for c in (sub, pub, late, fresh):
        c.send(control.encode_disconnect(c.out, 0, v, 0,
                                         [(P.USER_PROPERTY, ("bye", "now"))] if v5 else None))
        c.sock.settimeout(TIMEOUT)
        assert c.sock.recv(10) == b""  # the broker closes the connection
        c.close()
    for c in (sub, pub, late, fresh):
        _wait_log(broker, "Client %s disconnected." % c.client_id)

    log = broker.log()
    bad = [l for l in log.splitlines() if "protocol error" in l.lower() or "malformed" in l.lower()]
    assert not bad, "\n".join(bad)
    assert "Received PUBLISH from %s (d0, q2, r0, m11, '%sq2'" % (pub.client_id, base) in log
    for c in (sub, pub, late, fresh, willer):
        assert_reencodes(c.received)
