"""frugalmqtt.client.MQTTClient against a real mosquitto 2.0.11, under CPython
(in-process) and under the MicroPython unix port (a subprocess), 3.1.1 and 5.0.

The device side of every scenario is tests/mp_client/scenarios.py: the same
code runs in both runtimes and reports JSON events ("@@ {...}" lines under
MicroPython). This file starts mosquitto (tests/conftest.py `mosquitto`
factory), an independent paho-mqtt subscriber where one is useful, and a
recording link (host_sim.link, the simulator's TCP proxy) between a device
client and mosquitto: it frames both directions with the codec, logs every
packet and can cut the connection at a chosen packet (forward it then cut,
or cut without forwarding it), to check what the client puts on the wire and
how it resumes its session.
"""
import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from frugalmqtt import codec
from hostkit import PahoSubscriber, micropython_binary
from host_sim.link import Link, Rule
from frugalmqtt import props as P
from frugalmqtt.codec import (CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP,
                              DISCONNECT)

REPO = Path(__file__).resolve().parent.parent
MP_DIR = REPO / "tests" / "mp_client"
SCRIPT = MP_DIR / "scenarios.py"
MP_TIMEOUT_S = 60
MP_HEAPSIZE = "256k"
WAIT_S = 10.0

_spec = importlib.util.spec_from_file_location("mp_client_scenarios", SCRIPT)
scenarios = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scenarios)

RUNTIMES = ("cpython", "micropython")
BOTH = pytest.mark.parametrize("runtime,version",
                               [(r, v) for r in RUNTIMES for v in (4, 5)])
V5 = pytest.mark.parametrize("runtime,version", [(r, 5) for r in RUNTIMES])


# ---- running a scenario ------------------------------------------------------

class Events(list):
    """The JSON events of one scenario run."""

    def result(self):
        found = [e for e in self if e["ev"] == "result"]
        assert len(found) == 1, self
        return found[0]

    def msgs(self, who="sub"):
        return [e for e in self if e["ev"] == "msg" and e["who"] == who]


def run_device(runtime, name, broker, version, **params):
    params.update(host=broker.host, port=broker.port, version=version,
                  cid="%s-%s-v%d" % (name, runtime[:2], version),
                  topic="frugal/%s/%s/%d" % (name, runtime, version))
    events = Events()
    if runtime == "cpython":
        scenarios.run(name, params, lambda line: events.append(json.loads(line)))
    else:
        env = dict(os.environ)
        env["MICROPYPATH"] = os.pathsep.join([str(REPO / "firmware"), str(REPO), str(MP_DIR)])
        cmd = [micropython_binary(), "-X", "heapsize=" + MP_HEAPSIZE, str(SCRIPT), name,
               json.dumps(params)]
        try:
            proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True,
                                  timeout=MP_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            pytest.fail("micropython %s timed out after %ss\nstdout:\n%s\nstderr:\n%s"
                        % (name, MP_TIMEOUT_S, e.stdout, e.stderr), pytrace=False)
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0, "micropython %s exited %s\nstdout:\n%s\nstderr:\n%s" % (
            name, proc.returncode, out, err)
        for line in out.splitlines():
            if line.startswith("@@ "):
                events.append(json.loads(line[3:]))
    assert events and events[-1]["ev"] == "end", events
    return events


# ---- the recording, cutting link (host_sim.link) ------------------------------

def start_proxy(broker, version, cleanup, rules=()):
    """A host_sim Link in front of the broker; rules are dicts of
    link.Rule arguments (dir, type, payload, nth, action)."""
    p = Link((broker.host, broker.port), [Rule(**r) for r in rules]).start()
    cleanup.append(p.close)
    return p


def wait_disconnect(px):
    """Wait until the client's DISCONNECT has passed (scenarios end with
    one): everything the client sent before it is in the log then."""
    assert px.wait(lambda: px.packets("c2s", DISCONNECT), WAIT_S), (
        "no DISCONNECT through the proxy:\n" + px.dump())


# ---- an independent subscriber (paho-mqtt) ----------------------------------

def paho_sub(broker, topic, version, cleanup, qos=2):
    ps = PahoSubscriber(broker, topic, version, qos)
    cleanup.append(ps.stop)
    return ps


