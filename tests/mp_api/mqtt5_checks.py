"""frugalmqtt.client.MQTTClient's MQTT 5 API, bounded waits and oversize
messages against a real broker. Every function runs unchanged under CPython
(in-process, tests/test_client_mqtt5.py) and the MicroPython unix port
(mp_run.py), asserts what it sees and returns facts for the host. Plain
asserts only; no f-strings."""
import sys

from frugalmqtt.client import MQTTClient, ticks_ms, ticks_diff, sleep_ms
from frugalmqtt.err import MQTTError, ServerError
from frugalmqtt import props as P
from simple_checks import _raises

MP = sys.implementation.name == "micropython"


def _client(host, port, cid, version, **kw):
    kw.setdefault("timeout_ms", 5000)
    kw.setdefault("backoff_ms", (50, 500))
    return MQTTClient(cid, host, port, version=version, **kw)


def _pump(clients, cond, ms=8000):
    """poll() every client until cond() holds; False after ms."""
    t0 = ticks_ms()
    while not cond():
        if ticks_diff(ticks_ms(), t0) > ms:
            return False
        for c in clients:
            c.poll(10)
    return True


def _recorder(c, out):
    def on_message(m):
        sid = m.props.get_int(P.SUBSCRIPTION_ID, 0) if c.v == 5 else 0
        out.append((bytes(m.topic), bytes(m.payload), m.qos, m.retain, m.dup, sid, m.pid))
    c.on_message = on_message


def _count_connects(c):
    """Count c's failed connect attempts, each judged by fatal() (raised at
    once or retried): a list whose item 0 is the count."""
    tries = [0]
    fatal = c.fatal

    def counting(e):
        tries[0] += 1
        return fatal(e)

    c.fatal = counting
    return tries


def _got(got, topic):
    return [g[1].decode() for g in got if g[0] == topic]


# ---- subscriptions -------------------------------------------------------------

def subscriptions(host, port, tag, version):
    """Several filters in one SUBSCRIBE with their options, subscription
    identifiers, several SUBSCRIBEs in flight without waiting, unsubscribe
    from several filters."""
    t = tag.encode()
    got = []
    c = _client(host, port, tag + "-s", version)
    _recorder(c, got)
    c.connect()
    other = _client(host, port, tag + "-o", version)
    other.connect()
    other.publish(t + b"/kept", b"old", 1, retain=True)
    other.publish(t + b"/k2", b"old", 1, retain=True)
    other.flush(5000)
    out = {}
    # one SUBSCRIBE, three filters, each with its own QoS (and options on 5.0)
    nl = P.NO_LOCAL if version == 5 else 0
    codes = c.subscribe([(t + b"/a/#", 1), (t + b"/b", 2 | nl), t + b"/c"], qos=0)
    assert codes == b"\x01\x02\x00", codes
    assert len(c.subscriptions) == 3
    # several SUBSCRIBEs in flight at once, acks to on_suback and suback(pid)
    acks = []
    c.on_suback = lambda pid, codes: acks.append((pid, codes))
    filters = [t + ("/n%d" % k).encode() for k in range(5)]
    pids = [c.subscribe(f, 1, wait=False) for f in filters]
    assert len(set(pids)) == 5 and 0 not in pids
    assert _pump([c], lambda: len(acks) == 5)
    assert sorted(acks) == sorted([(p, b"\x01") for p in pids]), acks
    assert c.suback(pids[-1]) == b"\x01" and c.suback(pids[-1]) is None
    c.on_suback = None
    other.publish(t + b"/a/x", b"a", 1)
    other.publish(t + b"/b", b"b-other", 1)
    c.publish(t + b"/b", b"b-own", 1)  # NO_LOCAL (5.0): not sent back to us
    other.publish(t + b"/n4", b"n", 1)
    assert _pump([c, other], lambda: len(got) >= (3 if version == 5 else 4))
    _pump([c, other], lambda: False, 300)
    out["a"] = _got(got, t + b"/a/x")
    out["b"] = sorted(_got(got, t + b"/b"))
    out["n"] = _got(got, t + b"/n4")
    if version == 5:
        # a subscription identifier comes back with the messages it matches
        assert c.subscribe(t + b"/id", 1, sub_id=7) == 1
        # retain handling 2: no retained message at subscribe; 1: only for a
        # new subscription (so "old" comes once, not at the second SUBSCRIBE)
        assert c.subscribe(t + b"/kept", 1, P.RETAIN_NONE) == 1
        assert c.subscribe(t + b"/k2", 1, P.RETAIN_IF_NEW) == 1
        assert _pump([c], lambda: _got(got, t + b"/k2"))
        assert c.subscribe(t + b"/k2", 1, P.RETAIN_IF_NEW) == 1
        assert c.subscribe(t + b"/rap", 1, P.RETAIN_AS_PUBLISHED) == 1
        other.publish(t + b"/id", b"i", 1)
        other.publish(t + b"/rap", b"live", 1, retain=True)
        assert _pump([c, other], lambda: _got(got, t + b"/rap") and _got(got, t + b"/id"))
        _pump([c, other], lambda: False, 300)
        out["id"] = [g[5] for g in got if g[0] == t + b"/id"]
        out["kept"] = [(g[1].decode(), g[3]) for g in got if g[0] in (t + b"/kept", t + b"/k2")]
        # RETAIN_AS_PUBLISHED: the live message keeps its RETAIN flag
        out["rap"] = [(g[1].decode(), g[3]) for g in got if g[0] == t + b"/rap"]
        other.publish(t + b"/rap", b"", 1, retain=True)
        assert _raises(ValueError, c.subscribe, t + b"/z", 0, 0, None, -1, 0x10000000)
    else:
        # 3.1.1 has no subscription options nor identifiers: refused, nothing sent
        assert _raises(ValueError, c.subscribe, t + b"/z", 0, 4)
        assert _raises(ValueError, c.subscribe, t + b"/z", 0, 0, None, -1, 7)
    # several filters out in one UNSUBSCRIBE (5.0: 0x11 for one we never had)
    codes = c.unsubscribe([t + b"/a/#", t + b"/never"])
    assert codes == (b"\x00\x11" if version == 5 else b""), codes
    assert c.unsubscribe(t + b"/b") == 0
    out["left"] = sorted([s[0].decode() for s in c.subscriptions])
    other.publish(t + b"/kept", b"", 1, retain=True)
    other.publish(t + b"/k2", b"", 1, retain=True)
    other.disconnect()
    c.disconnect()
    return out


