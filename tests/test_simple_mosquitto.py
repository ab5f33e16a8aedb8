"""frugalmqtt.simple, the umqtt.simple-compatible facade, against a real
mosquitto 2.0.11 under CPython (in-process) and the MicroPython unix port (a
subprocess): MQTT 3.1.1 (its default, like umqtt) and 5.0 (version=5).

The device side is tests/mp_api/simple_checks.py, written like umqtt
programs; examples/umqtt_style.py is a umqtt-style program that runs with only
its import line changed, driven here over MQTT while it runs.
"""
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import (BOTH, EXAMPLES, RUNTIMES, Observer, by_topic, certs, free_port,  # noqa: E402,F401
                     run_check, spawn, tls_listener)


def _tag(name, runtime, version):
    return "s%s-%s-%d" % (name, runtime[:2], version)


def _check(runtime, name, broker, tag, version):
    return run_check(runtime, "simple_checks", name, broker.host, broker.port, tag, version)


@BOTH
def test_publish_and_receive_each_qos(runtime, version, mosquitto):
    """QoS 0/1/2 publish and subscribe, a callback that publishes at QoS 1,
    check_msg/wait_msg/ping, retained messages."""
    b = mosquitto()
    tag = _tag("ps", runtime, version)
    n = 4
    obs = Observer(b, tag + "/#", version)
    try:
        r = _check(runtime, "pubsub", b, tag, version)
        msgs = obs.wait(lambda ms: len(ms) >= 3 * n + 4, "all %d messages" % (3 * n + 4))
    finally:
        obs.stop()
    assert len(r["got"]) == 3 * n + 2
    for q in (0, 1, 2):
        assert by_topic(msgs, tag + "/q%d" % q) == [(b"%d-%d" % (q, i), q) for i in range(n)]
    assert by_topic(msgs, tag + "/echo") == [(b"hello", 1)]
    assert by_topic(msgs, tag + "/reply") == [(b"re:hello", 1)]
    assert by_topic(msgs, tag + "/retained") == [(b"kept", 1), (b"", 0)]
    log = b.log()
    assert "Received PINGREQ from %s-c" % tag in log
    # 3.1.1 by default, like umqtt.simple (mosquitto logs p2 for 3.1.1, p5 for 5.0)
    assert re.search(r"as %s-c \(p%d, c1," % (re.escape(tag), 2 if version == 4 else 5), log)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_what_umqtt_takes_with_defaults(runtime, mosquitto):
    """Default sizes, as umqtt.simple programs leave them: a 4880-byte QoS 1
    retained message out (over a slot) and in (over the receive buffer), 300
    bytes at QoS 1, 600 at QoS 0 (over tx_size); wait_msg()/check_msg()
    return the first byte as micropython-lib's umqtt.simple does; c.sock
    registers with select.poll(). (The same function runs against
    umqtt.simple itself with lib="umqtt.simple".)"""
    b = mosquitto()
    r = _check(runtime, "umqtt_defaults", b, _tag("ud", runtime, 4), 4)
    assert r == {"kinds": [0x33, 0x32, 0x30, 0x30, None], "sizes": [4880, 300, 600, 6]}


@BOTH
def test_message_read_with_the_links_end_reaches_the_callback(runtime, version, mosquitto):
    """A message that arrives with the end of the link goes to the callback,
    then wait_msg() raises OSError; connecting again does not drop it
    (the facade queued it, and connect() used to empty the queue)."""
    from host_sim.link import Link, Rule
    b = mosquitto()
    tag = _tag("lm", runtime, version)
    link = Link((b.host, b.port), [Rule("s2c", "PUBLISH", payload=b"last")]).start()
    try:
        r = run_check(runtime, "simple_checks", "last_message", b.host, link.port, b.port, tag,
                      version)
    finally:
        link.close()
    assert link.cuts == 1
    got = [tuple(x) for x in r["got"]]
    # (on a host too slow for the check's 0.5 s, wait_msg() takes the message
    # alone and does not raise: the message is still there once)
    assert got in ([(tag + "/last", "last"), ("OSError", "")], [(tag + "/last", "last")]), got


@BOTH
def test_big_messages_at_each_qos(runtime, version, mosquitto):
    b = mosquitto()
    r = _check(runtime, "big_messages", b, _tag("bg", runtime, version), version)
    assert r["sizes"] == [1500, 1501, 1502, 5]


@BOTH
def test_clean_session_false_resumes(runtime, version, mosquitto):
    b = mosquitto()
    tag = _tag("ss", runtime, version)
    r = _check(runtime, "session", b, tag, version)
    assert r["got"] == [[tag + "/s", "while-away"], [tag + "/s", "while-away-2"]]


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
    assert r["got"] == [[tag + "/will", "w-alive"], [tag + "/will", "w-gone"]]
    assert by_topic(msgs, tag + "/will") == [(b"w-alive", 1), (b"w-gone", 1)]
    assert "Received DISCONNECT from %s-w" % tag not in b.log()