def wait_log(broker, text):
    """Wait until mosquitto has logged text (it logs after the fact)."""
    deadline = time.monotonic() + WAIT_S
    while text not in broker.log():
        assert time.monotonic() < deadline, "mosquitto never logged %r:\n%s" % (
            text, broker.log()[-3000:])
        time.sleep(0.02)


def counts(payloads):
    out = {}
    for p in payloads:
        out[p] = out.get(p, 0) + 1
    return out


# ---- publish / receive at QoS 0, 1, 2 ---------------------------------------

@BOTH
def test_publish_and_receive_each_qos(runtime, version, mosquitto, cleanup):
    b = mosquitto()
    n = 10
    topic = "frugal/pubsub/%s/%d" % (runtime, version)
    ps = paho_sub(b, topic, version, cleanup)
    ev = run_device(runtime, "pubsub", b, version, n=n)
    r = ev.result()
    assert r["suback"] == 2
    assert r["flushed"] and r["got_end"]
    assert r["pub_connects"] == 1 and r["sub_connects"] == 1
    for q, pid in r["pids"]:
        assert (pid == 0) if q == 0 else (0 < pid <= 65535)
    sent = sorted(pid for q, pid in r["pids"] if q)
    assert len(set(sent)) == 2 * n
    done = r["done"]
    assert len(done) == 2 * n + 1  # the QoS 1/2 messages and "end"
    assert all(reason < 0x80 for pid, reason in done), done
    assert set(sent) <= set(pid for pid, reason in done)

    got = ev.msgs()
    by_payload = counts(m["payload"] for m in got)
    for q in (0, 1, 2):
        names = ["q%d-%d" % (q, i) for i in range(n)]
        # each delivered exactly once, at the QoS it was published with
        assert all(by_payload.get(x) == 1 for x in names), by_payload
        mine = [m for m in got if m["payload"] in names]
        assert [m["payload"] for m in mine] == names  # in order per QoS (5.0 [MQTT-4.6.0-6])
        assert all(m["qos"] == q and m["retain"] == 0 and m["dup"] == 0 for m in mine)
        assert all(m["topic"] == topic for m in mine)
    assert by_payload["end"] == 1

    ps.wait_for(b"end")  # what mosquitto got from our publisher, seen by paho
    pc = counts(ps.payloads())
    for q in (0, 1, 2):
        for i in range(n):
            assert pc.get(("q%d-%d" % (q, i)).encode()) == 1, pc
    assert {m.payload: m.qos for m in ps.msgs}[b"q2-0"] == 2


@pytest.mark.parametrize("runtime,version", [(r, 4) for r in RUNTIMES])
def test_qos2_burst_beyond_inbound_slots_on_311(runtime, version, mosquitto):
    # mosquitto lets up to 20 (max_inflight_messages) QoS 2 messages wait for
    # PUBREL at a 3.1.1 client, which has no way to announce a limit: a
    # subscriber with 2 inbound slots must still take all of them, once each.
    b = mosquitto()
    n = 10
    ev = run_device(runtime, "qos2_burst", b, version, n=n, inbound=2)
    r = ev.result()
    assert r["suback"] == 2 and r["flushed"] and r["got_end"]
    assert r["sub_connects"] == 1 and r["sub_connected"]  # never dropped
    c = counts(m["payload"] for m in ev.msgs())
    assert c == dict([("b%d" % i, 1) for i in range(n)] + [("end", 1)])
    assert all(m["qos"] == 2 for m in ev.msgs())
    # the burst did exceed the 2 slots: mosquitto sent PUBLISHes ahead of PUBRELs
    cid = "qos2_burst-%s-v4-sub" % runtime[:2]
    wait_log(b, "Client %s disconnected." % cid)
    log = b.log()
    sent = [l for l in log.splitlines() if ("Sending PUBLISH to %s " % cid) in l
            or ("Sending PUBREL to %s " % cid) in l or ("Received PUBREC from %s " % cid) in l]
    unreleased = peak = 0
    for l in sent:
        if "Sending PUBLISH" in l:
            unreleased += 1
        elif "Sending PUBREL" in l:
            unreleased -= 1
        peak = max(peak, unreleased)
    assert peak > 2, "\n".join(sent)


# ---- retained messages -----------------------------------------------------

