"""frugalmqtt.aclient.AMQTTClient (asyncio) against a real mosquitto 2.0.11,
MQTT 3.1.1 and 5.0, under CPython (asyncio, in-process) and under the
MicroPython unix port (its asyncio, a subprocess).

The device side of each test is a function of tests/mp_api/aclient_checks.py
that runs unchanged on both runtimes and asserts what the client sees; here
an independent paho-mqtt subscriber and mosquitto's log check what reached
the broker.
"""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import (BOTH, RUNTIMES, Background, Observer, by_topic, certs, free_port,  # noqa: E402,F401
                     run_check, tls_listener)


def _tag(name, runtime, version):
    return "a%s-%s-%d" % (name, runtime[:2], version)


def _check(runtime, name, broker, tag, version):
    return run_check(runtime, "aclient_checks", name, broker.host, broker.port, tag, version)


@BOTH
def test_publish_and_receive_each_qos(runtime, version, mosquitto):
    """QoS 0/1/2 out and in (on_message and messages()), publish() waiting for
    a slot of a 2-slot window, unsubscribe."""
    b = mosquitto()
    tag = _tag("ps", runtime, version)
    n = 5
    obs = Observer(b, tag + "/#", version)
    try:
        r = _check(runtime, "pubsub", b, tag, version)
        msgs = obs.wait(lambda ms: len(ms) >= 6 * n + 3, "all %d messages" % (6 * n + 3))
    finally:
        obs.stop()
    assert r["codes"] == [2, 1, 1]
    assert r["unsub"] == 0
    assert r["received"] == 3 * n + 1 and r["iterated"] == 3 * n + 1
    assert len(msgs) == 6 * n + 3, msgs
    for q in (0, 1, 2):
        assert by_topic(msgs, tag + "/ps/q%d" % q) == [(b"%d-%d" % (q, i), q) for i in range(n)]
        assert by_topic(msgs, tag + "/it/q%d" % q) == [(b"it%d-%d" % (q, i), q)
                                                       for i in range(n)]
    assert by_topic(msgs, tag + "/it/end") == [(b"it-end", 2)]
    assert by_topic(msgs, tag + "/ps/after") == [(b"after", 1)]
    assert by_topic(msgs, tag + "/ctl") == [(b"marker", 1)]


@BOTH
def test_last_will_on_drop(runtime, version, mosquitto):
    b = mosquitto()
    tag = _tag("will", runtime, version)
    obs = Observer(b, tag + "/will", version)
    try:
        r = _check(runtime, "will", b, tag, version)
        msgs = obs.wait(lambda ms: len(ms) >= 2, "will")
    finally:
        obs.stop()
    assert r["got"] == [[tag + "/will", "w-alive", 1, False], [tag + "/will", "w-gone", 1, False]]
    assert by_topic(msgs, tag + "/will") == [(b"w-alive", 1), (b"w-gone", 1)]
    log = b.log()
    assert "Received DISCONNECT from %s-w" % tag not in log  # dropped, no DISCONNECT
    assert "Client %s-w closed its connection" % tag in log
    assert "Sending PUBLISH to %s-o (d0, q1, r0, m2, '%s/will'" % (tag, tag) in log


@BOTH
def test_reconnect_resumes_session(runtime, version, mosquitto):
    """The server drops the link: the client reconnects after its backoff with
    Clean Start 0, the server has the session (subscription and messages
    queued meanwhile), and the session sends what was published offline."""
    b = mosquitto()
    tag = _tag("rs", runtime, version)
    obs = Observer(b, tag + "/out", version)
    try:
        r = _check(runtime, "resume", b, tag, version)
        msgs = obs.wait(lambda ms: {m[1] for m in ms} >= {b"a-q1", b"a-q2"}, "a-q1 and a-q2")
    finally:
        obs.stop()
    assert r["sp"] == [False, True] and r["connects"] == 2
    assert [g[1] for g in r["got"][:2]] == ["before", "while-down"]
    assert sorted(g[1] for g in r["got"][2:]) == ["after", "late"]
    out = by_topic(msgs, tag + "/out")
    assert out.count((b"a-q2", 2)) == 1, out  # exactly once
    assert (b"a-q1", 1) in out
    log = b.log()
    conns = [l for l in log.splitlines() if "New client connected" in l and
             " as %s-a " % tag in l]
    assert len(conns) == 2, conns
    assert all(", c0," in l for l in conns), conns  # Clean Start 0 both times


@BOTH
def test_reconnect_without_session_subscribes_again(runtime, version, mosquitto):
    b = mosquitto()
    tag = _tag("rsub", runtime, version)
    r = _check(runtime, "resubscribe", b, tag, version)
    assert r["sp"] == [False, False] and r["connects"] == 2
    t = tag + "/rt"
    assert r["got"][:2] == [[t, "kept", 1, False], [t, "kept", 1, True]], r["got"]
    subs = [l for l in b.log().splitlines() if "Received SUBSCRIBE from %s-a" % tag in l]
    assert len(subs) == 2, subs


