"""The synthetic trace generator and the audit agree on every injected fault
(200 000 rows: the audit at a size where counting mistakes show)."""
from pipeline import audit, gen, traces


def test_audit_finds_the_generated_faults(spark, tmp_path):
    out = str(tmp_path / "gen")
    want = gen.generate(out, rows=200000, devices=90, seed=1)
    assert min(want[k] for k in ("lost", "duplicates", "order_violations", "late_expiry")) > 0
    f = audit.facts(traces.read(spark, out, "published"), traces.read(spark, out, "received"))
    run = audit.summarize(f, audit.LEVELS["run"]).collect()[0]
    got = {k: run[k] for k in ("published", "lost", "duplicates", "dup_flagged",
                               "order_violations", "late_expiry")}
    assert got == {k: want[k] for k in got}
    assert run["delivered"] == want["published"] - want["lost"]
    v = {(x["qos"], x["kind"]): x["count"] for x in audit.violations(f)}
    assert v.get((1, "lost"), 0) == want["lost_qos1"]
    assert v.get((2, "lost"), 0) == want["lost_qos2"] and v[(2, "duplicates")] == want["duplicates_qos2"] > 0