# ---- manual acknowledgement ---------------------------------------------------------

def manual_ack(host, port, tag, version):
    """QoS 1 and 2 messages are acknowledged only by ack(pid): not taken, the
    server sends them again after a reconnect (DUP=1); taken, never again."""
    t = tag.encode()
    got = []
    kw = {"clean": False, "session_expiry": 300} if version == 5 else {"clean": False}
    c = _client(host, port, tag + "-m", version, **kw)
    c.manual_ack = True
    _recorder(c, got)
    c.connect(clean=True)
    c.disconnect()
    c.connect(clean=False)
    assert c.subscribe(t + b"/m", 2) == 2
    p = _client(host, port, tag + "-p", version)
    p.connect()
    p.publish(t + b"/m", b"one", 1)
    p.publish(t + b"/m", b"two", 2)
    assert _pump([c, p], lambda: len(got) == 2)
    first = [(g[1].decode(), g[2], g[4]) for g in got]
    held = [x for x in c.in_pid if x]
    c.close()  # the link drops before the application took them
    got[:] = []
    assert c.connect() is True  # session resumed: both come again, DUP=1
    assert _pump([c, p], lambda: len(got) == 2)
    again = [(g[1].decode(), g[2], g[4]) for g in got]
    held_again = [x for x in c.in_pid if x]
    # take them, in order of arrival [MQTT-4.6.0-2] [MQTT-4.6.0-3]: the PUBACK,
    # the PUBREC, and the server's PUBREL is answered
    c.ack(got[0][6])
    c.ack(got[1][6])
    _pump([c, p], lambda: not [x for x in c.in_pid if x], 3000)
    released = [x for x in c.in_pid if x]
    c.close()
    got[:] = []
    assert c.connect() is True
    _pump([c, p], lambda: False, 500)
    after = len(got)
    p.disconnect()
    c.disconnect()
    return {"first": first, "held": held, "again": again, "held_again": held_again,
            "released": released, "after": after}


# ---- CONNACK, DISCONNECT -------------------------------------------------------------

