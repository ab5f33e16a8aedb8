# Device-side scenarios for tests/test_client_mosquitto.py: frugalmqtt's
# MQTTClient against a real mosquitto. Plain MicroPython (also runs on
# CPython): no f-strings, no typing, no pytest.
#
# Under the MicroPython unix port:
#   MICROPYPATH=firmware:.:tests/mp_client micropython tests/mp_client/scenarios.py NAME PARAMS_JSON
# prints one "@@ {json}" line per event and "@@ {"ev": "end"}" last; any
# exception escapes (traceback on stderr, exit code 1). Under CPython pytest
# imports this module and calls run(name, params, sink) in-process: the same
# events, passed to sink as the same JSON text.
#
# PARAMS_JSON: host, port (the broker), version (4 or 5), cid (client id
# prefix), topic (topic prefix), and per scenario: proxy_port (the recording
# proxy in front of the broker), n (messages), inbound, limit, seconds.
import sys

try:
    import json
except ImportError:
    import ujson as json

from frugalmqtt.client import MQTTClient, ticks_ms, ticks_diff
from frugalmqtt_host.ref import props as P
from frugalmqtt_host.codec import size_publish, props_items  # test conveniences

_sink = None  # None: print lines (subprocess); else a function taking the line


def emit(ev, d=None):
    if d is None:
        d = {}
    d["ev"] = ev
    line = json.dumps(d)
    if _sink is None:
        print("@@ " + line)
    else:
        _sink(line)


def hx(b):
    return "".join(["%02x" % c for c in bytes(b)])


def text(b):
    return str(bytes(b), "utf-8")


def prop_value(v):
    """A received property value as JSON: ["i", n], ["s", str], ["b", hex], ["u", k, v]."""
    if type(v) is int:
        return ["i", v]
    if type(v) is str:
        return ["s", v]
    if type(v) is tuple:
        return ["u", v[0], v[1]]
    return ["b", hx(v)]


class Rec:
    """Records what a client receives (copies: the Message is reused)."""

    def __init__(self, c, with_props=False):
        self.msgs = []
        self.with_props = with_props
        c.on_message = self.on_message

    def on_message(self, m):
        d = {"topic": text(m.topic), "payload": text(m.payload), "qos": m.qos,
             "retain": m.retain, "dup": m.dup}
        if self.with_props:
            d["props"] = [[i, prop_value(v)] for i, v in props_items(m.props)]
        self.msgs.append(d)

    def has(self, payload):
        for m in self.msgs:
            if m["payload"] == payload:
                return True
        return False


class Done:
    """Records on_done(pid, reason) of a publishing client."""

    def __init__(self, c):
        self.items = []
        c.on_done = self.on_done

    def on_done(self, pid, reason):
        self.items.append([pid, reason])


def client(p, name, port=None, **kw):
    return MQTTClient(p["cid"] + "-" + name, p["host"], port or p["port"], version=p["version"],
                      backoff_ms=(20, 200), timeout_ms=5000, **kw)


def until(clients, cond, ms=8000):
    """Poll the clients until cond() holds; False after ms milliseconds.
    poll(t) returns once a packet is handled; t also bounds a reconnect
    inside it (each attempt is cut to the time left): 10 ms was too short
    on a loaded machine, and these tests count the connections."""
    t0 = ticks_ms()
    while not cond():
        if ticks_diff(ticks_ms(), t0) > ms:
            return False
        for c in clients:
            c.poll(100)
    return True


def emit_msgs(who, rec):
    for m in rec.msgs:
        m["who"] = who
        emit("msg", m)


# ---- scenarios ---------------------------------------------------------------

def pubsub(p):
    """Publish n messages at each QoS 0/1/2; our own subscriber (QoS 2) receives."""
    topic = p["topic"]
    n = p["n"]
    # mosquitto 2.0.11 overshoots a client's Receive Maximum after each
    # PUBCOMP/PUBACK (eclipse-mosquitto/mosquitto#2301): room for every QoS 2
    # message of the burst, so that broker bug cannot end the connection.
    sub = client(p, "sub", inbound=32)
    rs = Rec(sub)
    sub.connect()
    code = sub.subscribe(topic, 2)
    pub = client(p, "pub")
    done = Done(pub)
    pub.connect()
    pids = []
    for q in (0, 1, 2):
        for i in range(n):
            pids.append([q, pub.publish(topic, b"q%d-%d" % (q, i), q)])
    flushed = pub.flush(8000)
    pub.publish(topic, b"end", 2)  # after everything: duplicates would come before it
    flushed = pub.flush(8000) and flushed
    got_end = until([sub, pub], lambda: rs.has("end"))
    emit("result", {"suback": code, "pids": pids, "flushed": flushed, "done": done.items,
                    "got_end": got_end, "pub_connects": pub.connects,
                    "sub_connects": sub.connects})
    emit_msgs("sub", rs)
    pub.disconnect()
    sub.disconnect()


