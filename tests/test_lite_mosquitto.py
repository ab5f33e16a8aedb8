"""frugalmqtt.lite.Publisher (the publish-only profile) against a real
mosquitto, under CPython and as a MicroPython unix-port process, 3.1.1 and
5.0. The device side is in tests/mp_client/scenarios.py (lite_*); the
runner, the cutting proxy and its resume rules are test_client_mosquitto's."""
from frugalmqtt_host.ref.codec import PUBLISH, PUBREL
from hostkit import PahoSubscriber
from test_client_mosquitto import (BOTH, RESUME_RULES, counts, run_device, start_proxy,
                                   paho_sub, wait_disconnect)


@BOTH
def test_lite_publishes_each_qos_retain_and_properties(runtime, version, mosquitto, cleanup):
    b = mosquitto()
    n = 5
    topic = "frugal/lite_pubsub/%s/%d" % (runtime, version)  # as run_device names it
    ps = paho_sub(b, topic + "/#", version, cleanup)
    root = PahoSubscriber(b, topic, version, 2)  # the non-retained stream
    cleanup.append(root.stop)
    ev = run_device(runtime, "lite_pubsub", b, version, n=n)
    r = ev.result()
    assert r["flushed"]
    assert [q for q, pid in r["pids"]] == [0, 1, 2] * n
    assert all((pid == 0) == (q == 0) for q, pid in r["pids"])
    assert len(r["done"]) == 2 * n + 3 and all(rc < 0x80 for pid, rc in r["done"]), r
    ps.wait_for(b"end")
    root.wait_for(b"end")
    got = [m for m in root.msgs if m.topic == topic]
    c = counts(m.payload for m in got)
    for q in (0, 1, 2):
        names = [b"q%d-%d" % (q, i) for i in range(n)]
        assert all(c.get(x) == 1 for x in names), c  # QoS 2 exactly once; nothing lost
        assert [m.payload for m in got if m.payload in names] == names  # in order
        assert all(m.qos == q for m in got if m.payload in names)
    ps.has(topic + "/ret", b"")  # the clearing message passed
    kept = [m for m in ps.msgs if m.topic == topic + "/ret" and m.payload == b"kept"]
    assert len(kept) == 1
    if version == 5:
        pr = kept[0].properties
        assert pr.ContentType == "text/plain" and pr.PayloadFormatIndicator == 1
        assert 0 < pr.MessageExpiryInterval <= 3600
        assert pr.ResponseTopic == "r/t" and pr.CorrelationData == b"\x00\x01"
        assert [tuple(u) for u in pr.UserProperty] == [("unit", "C"), ("b", "2"), ("a", "1")]
    # a late subscriber sees no retained message: the zero-byte one cleared it
    late = PahoSubscriber(b, topic + "/ret", version, 1)
    cleanup.append(late.stop)
    root.has(topic, b"end")
    assert late.payloads() == []


@BOTH
def test_lite_resumes_its_session_across_cuts(runtime, version, mosquitto, cleanup):
    b = mosquitto()
    topic = "frugal/lite_resume/%s/%d" % (runtime, version)
    ps = paho_sub(b, topic, version, cleanup)
    px = start_proxy(b, version, cleanup, RESUME_RULES)
    n = 8
    ev = run_device(runtime, "lite_resume", b, version, proxy_port=px.port, n=n)
    wait_disconnect(px)
    r = ev.result()
    assert all(rule.fired for rule in px.rules), (px.rules, px.dump())
    assert not px.errors
    assert r["flushed"] and r["connected"]
    assert r["sp"][0] is False and r["sp"][-1] is True, r["sp"]
    assert len(r["done"]) == n + 1 and all(rc < 0x80 for pid, rc in r["done"]), r
    pubs = px.packets("c2s", PUBLISH)
    first = {}
    for e in pubs:
        if e["payload"] not in first:
            first[e["payload"]] = e
        else:  # a resend: same packet id, DUP=1 [MQTT-4.4.0-1] [MQTT-3.3.1-1]
            f = first[e["payload"]]
            assert e["dup"] == 1 and e["pid"] == f["pid"] and e["conn"] > f["conn"], px.dump()
    # once PUBREL went out the PUBLISH is never sent again [MQTT-4.3.3-6]
    c2s = [e for e in px.log if e["dir"] == "c2s"]
    for i, e in enumerate(c2s):
        if e["type"] == PUBREL:
            assert not [x for x in c2s[i:] if x["type"] == PUBLISH
                        and x["payload"] == e["payload"]], px.dump()
    ps.wait_for(b"end")
    c = counts(ps.payloads())
    for i in range(n):
        m = b"m%d" % i
        assert (c.get(m) == 1) if i % 2 else (c.get(m, 0) >= 1), c  # QoS 2 exactly once
    assert c[b"end"] == 1
