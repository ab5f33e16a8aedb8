"""The scenario runner end to end: mosquitto, links, CPython devices, the
recording subscriber, Parquet traces exactly as host_sim/schema.py defines
them, the audit and the exit code."""
import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from host_sim import schema, traces
from host_sim.run import run

REPO = Path(__file__).resolve().parent.parent


def test_basic_scenario_writes_traces_and_keeps_guarantees(tmp_path):
    code, r = run("basic", seed=1, out=str(tmp_path), quiet=True)
    assert code == 0, r["broken"]
    root = Path(r["root"])
    assert root.name == "run=" + r["run_id"] and root.parent == tmp_path
    for name, cols in schema.TABLES.items():
        t = pq.read_table(root / name)
        assert t.schema.equals(schema.arrow_schema(cols)), (name, t.schema)
    pub = traces.read(root, "published")
    rec = traces.read(root, "received")
    assert len(pub) == 6 * 50
    by_dev = {}
    for row in pub:
        by_dev.setdefault(row["device"], []).append(row["seq"])
    assert all(seqs == list(range(50)) for seqs in by_dev.values())  # no gaps
    for row in pub:
        if row["qos"]:
            assert row["outcome"] == "acked" and row["attempts"] >= 1 and row["t_ack_ms"]
        else:
            assert row["outcome"] == "sent" and row["packet_id"] is None
    assert [x["arrival"] for x in rec] == list(range(len(rec)))
    assert all(x["device"] in by_dev and x["sensor"] == "temp" for x in rec)
    meta = json.loads((root / "run.json").read_text())
    assert meta["seed"] == 1 and meta["scenario"] == "basic" and len(meta["devices"]) == 6
    assert meta["link_cuts"] > 0  # the fault profile did cut links
    s = meta["summary"]
    for q in ("1", "2"):
        assert s[q]["sent"] == 100 and s[q]["lost"] == 0
    assert s["2"]["duplicated"] == 0
    # resends happened and were counted
    assert any(row["attempts"] > 1 for row in pub)


def test_same_seed_same_fault_schedules(tmp_path):
    from host_sim import scenario
    sc = scenario.load("basic")
    a = [s.as_dict()["rules"] for s in scenario.expand(sc, 7)]
    b = [s.as_dict()["rules"] for s in scenario.expand(sc, 7)]
    c = [s.as_dict()["rules"] for s in scenario.expand(sc, 8)]
    assert a == b and a != c


LOSSY = '''
name = "lossy"
description = "an ACL silently drops one device's topic: the run must fail"
[run]
settle_s = 1
[broker]
acl = ["topic readwrite sim/#", "topic deny sim/+/lossy-cp000"]
[[devices]]
prefix = "lossy"
count = 2
qos = 1
version = 4
n = 5
'''


def test_broken_guarantee_gives_nonzero_exit(tmp_path):
    sc = tmp_path / "lossy.toml"
    sc.write_text(LOSSY)
    p = subprocess.run([sys.executable, "-m", "host_sim", "run", str(sc), "--out",
                        str(tmp_path / "t"), "--quiet"], capture_output=True, text=True,
                       cwd=str(REPO), timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "QoS 1: 5 message(s) lost" in p.stdout, p.stdout
    assert list((tmp_path / "t").glob("run=lossy-*/published/*.parquet"))


def test_micropython_device_processes(tmp_path):
    # the firmware's client in unix-port processes, with simulated sensors
    code, r = run("micropython", seed=2, out=str(tmp_path), quiet=True)
    assert code == 0, r["broken"]
    pub = traces.read(r["root"], "published")
    assert len(pub) == 4 * 40 and {x["runtime"] for x in pub} == {"micropython"}
    assert {x["mqtt_version"] for x in pub} == {4, 5} and {x["qos"] for x in pub} == {1, 2}
    assert r["link_cuts"] > 0 and any(x["attempts"] > 1 for x in pub)
    assert r["summary"]["2"]["duplicated"] == 0 and r["summary"]["1"]["lost"] == 0
