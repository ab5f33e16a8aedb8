"""The cut-point sweep (host_sim/scenarios/sweep.toml): for QoS 1 and 2, on
3.1.1 and 5.0, the CPython device and the MicroPython device process, the
link is cut before, after and in the middle of every packet of the 3rd
message's publish exchange in both directions (plus a cut right after the
CONNACK of the resumed session): no message lost, no QoS 2 duplicate, DUP=1
on every resent PUBLISH, PUBREL (not PUBLISH) resent after PUBREC."""
from frugalmqtt.codec import PUBLISH, PUBREL
from host_sim import scenario
from host_sim.link import protocol_violations, pubrel_after_pubrec
from host_sim.run import Runner


def test_cut_point_sweep(tmp_path):
    sc = scenario.load("sweep")
    r = Runner(sc, 0, str(tmp_path), quiet=True)
    assert r.execute() == 0, r.result["broken"]
    points = [a for a in r.finished]
    # 2 runtimes x 2 versions x (QoS 1: 2 packets, QoS 2: 4 packets) x 3 cuts, + 8 reconnect cuts
    assert len(points) == 2 * 2 * (2 + 4) * 3 + 8
    for a in points:
        assert all(rule.fired for rule in a.link.rules), (a.spec.device, a.link.rules)
        assert len(a.link.conns) == len(a.link.rules) + 1, (a.spec.device, a.link.dump())
        log = a.link.log
        assert protocol_violations(log) == []
        resent = [e for e in log if e["type"] == PUBLISH and e["dup"]]
        if a.spec.label.startswith(("PUBLISH", "PUBACK", "PUBREC-s2c-drop", "PUBREC-s2c-mid")):
            # the 3rd message's PUBLISH went again, with DUP=1 and its packet id
            assert resent, (a.spec.device, a.link.dump())
        if a.spec.label in ("PUBREC-s2c-after", "PUBREL-c2s-drop", "PUBREL-c2s-after",
                            "PUBREL-c2s-mid", "PUBCOMP-s2c-drop", "PUBCOMP-s2c-mid"):
            # the PUBREC had reached the device: PUBREL again, never the PUBLISH
            third = [e for e in log if e["type"] == PUBLISH][2]["payload"]
            later = [e for e in log if e.get("payload") == third and e["dir"] == "c2s"
                     and e["conn"] == 1]
            assert later and later[0]["type"] == PUBREL, (a.spec.device, a.link.dump())
            assert pubrel_after_pubrec(log).get(third, "PUBREL") == "PUBREL"
    s = r.result["summary"]
    assert s["1"]["lost"] == 0 and s["2"]["lost"] == 0 and s["2"]["duplicated"] == 0


def test_wire_checks_catch_a_bad_resend():
    log = [
        {"dir": "c2s", "type": PUBLISH, "qos": 1, "payload": b"a", "dup": 0, "pid": 1, "conn": 0},
        {"dir": "c2s", "type": PUBLISH, "qos": 1, "payload": b"a", "dup": 0, "pid": 1, "conn": 1},
        {"dir": "c2s", "type": PUBREL, "payload": b"b", "pid": 2, "conn": 1},
        {"dir": "c2s", "type": PUBLISH, "qos": 2, "payload": b"b", "dup": 1, "pid": 2, "conn": 2},
    ]
    bad = protocol_violations(log)
    assert len(bad) == 2 and "without DUP=1" in bad[0] and "after its PUBREL" in bad[1]