def connack_props(host, port, tag, version):
    """The CONNACK's limits and properties; the server's DISCONNECT."""
    out = {}
    c = _client(host, port, "", version, keepalive=60)
    c.connect()
    out["max_qos"] = c.max_qos
    out["retain_ok"] = c.retain_ok
    out["ka_ms"] = c.ka_ms
    out["server_max"] = c.server_max
    cp = c.connack_props
    if version == 5:
        out["assigned"] = cp.get_str(P.ASSIGNED_CLIENT_ID)
        out["keep_alive"] = cp.get_int(P.SERVER_KEEP_ALIVE)
        out["max_packet"] = cp.get_int(P.MAXIMUM_PACKET_SIZE)
    else:
        assert cp is None
    c.disconnect()
    return out


def server_disconnect(host, port, tag):
    """A 5.0 server's DISCONNECT (a test peer: mosquitto 2.0.11 sends none):
    its reason and properties are public."""
    a = _client(host, port, tag + "-d", 5, reconnect=False)
    a.connect()
    e = _raises(ServerError, _pump, [a], lambda: False, 3000)
    dp = a.disconnect_props
    return {"code": e.args[0], "reason": a.disconnect_reason, "up": a.up,
            "reason_string": dp.get_str(P.REASON_STRING), "user": dp.user_properties(),
            "reference": dp.get_str(P.SERVER_REFERENCE)}


def refused(host, port, tag, version):
    """A refused CONNACK is not retried: the reason at once, its properties kept."""
    c = _client(host, port, tag + "-r", version)
    tries = _count_connects(c)
    e = _raises(ServerError, c.ensure_connected)
    cp = c.connack_props
    return {"code": e.args[0], "tries": tries[0], "last_error": type(c.last_error).__name__,
            "props": None if cp is None else cp.user_properties()}


def disconnect_props(host, port, tag, version):
    """DISCONNECT with properties: a reason string and a new Session Expiry
    Interval; one above 0 after a CONNECT with 0 is refused before sending."""
    c = _client(host, port, tag + "-x", version, clean=False, session_expiry=600)
    c.connect(clean=True)
    c.disconnect(props=[(P.REASON_STRING, "bye"), (P.USER_PROPERTY, ("k", "v"))],
                 session_expiry=0)
    kept = c.connect(clean=False)  # the session ended at the DISCONNECT
    c.disconnect(session_expiry=300)
    resumed = c.connect(clean=False)
    c.disconnect()
    z = _client(host, port, tag + "-z", version)  # session expiry 0
    z.connect()
    _raises(ValueError, z.disconnect, 0, None, 10)  # [MQTT-3.14.2-2]
    still = z.connected
    _raises(ValueError, z.disconnect, 0, [(P.TOPIC_ALIAS, 1)])  # not a DISCONNECT property
    z.disconnect(4, [(P.REASON_STRING, "with will")])  # 0x04: the will goes
    return {"kept": kept, "resumed": resumed, "still": still}


def will_on_disconnect(host, port, tag, version):
    w = _client(host, port, tag + "-w", version, will=(tag + "/will", b"gone", 1, False))
    w.connect()
    w.disconnect(4, [(P.REASON_STRING, "leaving with my will")])
    return {"ok": True}


def connect_settings(host, port, tag, version, raw):
    """Receive Maximum, Maximum Packet Size, Topic Alias Maximum and Session
    Expiry as CONNECT properties are taken as the settings."""
    cp = [(P.RECEIVE_MAXIMUM, 3), (P.MAXIMUM_PACKET_SIZE, 600),
          (P.TOPIC_ALIAS_MAXIMUM, 2), (P.SESSION_EXPIRY, 120), (P.USER_PROPERTY, ("a", "b"))]
    if raw:
        cp = P.build(cp, 1)
    c = _client(host, port, tag + "-cs", version, connect_props=cp)
    out = {"in_max": c.in_max, "rx": len(c.data), "aliases_in": c.a_in_max,
           "session_expiry": c.session_expiry}
    c.connect(clean=True)
    t = tag.encode()
    got = []
    _recorder(c, got)
    c.subscribe(t + b"/s", 1)
    p = _client(host, port, tag + "-cp", version, slot_size=1024)
    p.connect()
    p.publish(t + b"/s", b"x" * 700, 1)  # over our 600: the server drops it
    p.publish(t + b"/s", b"small", 1)
    assert _pump([c, p], lambda: got)
    out["got"] = [len(g[1]) for g in got]
    c.close()
    out["resumed"] = c.connect(clean=False)  # the session outlived the link
    out["connects"] = c.connects
    c.disconnect(session_expiry=0)
    p.disconnect()
    return out