def qos2_burst(p):
    """3.1.1: the server may send more QoS 2 messages unreleased than the
    subscriber has inbound slots (3.1.1 has no Receive Maximum): n QoS 2
    messages reach a subscriber with p["inbound"] slots that is not polled
    while they are published."""
    topic = p["topic"]
    n = p["n"]
    sub = client(p, "sub", inbound=p["inbound"])
    rs = Rec(sub)
    sub.connect()
    code = sub.subscribe(topic, 2)
    pub = client(p, "pub")
    pub.connect()
    for i in range(n):
        pub.publish(topic, b"b%d" % i, 2)
    pub.publish(topic, b"end", 2)
    flushed = pub.flush(8000)
    got_end = until([sub, pub], lambda: rs.has("end"))
    emit("result", {"suback": code, "flushed": flushed, "got_end": got_end,
                    "sub_connects": sub.connects, "sub_connected": sub.connected})
    emit_msgs("sub", rs)
    pub.disconnect()
    sub.disconnect()


def retain(p):
    """A retained message reaches a later subscriber (retain=1); a zero-byte
    retained publish clears it. Each late subscriber publishes a marker on its
    own filter after SUBACK: retained messages come before the marker."""
    base = p["topic"]
    keep = base + "/keep"
    filt = base + "/#"
    pub = client(p, "pub")
    pub.connect()
    live = client(p, "live")
    rl = Rec(live)
    live.connect()
    live.subscribe(filt, 1)
    pub.publish(keep, b"kept", 1, retain=True)
    pub.flush(8000)
    until([live, pub], lambda: rl.has("kept"))

    s2 = client(p, "late1")
    r2 = Rec(s2)
    s2.connect()
    s2.subscribe(filt, 1)
    s2.publish(base + "/marker", b"m1", 1)
    until([s2], lambda: r2.has("m1"))

    pub.publish(keep, b"", 1, retain=True)  # clears the retained message
    pub.flush(8000)
    until([live, pub], lambda: rl.has(""))

    s3 = client(p, "late2")
    r3 = Rec(s3)
    s3.connect()
    s3.subscribe(filt, 1)
    s3.publish(base + "/marker", b"m2", 1)
    until([s3], lambda: r3.has("m2"))
    emit_msgs("live", rl)
    emit_msgs("late1", r2)
    emit_msgs("late2", r3)
    for c in (pub, live, s2, s3):
        c.disconnect()


def publish_props(p):
    """Every MQTT 5 PUBLISH property, at QoS 0, 1 and 2, to our own subscriber."""
    topic = p["topic"]
    props = [
        (P.PAYLOAD_FORMAT, 1),
        (P.MESSAGE_EXPIRY, 3600),
        (P.CONTENT_TYPE, "text/plain; charset=utf-8"),
        (P.RESPONSE_TOPIC, topic + "/reply"),
        (P.CORRELATION_DATA, b"\x00\x01\xfe\xff"),
        (P.USER_PROPERTY, ("zeta", "1")),
        (P.USER_PROPERTY, ("alpha", "2")),
        (P.USER_PROPERTY, ("zeta", "3")),
        (P.USER_PROPERTY, ("cl\xe9", "")),
    ]
    sub = client(p, "sub")
    rs = Rec(sub, True)
    sub.connect()
    sub.subscribe(topic, 2)
    pub = client(p, "pub")
    pub.connect()
    payload = "h\xe9llo w\xf6rld".encode()
    for q in (0, 1, 2):
        pub.publish(topic, payload, q, False, props)
    flushed = pub.flush(8000)
    until([sub, pub], lambda: len(rs.msgs) >= 3)
    emit("result", {"flushed": flushed})
    emit_msgs("sub", rs)
    pub.disconnect()
    sub.disconnect()


def alias(p):
    """The publisher goes through the recording proxy; mosquitto allows 10
    topic aliases. Our own subscriber is connected directly."""
    base = p["topic"]
    sub = client(p, "sub")
    rs = Rec(sub)
    sub.connect()
    sub.subscribe(base + "/#", 2)
    pub = client(p, "pub", p["proxy_port"])
    done = Done(pub)
    pub.connect()
    seq = (("a", 0), ("a", 1), ("a", 2), ("b", 1), ("b", 0), ("a", 1), ("b", 2), ("a", 0))
    k = 0
    for t, q in seq:
        pub.publish(base + "/" + t, (t + str(k)).encode(), q)
        k += 1
    pub.publish(base + "/end", b"end", 2)
    flushed = pub.flush(8000)
    until([sub, pub], lambda: rs.has("end"))
    emit("result", {"alias_max": pub.amax, "flushed": flushed, "done": done.items,
                    "connects": pub.connects})
    emit_msgs("sub", rs)
    pub.disconnect()
    sub.disconnect()