@BOTH
def test_refused_connection_raises(runtime, version, mosquitto):
    b = mosquitto("allow_anonymous false")
    r = _check(runtime, "refused", b, _tag("rf", runtime, version), version)
    # 3.1.1: 5 not authorized; 5.0: 0x87 Not authorized
    assert r["code"] == (5 if version == 4 else 0x87)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_idle_and_keepalive(runtime, mosquitto):
    b = mosquitto()
    tag = _tag("idle", runtime, 5)
    r = _check(runtime, "idle", b, tag, 5)
    if runtime == "micropython":
        assert r["idle_alloc"] == 0  # nothing allocated in 1.5 s idle
    log = b.log()
    assert log.count("Received PINGREQ from %s-ka" % tag) >= 2
    assert log.count("Sending PINGRESP to %s-ka" % tag) >= 2
    assert "Received PINGREQ from %s-idle" % tag not in log  # keep-alive 60: no wake-up


@BOTH
def test_broker_restart_resumes_session(runtime, version, mosquitto):
    """mosquitto (persistence on) restarts: reconnect attempts are refused
    until it is back (backoff), then the session resumes: the subscription is
    kept and the message stored while the broker was down is delivered."""
    b = mosquitto("persistence true")
    tag = _tag("rb", runtime, version)
    obs = Observer(b, tag + "/out", version)
    try:
        run = Background(runtime, "aclient_checks", "restart", b.host, b.port, tag, version)
        obs.has(tag + "/out", b"ready")
    finally:
        obs.stop()
    b.restart()
    r = run.result()
    assert r["sp"] == [False, True] and r["connects"] == 2
    conns = [l for l in b.log().splitlines() if "New client connected" in l and
             " as %s-a " % tag in l]
    assert len(conns) == 2 and all(", c0," in l for l in conns), conns


@BOTH
def test_tls(runtime, version, mosquitto, certs):
    port = free_port()
    b = mosquitto(*tls_listener(port, certs))
    tag = _tag("tls", runtime, version)
    r = run_check(runtime, "aclient_checks", "tls", b.host, port, tag, version,
                  str(certs / "ca.der"), str(certs / "other.der"))
    assert r["received"] == 12 and r["refused"]
    log = b.log()
    assert "New client connected from 127.0.0.1" in log and "as %s-t " % tag in log
    assert "as %s-bad " % tag not in log  # refused during the handshake



@pytest.mark.parametrize("runtime", RUNTIMES)
def test_receiving_allocates_only_to_wait(runtime, mosquitto):
    """Messages handled at one wake-up allocate nothing between them
    (framing, dispatch to on_message, the PUBACK); one wait for readability
    allocates a fixed few bytes (MicroPython: the _readable generator and
    IOQueue's entry for the socket), the same at almost every wake-up."""
    b = mosquitto()
    tag = _tag("al", runtime, 5)
    obs = Observer(b, tag + "/ready", 5)
    try:
        run = Background(runtime, "aclient_checks", "dispatch_alloc", b.host, b.port, tag, 5)
        obs.has(tag + "/ready", b"ready")
        for i in range(20):
            obs.publish(tag + "/al", b"s%d" % i, qos=0)
            time.sleep(0.03)
        r = run.result()
    finally:
        obs.stop()
    assert r["count"] == 220
    pairs = r["burst"] + r["spaced"]  # [bytes, waits] between consecutive messages
    assert [p for p in pairs if p[1] == 0 and p[0]] == []  # one wake-up: nothing
    assert sum(1 for p in r["spaced"] if p[1] == 1) >= 10, r["spaced"]
    if runtime == "micropython":
        # what one wait allocates: 192 B on the 64-bit unix port (an odd one
        # may be larger, when asyncio's IOQueue map grows)
        per_wait = [p[0] for p in r["spaced"] if p[1] == 1]
        most = max(set(per_wait), key=per_wait.count)
        assert 0 < most <= 256 and per_wait.count(most) * 2 > len(per_wait), per_wait


@BOTH
def test_application_api(runtime, version, mosquitto):
    """async with, up/down events, publish(wait=True), Message copies."""
    b = mosquitto()
    tag = _tag("api", runtime, version)
    r = _check(runtime, "api", b, tag, version)
    # QoS 0: 0 once sent; PUBACK/PUBCOMP 0; 5.0: 0x10 when nobody subscribed
    assert r["codes"] == [0, 0, 0, 0x10 if version == 5 else 0]
    t = tag + "/api"
    props = ["text/plain", [["k", "v"]]] if version == 5 else [None, None]
    assert r["msgs"] == [[t, "kept", 1, True, False, None, None],
                         [t, "q0", 0, False, False, None, None],
                         [t, "q1", 1, False, False] + props,
                         [t, "q2", 2, False, False, None, None]]
    log = b.log()
    assert "Received DISCONNECT from %s-api" % tag in log


@BOTH
def test_connection_events(runtime, version, mosquitto):
    """down_event/on_disconnect on a lost link, up_event on the reconnect;
    subscriptions made again after the reconnect and after connect();
    the server's DISCONNECT reason (5.0)."""
    b = mosquitto()
    tag = _tag("ev", runtime, version)
    r = _check(runtime, "events", b, tag, version)
    assert r["connects"] == 3
    # the break: 5.0 mosquitto says why (0x82 Protocol Error), 3.1.1 just closes
    # mosquitto 2.0.11 closes a taken-over connection without DISCONNECT
    assert r["downs"] == [[0x82 if version == 5 else 0x80, True], [0, True], [0, True],
                          [0x80, True]]
    subs = [l for l in b.log().splitlines() if "Received SUBSCRIBE from %s-e" % tag in l]
    assert len(subs) == 3, subs  # subscribe(), then made again twice
