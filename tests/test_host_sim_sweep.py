"""The cut-point sweep (host_sim/scenarios/sweep.toml): for QoS 1 and 2, on
3.1.1 and 5.0, the CPython device and the MicroPython device process, the
link is cut before, after and in the middle of every packet of the 3rd
message's publish exchange in both directions (plus a cut right after the
CONNACK of the resumed session): no message lost, no QoS 2 duplicate, DUP=1
on every resent PUBLISH, PUBREL (not PUBLISH) resent after PUBREC."""
from frugalmqtt_host.ref.codec import PUBLISH, PUBREL
from host_sim import scenario
from host_sim.link import protocol_violations, pubrel_after_pubrec
from host_sim.run import Runner


# cut points where the device never got the ack of the cut message's PUBLISH
RESENT = {"PUBLISH-c2s-drop", "PUBLISH-c2s-after", "PUBLISH-c2s-mid", "PUBACK-s2c-drop",
          "PUBACK-s2c-mid", "PUBREC-s2c-drop", "PUBREC-s2c-mid",
          "PUBLISH-c2s-drop-then-CONNACK-s2c-after"}
# ... and where it had the PUBREC but not the PUBCOMP
AFTER_PUBREC = {"PUBREC-s2c-after", "PUBREL-c2s-drop", "PUBREL-c2s-after", "PUBREL-c2s-mid",
                "PUBCOMP-s2c-drop", "PUBCOMP-s2c-mid"}


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
        first = [e for e in log if e["type"] == PUBLISH and e["conn"] == 0]
        third = first[2]  # the message whose exchange was cut
        again = [e for e in log if e["type"] == PUBLISH and e["payload"] == third["payload"]
                 and e["conn"] > 0]
        label = a.spec.label
        if label in RESENT:
            # the PUBLISH went again, DUP=1, same packet id [MQTT-3.3.1-1] [MQTT-4.4.0-1]
            assert again and all(e["dup"] and e["pid"] == third["pid"] for e in again), (
                a.spec.device, a.link.dump())
        else:  # its ack (PUBACK, PUBREC) had reached the device: never sent again
            assert not again, (a.spec.device, a.link.dump())
        if label in AFTER_PUBREC:
            # PUBREL again on the new connection, never the PUBLISH
            later = [e for e in log if e.get("payload") == third["payload"]
                     and e["dir"] == "c2s" and e["conn"] == 1]
            assert later and later[0]["type"] == PUBREL, (a.spec.device, a.link.dump())
            assert pubrel_after_pubrec(log).get(third["payload"]) == "PUBREL"
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
