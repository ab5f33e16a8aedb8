"""A short real scenario through host_sim (mosquitto, devices, link faults)
and the audit: the Spark audit finds the numbers the simulator's own summary
(run.json "summary", per published QoS) reported."""
import glob
import json
import os
import subprocess
import sys

from pyspark.sql import functions as F

from pipeline import audit, traces

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = "basic"  # host_sim/scenarios/basic.toml: CPython devices, QoS 0/1/2, link cuts


def test_audit_matches_the_simulators_summary(spark, tmp_path):
    out = str(tmp_path / "traces")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "firmware")]))
    p = subprocess.run([sys.executable, "-m", "host_sim", "run", SCENARIO, "--out", out,
                        "--seed", "7", "--quiet"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode in (0, 1), p.stderr[-3000:]  # 1: the run broke a guarantee
    runs = glob.glob(os.path.join(out, "run=*"))
    assert len(runs) == 1, p.stdout[-2000:] + p.stderr[-3000:]
    run_dir = runs[0]
    with open(os.path.join(run_dir, "run.json")) as fh:
        sim = {int(q): s for q, s in json.load(fh)["summary"].items()}

    f = audit.facts(traces.read(spark, out, "published"), traces.read(spark, out, "received"))
    # host_sim counts by published QoS; its subscriber takes QoS 2, so the
    # delivery QoS is the published one.
    got = {r.qos: r for r in f.where("published").groupBy("qos").agg(
        F.count(F.lit(1)).alias("sent"),
        F.sum(F.col("delivered").cast("int")).alias("delivered"),
        F.sum((~F.col("delivered")).cast("int")).alias("not_delivered"),
        F.sum(F.col("promised").cast("int")).alias("promised"),
        F.sum((F.col("duplicates") > 0).cast("int")).alias("duplicated")).collect()}
    assert set(got) == set(sim)
    for q, s in sim.items():
        g = got[q]
        assert (g.sent, g.delivered, g.duplicated) == (s["sent"], s["delivered"], s["duplicated"])
        # host_sim's "lost" is every message never received; the audit's
        # "lost" leaves out messages never acknowledged (no promise was made)
        assert g.not_delivered == s["lost"]
        assert g.promised == (s["sent"] if q == 0 else s["acked"])
    assert sum(s["sent"] for s in sim.values()) > 0