def receive_max(p):
    """n QoS 1/2 messages through the proxy to a broker whose Receive Maximum is small."""
    topic = p["topic"]
    n = p["n"]
    pub = client(p, "pub", p["proxy_port"], slots=8)
    done = Done(pub)
    pub.connect()
    rm = pub.quota  # the window the server's Receive Maximum leaves (slots=8 is larger)
    for i in range(n):
        pub.publish(topic, b"r%d" % i, 2 if i % 5 == 4 else 1)
    flushed = pub.flush(15000)
    emit("result", {"receive_max": rm, "flushed": flushed, "done": done.items,
                    "connects": pub.connects})
    pub.disconnect()


def max_packet(p):
    """The broker's Maximum Packet Size is enforced before sending."""
    topic = p["topic"]
    limit = p["limit"]
    sub = client(p, "sub")
    rs = Rec(sub)
    sub.connect()
    sub.subscribe(topic, 2)
    pub = client(p, "pub")
    pub.connect()
    v = pub.v
    fits = {}  # QoS -> payload length making the PUBLISH exactly `limit` bytes
    for q in (0, 1, 2):
        k = 0
        while size_publish(v, topic, bytes(k), q) < limit:
            k += 1
        fits[q] = k
    sizes = [size_publish(v, topic, bytes(fits[q]), q) for q in (0, 1, 2)]
    refused = []
    for q, size in ((0, fits[0] + 1), (1, fits[1] + 1), (2, fits[2] + 1), (1, 300), (0, 400)):
        try:
            pub.publish(topic, b"x" * size, q)
            refused.append([q, size, "sent"])
        except ValueError:
            refused.append([q, size, "ValueError"])
    still = pub.connected
    for q in (0, 1, 2):  # exactly at the limit
        pub.publish(topic, (b"%d" % q) * fits[q], q)
    pub.publish(topic, b"end", 1)
    flushed = pub.flush(8000)
    until([sub, pub], lambda: len(rs.msgs) >= 4)
    emit("result", {"server_max": pub.server_max, "fits": [fits[0], fits[1], fits[2]],
                    "sizes": sizes, "refused": refused, "connected_after_refusal": still,
                    "flushed": flushed, "connects": pub.connects, "connected": pub.connected})
    emit_msgs("sub", rs)
    pub.disconnect()
    sub.disconnect()


def resume(p):
    """clean=False publisher through the proxy, which cuts the connection
    at chosen packets; poll() reconnects and the session resends."""
    topic = p["topic"]
    n = p["n"]
    kw = {}
    if p["version"] >= 5:
        kw["session_expiry"] = 300
    pub = client(p, "pub", p["proxy_port"], clean=False, **kw)
    done = Done(pub)
    sp_first = pub.connect()
    pids = []
    for i in range(n):
        q = 1 + i % 2
        pids.append([q, pub.publish(topic, b"m%d" % i, q)])
        pub.poll(100)  # returns at the ack; a reconnect inside gets 100 ms
    flushed = pub.flush(20000)
    pub.publish(topic, b"end", 2)
    flushed = pub.flush(8000) and flushed
    emit("result", {"sp_first": sp_first, "sp_last": pub.sp,
                    "connects": pub.connects, "flushed": flushed, "done": done.items,
                    "pids": pids, "connected": pub.connected})
    pub.disconnect()


def resume_in(p):
    """clean=False subscriber through the proxy, which cuts the connection at
    chosen packets of inbound QoS 1/2 flows; a direct publisher."""
    topic = p["topic"]
    n = p["n"]
    kw = {}
    if p["version"] >= 5:
        kw["session_expiry"] = 300
    sub = client(p, "sub", p["proxy_port"], clean=False, **kw)
    rs = Rec(sub)
    sub.connect()
    code = sub.subscribe(topic, 2)
    pub = client(p, "pub")
    pub.connect()
    for i in range(n):
        pub.publish(topic, b"i%d" % i, 1 + i % 2)
    flushed = pub.flush(8000)

    def settled(last):
        # every message seen, no QoS 2 flow awaiting PUBREL, connected
        return (rs.has(last) and sub.connected and not any(sub.in_pid)
                and all(rs.has("i%d" % i) for i in range(n)))

    until([sub, pub], lambda: settled("i%d" % (n - 1)), 20000)
    # "end" goes to a connection that works: one a cut ended is noticed and
    # replaced first
    pub.publish(topic, b"end", 2)
    flushed = pub.flush(8000) and flushed
    got_end = until([sub, pub], lambda: settled("end"), 20000)
    emit("result", {"suback": code, "flushed": flushed, "got_end": got_end,
                    "connects": sub.connects, "sp_last": sub.sp,
                    "connected": sub.connected})
    emit_msgs("sub", rs)
    pub.disconnect()
    sub.disconnect()