# ---- bounded waits ---------------------------------------------------------------

def bounded(host, port, tag, version, dead_port):
    """ensure_connected(timeout_ms) and poll(t) return within their time
    while the server is down (backoff included) and reconnect once it is back."""
    c = _client(host, port, tag + "-b", version, backoff_ms=(200, 2000))
    c.connect()
    c.subscribe(tag.encode() + b"/b", 1)
    c.close()
    c.state[13] = dead_port  # lite state[_PORT]: nothing listens there, the server is "down"
    worst = total = 0
    for _ in range(8):
        t0 = ticks_ms()
        r = c.poll(150)
        took = ticks_diff(ticks_ms(), t0)
        worst = max(worst, took)
        total += took
        assert r == 0 and not c.up
    t0 = ticks_ms()
    ok = c.ensure_connected(300)
    took = ticks_diff(ticks_ms(), t0)
    err = "OSError" if isinstance(c.last_error, OSError) else repr(c.last_error)
    c.state[13] = port  # lite state[_PORT]: back
    t0 = ticks_ms()
    while not c.up and ticks_diff(ticks_ms(), t0) < 5000:
        c.poll(100)
    back = c.up
    resubscribed = list(c.subscriptions)
    c.disconnect()
    return {"worst_poll_ms": worst, "all_polls_ms": total, "ensure_ok": ok, "ensure_ms": took, "last_error": err,
            "back": back, "subs": len(resubscribed), "connects": c.connects}


def bad_ca(host, port, tag, version, other_der):
    """A server certificate the CA does not vouch for: raised at once, not retried."""
    import ssl
    with open(other_der, "rb") as f:
        other = f.read()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    if not MP:
        ctx.check_hostname = False
    ctx.load_verify_locations(cadata=other)
    c = _client(host, port, tag + "-ca", version, ssl=ctx)
    tries = _count_connects(c)
    e = _raises(Exception, c.ensure_connected, 3000)
    return {"error": type(e).__name__, "tries": tries[0]}


# ---- oversize inbound messages ------------------------------------------------------

def oversize(host, port, tag, version):
    """A retained message over max_packet, at QoS 0, 1 and 2, and one sent
    live: reported to on_oversize, acknowledged, no reconnect; the next
    message arrives."""
    t = tag.encode()
    # (4 slots: the in-flight table is one buffer, 30 KB here, that the 256k
    # heap of the unix port's run must hold in one piece)
    p = _client(host, port, tag + "-op", version, slot_size=6000, tx_size=6000, slots=4)
    p.connect()
    for q in (0, 1, 2):
        p.publish(t + ("/big%d" % q).encode(), b"x" * 5000, q, retain=True)
    p.flush(5000)
    big = []
    got = []
    c = _client(host, port, tag + "-oc", version, clean=False,
                session_expiry=300 if version == 5 else None)
    c.on_oversize = lambda topic, size: big.append((bytes(topic).decode(), size))
    _recorder(c, got)
    c.connect()
    c.subscribe(t + b"/#", 2)
    p.publish(t + b"/live", b"y" * 3000, 2)
    p.publish(t + b"/small", b"after", 1)
    ok = _pump([c, p], lambda: _got(got, t + b"/small"))
    _pump([c, p], lambda: False, 1000)  # time for a reconnect loop to show
    out = {"ok": ok, "big": sorted(big), "connects": c.connects, "up": c.up,
           "last_error": repr(c.last_error), "inbound_held": len([x for x in c.in_pid if x])}
    # acknowledged: nothing comes again on a resumed session
    c.close()
    big[:] = []
    out["resumed"] = c.connect(clean=False)
    _pump([c, p], lambda: False, 500)
    out["again"] = len(big)
    c.disconnect()
    for q in (0, 1, 2):
        p.publish(t + ("/big%d" % q).encode(), b"", 1, retain=True)
    p.flush(5000)
    p.disconnect()
    return out


def oversize_v5(host, port, tag):
    """A 5.0 server that breaks our Maximum Packet Size (a test peer):
    reported, then DISCONNECT 0x95."""
    big = []
    c = _client(host, port, tag + "-o5", 5, reconnect=False)
    c.on_oversize = lambda topic, size: big.append((bytes(topic).decode(), size))
    c.connect()
    e = _raises(MQTTError, _pump, [c], lambda: False, 3000)
    return {"big": big, "reason": e.args[0], "up": c.up}