@BOTH
def test_retained_set_and_cleared(runtime, version, mosquitto):
    b = mosquitto()
    ev = run_device(runtime, "retain", b, version)
    topic = "frugal/retain/%s/%d" % (runtime, version)
    keep = topic + "/keep"

    live = [(m["topic"], m["payload"], m["retain"]) for m in ev.msgs("live")]
    # a subscriber that was already there gets both publishes live with
    # retain=0 (3.1.1 [MQTT-3.3.1-9], 5.0 [MQTT-3.3.1-12]), the zero-byte one
    # included (3.1.1 [MQTT-3.3.1-10])
    assert [x for x in live if x[0] == keep] == [(keep, "kept", 0), (keep, "", 0)]

    late1 = [(m["topic"], m["payload"], m["retain"]) for m in ev.msgs("late1")]
    assert late1 == [(keep, "kept", 1), (topic + "/marker", "m1", 0)]

    late2 = [(m["topic"], m["payload"], m["retain"]) for m in ev.msgs("late2")]
    assert late2 == [(topic + "/marker", "m2", 0)]  # cleared: nothing retained


# ---- MQTT 5 PUBLISH properties ----------------------------------------------

@V5
def test_publish_properties_round_trip(runtime, version, mosquitto, cleanup):
    b = mosquitto()
    topic = "frugal/props/%s/%d" % (runtime, version)
    ps = paho_sub(b, topic, version, cleanup)
    ev = run_device(runtime, "props", b, version)
    assert ev.result()["flushed"]
    users = [["zeta", "1"], ["alpha", "2"], ["zeta", "3"], ["cl\xe9", ""]]
    got = ev.msgs()
    assert sorted(m["qos"] for m in got) == [0, 1, 2]
    for m in got:
        assert m["payload"] == "h\xe9llo w\xf6rld"
        single = {}
        user = []
        for pid, value in m["props"]:
            if pid == P.USER_PROPERTY:
                assert value[0] == "u"
                user.append(value[1:])
            else:
                assert pid not in single, m["props"]
                single[pid] = value
        assert user == users  # all of them, order kept [MQTT-3.3.2-18]
        assert set(single) == {P.PAYLOAD_FORMAT, P.MESSAGE_EXPIRY, P.CONTENT_TYPE,
                               P.RESPONSE_TOPIC, P.CORRELATION_DATA}, m["props"]
        assert single[P.PAYLOAD_FORMAT] == ["i", 1]
        kind, expiry = single[P.MESSAGE_EXPIRY]
        assert kind == "i" and 0 < expiry <= 3600  # lowered by the time it waited
        assert single[P.CONTENT_TYPE] == ["s", "text/plain; charset=utf-8"]
        assert single[P.RESPONSE_TOPIC] == ["s", topic + "/reply"]
        assert single[P.CORRELATION_DATA] == ["b", "0001feff"]

    # paho, decoding what mosquitto forwarded from our publisher
    with ps.cond:
        assert ps.cond.wait_for(lambda: len(ps.msgs) >= 3, WAIT_S), ps.payloads()
    for m in ps.msgs:
        pr = m.properties
        assert m.payload == "h\xe9llo w\xf6rld".encode()
        assert pr.PayloadFormatIndicator == 1
        assert 0 < pr.MessageExpiryInterval <= 3600
        assert pr.ContentType == "text/plain; charset=utf-8"
        assert pr.ResponseTopic == topic + "/reply"
        assert pr.CorrelationData == b"\x00\x01\xfe\xff"
        assert [list(u) for u in pr.UserProperty] == users


# ---- topic aliases on the wire ----------------------------------------------

