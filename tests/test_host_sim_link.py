"""The link simulator (host_sim/link.py) between a real device (the telemetry
program, CPython in-process) and a real mosquitto: every fault it can apply,
and what the device and an independent subscriber see."""
import pytest

from frugalmqtt_host.ref.codec import CONNECT, PUBLISH, PUBREC, PUBREL
from host_sim.devices import run_device
from host_sim.link import Link, Rule, protocol_violations, pubrel_after_pubrec
from host_sim.subscriber import Subscriber


@pytest.fixture
def rig(mosquitto, request):
    made = []

    def make(rules=(), version=5, **kw):
        b = mosquitto()
        link = Link((b.host, b.port), rules, **kw).start()
        name = request.node.name.replace("[", "-").replace("]", "")
        sub = Subscriber(b.host, b.port, "sim/%s/#" % name, "sub-" + name, version=version)
        made.extend([link.close, sub.stop])
        return b, link, sub, name

    yield make
    for close in reversed(made):
        close()


def telemetry(link, name, version, qos, n, **kw):
    p = dict(host="127.0.0.1", port=link.port, version=version, cid="dev-" + name,
             topic="sim/%s/t" % name, qos=qos, n=n, clean=False, keepalive=10,
             backoff_min_ms=10, backoff_max_ms=100)
    p.update(kw)
    run = run_device("cpython", "telemetry", p, timeout=60)
    assert run.error is None and run.ended, (run.error, run.events[-3:])
    return run


def delivered(sub, name, n):
    assert sub.wait_for([("dev-" + name, s) for s in range(n)]), sorted(sub.keys())
    sub.quiet()
    return sub.keys()


@pytest.mark.parametrize("version", [4, 5])
def test_cut_after_the_second_pubrec_from_the_broker(version, rig):
    b, link, sub, name = rig([Rule("s2c", "PUBREC", nth=2, action="after")], version)
    run = telemetry(link, name, version, 2, 5)
    assert link.rules[0].fired and link.cuts == 1
    assert len(link.conns) == 2, link.dump()
    recs = [e for e in link.log if e["type"] == PUBREC and e["dir"] == "s2c"]
    second = recs[1]["payload"]
    # the device answered on the new connection with PUBREL, not PUBLISH
    assert pubrel_after_pubrec(link.log)[second] == "PUBREL", link.dump()
    assert protocol_violations(link.log) == []
    keys = delivered(sub, name, 5)
    assert sorted(keys) == [("dev-" + name, s) for s in range(5)]  # once each
    assert run.of("end")[0]["flushed"]
    assert sorted(e["seq"] for e in run.of("done")) == list(range(5))


def test_cut_mid_packet_and_at_a_byte_position(rig):
    b, link, sub, name = rig([Rule("c2s", "PUBLISH", nth=3, action="mid"),
                              Rule("c2s", byte=150)])
    run = telemetry(link, name, 5, 1, 8)
    assert all(r.fired for r in link.rules), link.rules
    assert len(link.conns) == 3, link.dump()
    assert [e["action"] for e in link.log if e["action"]] == ["mid", "mid"]
    assert protocol_violations(link.log) == []
    delivered(sub, name, 8)
    resent = [e for e in link.packets("c2s", PUBLISH) if e["dup"]]
    assert resent and all(e["conn"] > 0 for e in resent)
    assert run.of("end")[0]["connects"] == 3


def test_drop_before_forwarding_then_refuse_reconnects(rig):
    b, link, sub, name = rig([Rule("c2s", "PUBLISH", nth=2, action="drop", refuse_s=0.5)])
    telemetry(link, name, 5, 1, 4)
    assert link.refused >= 1  # the device retried while the link refused
    assert len(link.conns) == 2
    first = link.packets("c2s", PUBLISH, conn=0)
    assert len(first) == 2 and first[1]["action"] == "drop"
    again = link.packets("c2s", PUBLISH, conn=1, payload=first[1]["payload"])
    assert again and again[0]["dup"] and again[0]["pid"] == first[1]["pid"]
    delivered(sub, name, 4)


def test_blackhole_is_found_by_keepalive(rig):
    # a half-open link after the 2nd PUBLISH: nothing passes either way and
    # nothing closes; the device's PINGREQ goes unanswered, it reconnects
    b, link, sub, name = rig([Rule("c2s", "PUBLISH", nth=2, action="blackhole")])
    run = telemetry(link, name, 5, 1, 3, keepalive=1)
    assert len(link.conns) == 2
    assert link.conns[0].blackholed
    assert run.of("end")[0]["connects"] == 2
    assert link.packets("c2s", CONNECT, conn=1)
    delivered(sub, name, 3)
    assert link.packets("c2s", PUBLISH, conn=1)[0]["dup"]


def test_delay_and_throttle_keep_order_and_content(rig):
    b, link, sub, name = rig(delay_ms=5, jitter_ms=5, rate_bps=20000, seed=3)
    telemetry(link, name, 5, 2, 6)
    keys = delivered(sub, name, 6)
    assert keys == [("dev-" + name, s) for s in range(6)]
    assert len(link.conns) == 1 and link.cuts == 0
    assert len(link.packets("c2s", PUBLISH)) == 6 and len(link.packets("c2s", PUBREL)) == 6
