"""The deep-sleep cycle (frugalmqtt.wake) against mosquitto, on both runtimes:
each wake is a device process (bench/mp/wake.py) that exits, its state kept
in a file standing in for RTC memory; the wires are read from a
host_sim.link.Link, what arrived from a persistent QoS 2 subscriber."""
import pytest

from frugalmqtt_host.ref.codec import CONNECT, PUBLISH, PUBREL
from host_sim import wake
from host_sim.link import Link, Rule, protocol_violations

RUNTIMES = ["cpython", "micropython"]


@pytest.fixture
def rig(mosquitto, tmp_path):
    broker = mosquitto("persistence true")
    rec = wake.Recorder(broker.host, broker.port)
    yield broker, rec, tmp_path
    rec.stop()


def one(device, broker, cid, store, payloads, version=5, rules=(), deadline=10000):
    """One wake through a link of its own: (its "@@" lines, the link). A
    wake ends once its acks are in: the deadline only bounds a loaded machine."""
    link = Link((broker.host, broker.port), rules=rules).start()
    try:
        lines, _, _ = device.wake("frugalmqtt", "127.0.0.1", link.port, cid, store,
                                  ",".join(payloads), 1, deadline, 0, version)
    finally:
        link.close()
    return lines, link


def names(link, conn=0):
    return [(e["dir"], e["name"], e.get("payload")) for e in link.log if e["conn"] == conn]


def state(store):
    """The wake state block: (limits known, max QoS, quota, packet-id counter)."""
    b = open(store, "rb").read(16)
    return bool(b[1] & 1), b[1] >> 2 & 3, b[2] << 8 | b[3], b[4] << 8 | b[5]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("version", [5, 4])
def test_resumed_cycle_sends_with_the_connect_and_once(rig, runtime, version):
    broker, rec, tmp = rig
    dev = wake.Device(runtime)
    store = str(tmp / "rtc")
    # first wake: nothing remembered, the PUBLISH waits for the CONNACK
    lines, link = one(dev, broker, "d1", store, ["a:1"], version)
    assert [n[1] for n in names(link)][:3] == ["CONNECT", "CONNACK", "PUBLISH"]
    assert state(store)[0] and state(store)[3] == 1
    # later wakes: the readings ride right behind the CONNECT, before the
    # CONNACK; none goes twice; packet ids go on from the stored counter
    for w, payloads in enumerate((["b:1", "c:2"], ["d:2"])):
        lines, link = one(dev, broker, "d1", store, payloads, version)
        got = names(link)
        c2s = [n for n in got if n[0] == "c2s"]
        assert [n[1] for n in c2s] == ["CONNECT"] + ["PUBLISH"] * len(payloads) + \
            ["PUBREL"] * sum(p.endswith(":2") for p in payloads) + ["DISCONNECT"]
        assert got.index(("s2c", "CONNACK", None)) > len(payloads)  # sent before it came
        assert [l for l in lines if l[0] == "ended"]
        assert protocol_violations(link.log) == [] and wake.resent(link.log) == []
    assert state(store)[3] == 4
    rec.wait(["a", "b", "c", "d"])
    assert rec.count(["a", "b", "c", "d"]) == [1, 1, 1, 1]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_refused_connect_keeps_what_went_with_it(rig, runtime):
    """A refused CONNECT: the server processed nothing sent behind it
    [MQTT-3.1.4-6]; it goes again next wake and arrives once."""
    broker, rec, tmp = rig
    dev = wake.Device(runtime)
    store = str(tmp / "rtc")
    one(dev, broker, "d2", store, ["r0:1"])
    broker.extra_config.append("allow_anonymous false")
    broker._write_config()
    broker.restart()
    lines, link = one(dev, broker, "d2", store, ["r1:1", "r2:2"])
    assert [n[1] for n in names(link) if n[0] == "c2s"][:3] == ["CONNECT", "PUBLISH", "PUBLISH"]
    # refused: CONNACK 0x87 (not authorized), then closed (the link may lose
    # the CONNACK to the close, as a network may)
    assert "Sending CONNACK to 127.0.0.1 (0, 135)" in broker.log()
    assert [l for l in lines if l[0] == "pending"] == [["pending", "2"]]
    broker.extra_config.remove("allow_anonymous false")
    broker._write_config()
    broker.restart()
    lines, link = one(dev, broker, "d2", store, [])
    assert [e["dup"] for e in link.log if e["type"] == PUBLISH] == [True, True]
    assert [l for l in lines if l[0] == "pending"] == [["pending", "0"]]
    rec.wait(["r0", "r1", "r2"])
    assert rec.count(["r0", "r1", "r2"]) == [1, 1, 1]


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_lower_receive_maximum_costs_a_retry_and_is_remembered(rig, runtime):
    """The server's Receive Maximum dropped since the last wake: the cycle
    sends by the remembered one and mosquitto refuses what is over its quota
    (PUBREC 0x97): that message stays stored and goes next wake, which sends
    no more than the new maximum before the CONNACK. Nothing lost, no QoS 2
    twice."""
    broker, rec, tmp = rig
    dev = wake.Device(runtime)
    store = str(tmp / "rtc")
    one(dev, broker, "d3", store, ["m0:2"])
    assert state(store)[2] == 4  # min(slots, the server's Receive Maximum)
    broker.extra_config.append("max_inflight_messages 1")
    broker._write_config()
    broker.restart()
    lines, link = one(dev, broker, "d3", store, ["m1:2", "m2:2", "m3:1"])
    assert [e["reason"] for e in link.log if e["name"] == "PUBREC"] == [0, 0x97]
    assert ["pending", "1"] in lines  # m2, refused for the quota, kept
    assert state(store)[2] == 1
    lines, link = one(dev, broker, "d3", store, ["m4:2"])
    got = names(link)
    before = got[:got.index(("s2c", "CONNACK", None))]
    assert before == [("c2s", "CONNECT", None), ("c2s", "PUBLISH", b"m2")]
    assert [e["dup"] for e in link.log if e["type"] == PUBLISH] == [True, False]
    assert ["pending", "0"] in lines
    want = ["m%d" % i for i in range(5)]
    rec.wait(want)
    assert rec.count(want) == [1] * 5


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_reset_after_pubrec_resumes_with_pubrel(rig, runtime):
    """The link is cut once the PUBREC came: the next wake (a new process)
    sends PUBREL for that flow with its old packet id, not the PUBLISH."""
    broker, rec, tmp = rig
    dev = wake.Device(runtime)
    store = str(tmp / "rtc")
    one(dev, broker, "d4", store, ["q0:1"])
    lines, link = one(dev, broker, "d4", store, ["q1:2"], rules=[Rule("s2c", "PUBREC", 1,
                                                                      "after")])
    pid = [e["pid"] for e in link.log if e["type"] == PUBLISH][0]
    lines, link = one(dev, broker, "d4", store, [])
    got = [e for e in link.log if e["dir"] == "c2s"]
    assert [e["type"] for e in got[:2]] == [CONNECT, PUBREL] and got[1]["pid"] == pid
    assert PUBLISH not in [e["type"] for e in got]
    rec.wait(["q0", "q1"])
    assert rec.count(["q0", "q1"]) == [1, 1]