@V5
def test_topic_alias_used_after_first_publish(runtime, version, mosquitto, cleanup):
    b = mosquitto("max_topic_alias 10")
    px = start_proxy(b, version, cleanup)
    ev = run_device(runtime, "alias", b, version, proxy_port=px.port)
    wait_disconnect(px)
    r = ev.result()
    assert r["flushed"] and r["connects"] == 1
    assert len(r["done"]) == 6 and all(reason < 0x80 for pid, reason in r["done"])
    connack = px.packets("s2c", CONNACK)
    assert len(connack) == 1 and (P.TOPIC_ALIAS_MAXIMUM, 10) in connack[0]["props"]
    assert 0 < r["alias_max"] <= 10

    topic = "frugal/alias/%s/%d" % (runtime, version)
    pubs = px.packets("c2s", PUBLISH)
    assert not px.errors
    assert [e["payload"] for e in pubs] == [b"a0", b"a1", b"a2", b"b3", b"b4", b"a5", b"b6",
                                           b"a7", b"end"]
    seen = {}  # topic letter -> alias
    for e in pubs:
        name = e["payload"][:1].decode() if e["payload"] != b"end" else "end"
        assert 0 < e["alias"] <= r["alias_max"], e  # [MQTT-3.3.2-8] [MQTT-3.3.2-9]
        if name not in seen:
            assert e["topic"] == ("%s/%s" % (topic, name)).encode(), e
            assert e["alias"] not in seen.values()
            seen[name] = e["alias"]
        else:  # later publishes: empty topic and the alias alone
            assert e["topic"] == b"" and e["alias"] == seen[name], e
    assert len(seen) == 3

    got = [(m["topic"], m["payload"]) for m in ev.msgs()]
    want = [("%s/%s" % (topic, e["payload"][:1].decode() if e["payload"] != b"end" else "end"),
             e["payload"].decode()) for e in pubs]
    assert sorted(got) == sorted(want)  # every message, under its full topic


# ---- Receive Maximum ----------------------------------------------------------

@V5
def test_receive_maximum_honoured(runtime, version, mosquitto, cleanup):
    b = mosquitto("max_inflight_messages 2")
    topic = "frugal/receive_max/%s/%d" % (runtime, version)
    ps = paho_sub(b, topic, version, cleanup)
    px = start_proxy(b, version, cleanup)
    n = 50
    ev = run_device(runtime, "receive_max", b, version, proxy_port=px.port, n=n)
    wait_disconnect(px)
    r = ev.result()
    connack = px.packets("s2c", CONNACK)
    assert (P.RECEIVE_MAXIMUM, 2) in connack[0]["props"]
    assert r["receive_max"] == 2
    assert r["flushed"] and r["connects"] == 1
    assert len(r["done"]) == n and all(reason < 0x80 for pid, reason in r["done"]), r["done"]
    assert not px.errors
    pubs = px.packets("c2s", PUBLISH)
    assert len(pubs) == n and not any(e["dup"] for e in pubs)
    # never more than Receive Maximum unacknowledged [MQTT-4.9.0-2], and the
    # client did use the window
    assert px.max_outstanding == 2
    assert not [e for e in px.log if e["dir"] == "s2c" and (
        e["type"] == DISCONNECT or (e["type"] in (PUBACK, PUBREC) and e["reason"] >= 0x80))]
    for i in range(n):
        ps.wait_for(b"r%d" % i)
    c = counts(ps.payloads())
    assert all(c[b"r%d" % i] == 1 for i in range(n)), c


# ---- Maximum Packet Size --------------------------------------------------------

@V5
def test_maximum_packet_size_refused_locally(runtime, version, mosquitto):
    b = mosquitto("max_packet_size 200")
    ev = run_device(runtime, "max_packet", b, version, limit=200)
    r = ev.result()
    assert r["server_max"] == 200  # from CONNACK
    assert r["sizes"] == [200, 200, 200]
    f0, f1, f2 = r["fits"]
    # one byte over the limit, at each QoS, and far over: refused before
    # anything is sent [MQTT-3.2.2-15]
    assert r["refused"] == [[0, f0 + 1, "ValueError"], [1, f1 + 1, "ValueError"],
                            [2, f2 + 1, "ValueError"], [1, 300, "ValueError"],
                            [0, 400, "ValueError"]]
    assert r["connected_after_refusal"]
    assert r["flushed"] and r["connects"] == 1 and r["connected"]
    got = [(m["qos"], m["payload"]) for m in ev.msgs()]
    # (no order across QoS levels: mosquitto forwards QoS 2 at PUBREL)
    assert sorted(got) == [(0, "0" * f0), (1, "1" * f1), (1, "end"), (2, "2" * f2)]
    # the broker never saw an oversized packet: one connection, ended by our DISCONNECT
    cid = "max_packet-%s-v5-pub" % runtime[:2]
    wait_log(b, "Client %s disconnected." % cid)
    ends = [l.split(": ", 1)[1] for l in b.log().splitlines()
            if ("Client %s " % cid) in l and "disconnected" in l]
    assert ends == ["Client %s disconnected." % cid], ends