@BOTH
def test_errors(runtime, version, mosquitto):
    b = mosquitto()
    r = _check(runtime, "errors", b, _tag("err", runtime, version), version)
    # The server closes a 3.1.1 link silently (OSError, as umqtt), and a 5.0
    # one with DISCONNECT 0x81 (MQTTException)
    assert r["closed"] == ("OSError" if version == 4 else "MQTTException")


@BOTH
def test_refused_connection(runtime, version, mosquitto):
    b = mosquitto("allow_anonymous false")
    r = _check(runtime, "refused", b, _tag("rf", runtime, version), version)
    assert r["code"] == (5 if version == 4 else 0x87)


# ---- a umqtt-style program ----------------------------------------------------------

def _finish(proc, timeout=20):
    try:
        out, err = proc.communicate(timeout=timeout)
    except Exception:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail("the example did not stop\nstdout:\n%s\nstderr:\n%s" % (out, err))
    return out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def test_example_only_import_differs():
    src = (EXAMPLES / "umqtt_style.py").read_text()
    code = [l for l in src.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert [l for l in code if "frugalmqtt" in l] == ["from frugalmqtt.simple import MQTTClient"]
    assert "from umqtt.simple import MQTTClient" in src  # the original line, in a comment


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_umqtt_style_example(runtime, mosquitto):
    b = mosquitto()
    obs = Observer(b, "demo/#", 4)
    procs = []
    try:
        proc = spawn(runtime, "umqtt_style", "main", b.host, b.port, 0.1)
        procs.append(proc)
        obs.has("demo/status", b"online")
        obs.wait(lambda ms: by_topic(ms, "demo/reading"), "a reading")
        obs.publish("demo/cmd", b"hello")
        obs.has("demo/echo", b"1:hello")
        obs.publish("demo/cmd", b"again")
        obs.has("demo/echo", b"2:again")
        obs.publish("demo/cmd", b"stop")
        out, err = _finish(proc)
        assert proc.returncode == 0, out + err
        assert "Stopped after 2 answers" in out, out
        obs.has("demo/status", b"stopped")
        msgs = obs.wait(lambda ms: True, "")
        assert by_topic(msgs, "demo/echo") == [(b"1:hello", 1), (b"2:again", 1)]
        readings = [int(p) for p, q in by_topic(msgs, "demo/reading")]
        assert readings == list(range(1, len(readings) + 1))
        # A crash (killed, no DISCONNECT): the broker publishes the will
        onlines = len(by_topic(msgs, "demo/status"))
        proc = spawn(runtime, "umqtt_style", "main", b.host, b.port, 0.1)
        procs.append(proc)
        obs.wait(lambda ms: len(by_topic(ms, "demo/status")) > onlines, "online again")
        proc.kill()
        proc.wait()
        obs.has("demo/status", b"offline")
    finally:
        obs.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@BOTH
def test_tls_with_ssl_params(runtime, version, mosquitto, certs):
    port = free_port()
    b = mosquitto(*tls_listener(port, certs))
    tag = _tag("tls", runtime, version)
    r = run_check(runtime, "simple_checks", "tls", b.host, port, tag, version,
                  str(certs / "ca.der"), str(certs / "other.der"))
    assert r["received"] == 3 and r["refused"]
    log = b.log()
    assert "as %s-t " % tag in log and "as %s-bad " % tag not in log


# ---- frugalmqtt.robust ------------------------------------------------------------------

@BOTH
def test_robust_reconnects_after_broker_restart(runtime, version, mosquitto, capfd):
    import time

    import paho.mqtt.publish as paho_publish
    from apihost import Background
    b = mosquitto("persistence true")
    tag = _tag("rb", runtime, version)
    obs = Observer(b, tag + "/out", version)
    try:
        run = Background(runtime, "simple_checks", "robust_restart", b.host, b.port, tag, version)
        obs.has(tag + "/out", b"ready")
        b.stop()
        time.sleep(1.0)  # reconnect attempts fail meanwhile (DELAY 0.2 s)
        b.start()
        # the session survived the restart: the broker queues this for the client
        paho_publish.single(tag + "/in", b"stop", qos=1, hostname=b.host, port=b.port)
        r = run.result()
    finally:
        obs.stop()
    # wait_msg() failed once (log(False, e)), then reconnect() failed while
    # the broker was down (log(True, e)) until it came back
    assert r["restart"][0] is False and r["restart"].count(True) >= 2, r
    assert r["logged"][len(r["restart"]):] == [False, False, False], r
    got = [tuple(x) for x in r["got"]]
    assert got[0] == (tag + "/out", "ready") and (tag + "/in", "stop") in got
    assert (tag + "/out", "after-drop") in got and got[-1] == (tag + "/more", "more"), got
    if runtime == "cpython":  # DEBUG: log() prints as umqtt.robust
        out = capfd.readouterr().out
        assert "mqtt reconnect: " in out and "mqtt: " in out