def keepalive(p):
    """An idle client with keepalive=1 polls for p["seconds"] seconds."""
    c = client(p, "idle", keepalive=1)
    c.connect()
    t0 = ticks_ms()
    types = {}
    while ticks_diff(ticks_ms(), t0) < p["seconds"] * 1000:
        t = c.poll(100)
        if t:
            types[str(t)] = types.get(str(t), 0) + 1
    emit("result", {"connected": c.connected, "connects": c.connects, "types": types})
    c.disconnect()


# ---- the publish-only profile (frugalmqtt.lite) -------------------------------

def lite_client(p, name, port=None, **kw):
    from frugalmqtt.lite import Publisher
    return Publisher(p["cid"] + "-" + name, p["host"], port or p["port"], p["version"],
                     timeout_ms=5000, **kw)


def lite_pubsub(p):
    """lite.Publisher sends n messages at each QoS, a retained one with MQTT 5
    properties, and clears it; paho on the test side receives."""
    from frugalmqtt.liteprops import props
    topic = p["topic"]
    c = lite_client(p, "pub", slots=4)
    done = Done(c)
    c.connect()
    pids = []
    for i in range(p["n"]):
        for q in (0, 1, 2):
            pids.append([q, c.publish(topic, "q%d-%d" % (q, i), q)])
    pr = None
    if p["version"] >= 5:
        pr = props(content_type="text/plain", expiry=3600, utf8=True, response_topic="r/t",
                   correlation=b"\x00\x01", user=(("unit", "C"), ("b", "2"), ("a", "1")))
    c.publish(topic + "/ret", b"kept", 1, True, pr)
    flushed = c.flush(8000)
    c.publish(topic + "/ret", b"", 1, True)  # a zero-byte retained message clears it
    c.publish(topic, b"end", 2)
    flushed = c.flush(8000) and flushed
    emit("result", {"flushed": flushed, "done": done.items, "pids": pids})
    c.disconnect()


def lite_resume(p):
    """lite.Publisher with a persistent session through the cutting proxy.
    lite does not reconnect by itself: like a telemetry main loop, this
    calls connect() again whenever the link is down (the table is kept)."""
    topic = p["topic"]
    n = p["n"]
    kw = {"session_expiry": 300} if p["version"] >= 5 else {}
    c = lite_client(p, "pub", p["proxy_port"], clean=False, slots=4, **kw)
    done = Done(c)
    sps = []

    def up():
        while not c.connected:
            try:
                sps.append(c.connect())
            except OSError:
                pass

    up()
    for i in range(n):
        while True:
            up()
            try:
                c.publish(topic, b"m%d" % i, 1 + i % 2)
                break
            except OSError:  # not stored: the link failed while the window was full
                pass
        try:
            c.poll(5)
        except OSError:
            pass
    def drain():
        t0 = ticks_ms()
        while c.pending() and ticks_diff(ticks_ms(), t0) < 20000:
            up()
            try:
                c.flush(200)
            except OSError:
                pass
        return not c.pending()

    flushed = drain()
    up()
    c.publish(topic, b"end", 2)
    flushed = drain() and flushed
    emit("result", {"sp": sps, "flushed": flushed, "done": done.items,
                    "connected": c.connected})
    c.disconnect()


SCENARIOS = {
    "pubsub": pubsub,
    "qos2_burst": qos2_burst,
    "retain": retain,
    "props": publish_props,
    "alias": alias,
    "receive_max": receive_max,
    "max_packet": max_packet,
    "resume": resume,
    "resume_in": resume_in,
    "keepalive": keepalive,
    "lite_pubsub": lite_pubsub,
    "lite_resume": lite_resume,
}


def run(name, params, sink=None):
    global _sink
    _sink = sink
    try:
        SCENARIOS[name](params)
        emit("end")
    finally:
        _sink = None


if __name__ == "__main__":
    run(sys.argv[1], json.loads(sys.argv[2]))