# ---- reconnect and session resume ---------------------------------------------

RESUME_RULES = [
    # the first reconnect ends right after its CONNACK
    dict(dir="s2c", type=CONNACK, nth=2, action="after"),
    # QoS 2 stored by the broker, its PUBREC lost
    dict(dir="s2c", type=PUBREC, payload=b"m1", action="drop"),
    # QoS 1 reached the broker, the connection drops before PUBACK
    dict(dir="c2s", type=PUBLISH, payload=b"m2", action="after"),
    # PUBREL reached the broker, PUBCOMP lost
    dict(dir="c2s", type=PUBREL, payload=b"m3", action="after"),
    # QoS 2 reached the broker, the connection drops before PUBREC
    dict(dir="c2s", type=PUBLISH, payload=b"m5", action="after"),
    # QoS 1 PUBACK lost
    dict(dir="s2c", type=PUBACK, payload=b"m6", action="drop"),
]


def _check_connects(px, version, rules, connects):
    # one new connection per cut, no more; connect() calls cut short by a
    # rule (the proxy cut right after CONNACK) do not count in `connects`
    assert len(px.conns) == len(rules) + 1, px.dump()
    assert 2 <= connects <= len(px.conns)
    conn_pkts = px.packets("c2s", CONNECT)
    assert len(conn_pkts) == len(px.conns)
    for e in conn_pkts:
        assert not e["clean"]  # the session is kept (3.1.1 [MQTT-3.1.2-4])
        if version == 5:
            assert (P.SESSION_EXPIRY, 300) in e["props"]
    acks = px.packets("s2c", CONNACK)
    assert [e["sp"] for e in acks] == [0] + [1] * (len(px.conns) - 1)


@BOTH
def test_reconnect_resends_publishes(runtime, version, mosquitto, cleanup):
    b = mosquitto()
    topic = "frugal/resume/%s/%d" % (runtime, version)
    ps = paho_sub(b, topic, version, cleanup)
    px = start_proxy(b, version, cleanup, RESUME_RULES)
    n = 8
    ev = run_device(runtime, "resume", b, version, proxy_port=px.port, n=n)
    wait_disconnect(px)
    r = ev.result()
    assert all(rule.fired for rule in px.rules), (px.rules, px.dump())
    assert not px.errors
    assert r["flushed"] and r["connected"]
    assert r["sp_first"] is False and r["sp_last"] == 1
    _check_connects(px, version, RESUME_RULES, r["connects"])
    assert len(r["done"]) == n + 1 and all(reason < 0x80 for pid, reason in r["done"]), r

    pubs = px.packets("c2s", PUBLISH)
    first = {}
    for e in pubs:
        if e["conn"] == 0:
            assert not e["dup"], e  # first attempts
        if e["payload"] not in first:
            # (DUP=1 here is a resend of a copy written into a connection the
            # proxy had already cut, so it never reached the broker)
            first[e["payload"]] = e
        else:  # a resend: same packet id, DUP=1 [MQTT-4.4.0-1] [MQTT-3.3.1-1]
            f = first[e["payload"]]
            assert e["dup"] == 1 and e["pid"] == f["pid"] and e["conn"] > f["conn"], e
    resent = set(e["payload"] for e in pubs if e["dup"])
    assert {b"m1", b"m2", b"m5", b"m6"} <= resent
    # once a PUBREL went out the PUBLISH is never sent again [MQTT-4.3.3-6],
    # the PUBREL is [MQTT-4.4.0-1]
    c2s = [e for e in px.log if e["dir"] == "c2s"]
    for i, e in enumerate(c2s):
        if e["type"] == PUBREL:
            assert not [x for x in c2s[i:] if x["type"] == PUBLISH
                        and x["payload"] == e["payload"]], px.dump()
    rels = [e for e in px.packets("c2s", PUBREL) if e["payload"] == b"m3"]
    assert len(rels) >= 2 and rels[1]["conn"] == rels[0]["conn"] + 1
    # PUBLISHes (DUP=1) and PUBRELs resent on a new connection go in the
    # original order [MQTT-4.6.0-1]
    for conn in range(1, len(px.conns)):
        again = []
        for e in c2s:
            if e["conn"] == conn and e.get("payload") not in (None, b"end") and (
                    (e["type"] == PUBLISH and e["dup"]) or (e["type"] == PUBREL and [
                        x for x in rels_before(c2s, e) if x["payload"] == e["payload"]])):
                again.append(int(e["payload"][1:]))
        assert again == sorted(again), px.dump()

    ps.wait_for(b"end")
    c = counts(ps.payloads())
    for i in range(n):
        p = b"m%d" % i
        if i % 2:
            assert c.get(p) == 1, c  # QoS 2: exactly once
        else:
            assert c.get(p, 0) >= 1, c  # QoS 1: at least once
    assert c[b"end"] == 1