def test_wake_sweep_scenario(tmp_path, mosquitto):
    """host_sim/scenarios/wake_sweep.toml: every cut point, every reset
    step, a broker restart, on both runtimes; here at 5.0 only (the scenario,
    in `make scenarios`, runs 3.1.1 too), to keep `make test` short."""
    from host_sim import scenario
    cfg = dict(scenario.load("wake_sweep")["wake"], versions=[5])
    broker = mosquitto("persistence true")
    failed, n = wake.sweep(broker, cfg["runtimes"], cfg["versions"], cfg["workers"],
                           str(tmp_path), log=lambda m: None)
    assert failed == {}
    steps = 17  # store writes, socket writes and packets read in a wake carrying QoS 1 and 2
    cuts = 2 * (5 + 4)  # before and after each packet of the cycle, both ways
    assert n == len(cfg["runtimes"]) * len(cfg["versions"]) * (cuts + steps + 1)


def test_compare_wake_table_fast(mosquitto, tmp_path):
    """`make compare`'s deep-sleep table in a fast mode (3 wakes, 10 ms each
    way, frugalmqtt only: the other libraries are fetched by compare)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import compare
    broker = mosquitto()
    rec = wake.Recorder(broker.host, broker.port)
    try:
        r = wake.run_wakes("frugalmqtt", wake.Device("micropython"), (broker.host, broker.port),
                           rec, "wake-0", wakes=3, latency_ms=10, store_dir=str(tmp_path))
    finally:
        rec.stop()
    assert (r["lost"], r["dup"], r["sent"], r["connections"]) == (0, 0, 3, 3)
    assert r["violations"] == [] and r["bytes_down"] == 8  # 3.1.1 CONNACK + PUBACK
    assert r["bytes_up"] == 20 + 27 + 2  # CONNECT, PUBLISH of "wake-0-00N" to wake/wake-0, DISCONNECT
    tbl = compare.wake_table({compare.TELEM: r}, 3, 10)
    assert "| 3 wakes, one QoS 1 reading each, 10 ms each way | frugalmqtt (wake.Wake) |" in tbl
    assert "| messages lost / duplicated | 0 / 0 of 3 |" in tbl