def rels_before(c2s, e):
    """PUBRELs sent on connections before e's."""
    return [x for x in c2s if x["type"] == PUBREL and x["conn"] < e["conn"]]


RESUME_IN_RULES = [
    # the first reconnect ends right after its CONNACK
    dict(dir="s2c", type=CONNACK, nth=2, action="after"),
    # QoS 2 delivered to us, our PUBREC lost: the broker resends with DUP=1
    dict(dir="s2c", type=PUBLISH, payload=b"i1", action="after"),
    # QoS 1 delivered, PUBACK lost
    dict(dir="s2c", type=PUBLISH, payload=b"i2", action="after"),
    # our PUBREC reached the broker, its PUBREL lost in the cut
    dict(dir="c2s", type=PUBREC, payload=b"i3", action="after"),
    # PUBREL lost
    dict(dir="s2c", type=PUBREL, payload=b"i5", action="drop"),
    # our PUBCOMP lost: the broker sends PUBREL again
    dict(dir="c2s", type=PUBCOMP, payload=b"i7", action="drop"),
]


@BOTH
def test_reconnect_resumes_inbound_flows(runtime, version, mosquitto, cleanup):
    b = mosquitto()
    px = start_proxy(b, version, cleanup, RESUME_IN_RULES)
    n = 8
    ev = run_device(runtime, "resume_in", b, version, proxy_port=px.port, n=n)
    wait_disconnect(px)
    r = ev.result()
    assert all(rule.fired for rule in px.rules), (px.rules, px.dump())
    assert not px.errors
    assert r["suback"] == 2 and r["flushed"] and r["got_end"] and r["connected"]
    _check_connects(px, version, RESUME_IN_RULES, r["connects"])
    got = ev.msgs()
    c = counts(m["payload"] for m in got)
    for i in range(n):
        p = "i%d" % i
        if i % 2:
            assert c.get(p) == 1, c  # QoS 2: exactly once [MQTT-4.3.3-10]
        else:
            assert c.get(p, 0) >= 1, c
    assert c["end"] == 1
    # the broker did resend i1 with DUP=1 and we answered PUBREC, delivering
    # nothing more (counted above)
    i1 = [e for e in px.packets("s2c", PUBLISH) if e["payload"] == b"i1"]
    assert len(i1) >= 2 and all(e["dup"] == 1 for e in i1[1:]), px.dump()
    assert [e for e in px.packets("c2s", PUBREC)
            if e["payload"] == b"i1" and e["conn"] > i1[0]["conn"]], px.dump()
    # every PUBREL the broker sent was answered with PUBCOMP on its connection
    for e in px.packets("s2c", PUBREL):
        if e["action"] != "drop":
            comps = [x for x in px.packets("c2s", PUBCOMP, e["conn"]) if x["pid"] == e["pid"]]
            cut_after = e["conn"] + 1 < len(px.conns) and any(
                x["conn"] == e["conn"] and x["action"] for x in px.log)
            assert comps or cut_after, e


# ---- keep-alive -----------------------------------------------------------------

@BOTH
def test_keepalive_pings_and_stays_connected(runtime, version, mosquitto):
    b = mosquitto()
    ev = run_device(runtime, "keepalive", b, version, seconds=3)
    r = ev.result()
    assert r["connected"] and r["connects"] == 1
    assert r["types"].get(str(codec.PINGRESP), 0) >= 2, r
    cid = "keepalive-%s-v%d-idle" % (runtime[:2], version)
    wait_log(b, "Client %s disconnected." % cid)
    log = b.log()
    assert log.count("Received PINGREQ from %s" % cid) >= 2, log
    assert "exceeded timeout" not in log
