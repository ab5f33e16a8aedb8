"""Delivery audit and telemetry analytics on hand-built traces with known answers."""
import json
import os
import subprocess
import sys

import pytest

from pipeline import analytics, audit, job, traces
from tracekit import T0, pub, rcv, write_run


def build(tmp):
    """Run r1 (subscriber s1 at QoS 2) and run r2 (subscriber s0 at QoS 0).

    r1/d1 QoS 1, seq 0..4, 20 s apart, latencies 10/20/30/40 ms: seq 4 lost,
       seq 1 delivered twice (DUP), seq 2 arrives after seq 3 (by arrival
       counter; its timestamp is earlier).
    r1/d2 QoS 2, seq 0..3, 1 s apart: seq 0 twice, seq 1 (expiry 1 s) arrives
       after 2.5 s, seq 2 (expiry 5 s) after 3 s, seq 3 never acked nor received.
    r1/d3 QoS 0 "sent", seq 0..2: seq 1 never received.
    r1: one stray message (device dX, never published) and one unparsed payload.
    r2/e1 QoS 1, seq 0..5 acked; subscriber s0 at QoS 0 got 0, 1, 4, 5.
    """
    p1 = [pub("r1", "d1", s, 1, T0 + s * 20000) for s in range(5)]
    p1 += [pub("r1", "d2", s, 2, T0 + s * 1000, profile="flaky",
               outcome="pending" if s == 3 else "acked",
               expiry_s={1: 1, 2: 5}.get(s)) for s in range(4)]
    p1 += [pub("r1", "d3", s, 0, T0 + s * 1000, outcome="sent", profile="flaky")
           for s in range(3)]

    def d(dev, seq, lat, qos, **kw):
        t = {"d1": T0 + seq * 20000, "d2": T0 + seq * 1000, "d3": T0 + seq * 1000,
             "dX": T0}[dev]
        return dev, seq, qos, t + lat, t, kw

    arrivals = [d("d1", 0, 10, 1), d("d2", 0, 100, 2), d("d1", 1, 20, 1), d("d3", 0, 5, 0),
                d("d1", 3, 40, 1), d("d2", 0, 200, 2, dup=True), d("d1", 2, 30, 1),
                d("d1", 1, 500, 1, dup=True), d("d2", 1, 2500, 2), d("d2", 2, 3000, 2),
                d("d3", 2, 7, 0), d("dX", 0, 1, 1)]
    r1 = [rcv("r1", "s1", i, dev, seq, qos, t_recv, t_dev, value=10.0 + seq, **kw)
          for i, (dev, seq, qos, t_recv, t_dev, kw) in enumerate(arrivals)]
    r1.append(rcv("r1", "s1", len(r1), None, None, 1, T0 + 99))  # unparsed payload
    write_run(tmp, "r1", p1, r1, parts=3)

    p2 = [pub("r2", "e1", s, 1, T0 + s * 1000, profile="none") for s in range(6)]
    r2 = [rcv("r2", "s0", i, "e1", s, 0, T0 + s * 1000 + 50, T0 + s * 1000, sub_qos=0,
              value=float(s)) for i, s in enumerate([0, 1, 4, 5])]
    write_run(tmp, "r2", p2, r2)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("traces"))
    build(tmp)
    return tmp


@pytest.fixture(scope="module")
def tables(spark, trace_dir):
    tmp = trace_dir
    p = traces.read(spark, tmp, "published")
    r = traces.read(spark, tmp, "received")
    f = audit.facts(p, r).cache()
    yield p, r, f
    f.unpersist()


def rows(df, *keys):
    key = (lambda x: getattr(x, keys[0])) if len(keys) == 1 else \
        (lambda x: tuple(getattr(x, k) for k in keys))
    return {key(x): x.asDict() for x in df.collect()}


def test_reads_every_file_with_the_shared_schema(tables):
    p, r, _ = tables
    assert p.count() == 12 + 6
    assert r.count() == 13 + 4
    assert dict(r.dtypes)["qos"] == "tinyint" and dict(p.dtypes)["attempts"] == "smallint"


def test_counts_per_qos(tables):
    t = rows(audit.summarize(tables[2], audit.LEVELS["qos"]), "run_id", "qos")
    q0, q1, q2 = t["r1", 0], t["r1", 1], t["r1", 2]
    assert (q0["published"], q0["promised"], q0["delivered"], q0["lost"]) == (3, 3, 2, 1)
    assert (q1["published"], q1["delivered"], q1["lost"], q1["duplicates"]) == (5, 4, 1, 1)
    assert (q1["order_violations"], q1["dup_flagged"], q1["stray"]) == (1, 1, 1)
    assert (q2["published"], q2["promised"], q2["delivered"], q2["lost"]) == (4, 3, 3, 0)
    assert (q2["duplicates"], q2["dup_flagged"], q2["late_expiry"]) == (1, 1, 1)
    assert q2["order_violations"] == 0 and q0["late_expiry"] == 0
    # r2: QoS 1 published to a QoS 0 subscription is delivered at QoS 0
    assert (t["r2", 0]["published"], t["r2", 0]["lost"]) == (6, 2)
    assert set(t) == {("r1", 0), ("r1", 1), ("r1", 2), ("r2", 0)}


def test_latency_percentiles_of_first_deliveries(tables):
    t = rows(audit.summarize(tables[2], audit.LEVELS["qos"]), "run_id", "qos")
    q1 = t["r1", 1]  # d1: 10, 20, 30, 40 (the stray has no latency; the DUP copy is later)
    assert (q1["lat_p50_ms"], q1["lat_p95_ms"], q1["lat_p99_ms"], q1["lat_max_ms"]) == \
        pytest.approx((25.0, 38.5, 39.7, 40))
    q2 = t["r1", 2]  # d2: 100, 2500, 3000
    assert (q2["lat_p50_ms"], q2["lat_max_ms"]) == (2500.0, 3000)


def test_counts_per_fault_profile_and_device(tables):
    f = tables[2]
    prof = rows(audit.summarize(f, audit.LEVELS["profile"]), "run_id", "fault_profile", "qos")
    assert prof["r1", "flaky", 2]["duplicates"] == 1
    assert prof["r1", "flaky", 0]["lost"] == 1
    assert prof["r1", "none", 1]["lost"] == 1
    assert prof["r1", audit.UNKNOWN, 1]["stray"] == 1
    dev = rows(audit.summarize(f, audit.LEVELS["device"]), "run_id", "device")
    assert (dev["r1", "d1"]["order_violations"], dev["r1", "d1"]["lost"]) == (1, 1)
    assert dev["r1", "d2"]["late_expiry"] == 1 and dev["r1", "d3"]["lost"] == 1
    run = rows(audit.summarize(f, audit.LEVELS["run"]), "run_id")
    assert (run["r1"]["published"], run["r1"]["lost"], run["r1"]["duplicates"]) == (12, 2, 2)


def test_expiry_slack_decides_lateness(tables, spark):
    p, r, _ = tables
    strict = audit.facts(p, r, expiry_slack_ms=0)
    t = rows(audit.summarize(strict, audit.LEVELS["qos"]), "run_id", "qos")
    assert t["r1", 2]["late_expiry"] == 1  # seq 2: 3 s < 5 s stays in time
    loose = audit.facts(p, r, expiry_slack_ms=2000)
    assert rows(audit.summarize(loose, audit.LEVELS["qos"]), "run_id", "qos")[
        "r1", 2]["late_expiry"] == 0


def test_violations_are_qos1_loss_and_qos2_loss_or_duplicates(tables):
    v = audit.violations(tables[2])
    assert v == [
        {"run_id": "r1", "subscriber": "s1", "qos": 1, "kind": "lost", "count": 1},
        {"run_id": "r1", "subscriber": "s1", "qos": 2, "kind": "duplicates", "count": 1},
    ]


def test_tumbling_windows_per_sensor(tables):
    tel = analytics.telemetry(tables[1])
    m = rows(analytics.windows(tel, "1m"), "run_id", "device", "start")
    import datetime as dt
    t0 = dt.datetime(2026, 1, 1)
    w0, w1 = m["r1", "d1", t0], m["r1", "d1", t0 + dt.timedelta(minutes=1)]
    assert (w0["count"], w0["min"], w0["max"], w0["mean"]) == (3, 10.0, 12.0, 11.0)
    assert (w1["count"], w1["min"], w1["max"], w1["mean"]) == (1, 13.0, 13.0, 13.0)
    h = rows(analytics.windows(tel, "1h"), "run_id", "device", "start")
    assert (h["r1", "d1", t0]["count"], h["r1", "d1", t0]["mean"]) == (4, 11.5)
    assert h["r1", "d2", t0]["count"] == 3  # the DUP copy of seq 0 counts once
    assert ("r1", "dX", t0) in h and ("r1", None, t0) not in h


def test_batch_windows_are_the_stream_windows(tables, spark):
    """The job's windows (every width in one aggregation, keyed by the start
    in ms) and F.window's (the stream's): the same rows, boundaries and
    timestamps before 1970 too."""
    from pyspark.sql import functions as F
    tel = analytics.telemetry(tables[1])
    edge = spark.createDataFrame(
        [("r", "d", "t", t, float(i)) for i, t in enumerate(
            [-3600001, -120000, -60001, -60000, -1, 0, 59999, 60000, T0 - 1, T0])],
        "run_id string, device string, sensor string, ms long, value double"
    ).select("run_id", "device", "sensor", "value", F.timestamp_millis("ms").alias("ts"))
    widths = ("1m", "1h", "90s", "1d")
    for t in (tel, edge):
        got = analytics.batch_windows(t, widths)
        assert got.columns == analytics.WINDOW_COLUMNS + ["width"]
        for w in widths:
            one = got.where(got.width == w).drop("width")
            assert one.schema == analytics.windows(t, w).schema
            assert sorted(one.collect()) == sorted(analytics.windows(t, w).collect())
    assert analytics.width_ms("90s") == 90000 and analytics.width_ms("2h") == 7200000
    with pytest.raises(ValueError):
        analytics.width_ms("5x")


def test_sequence_gaps(tables):
    g = sorted(tuple(x) for x in analytics.gaps(analytics.telemetry(tables[1])).collect())
    assert g == [("r1", "d3", "temp", 1, 1, 1), ("r2", "e1", "temp", 2, 3, 2)]


def test_collected_rows_without_published_are_strays(spark, tmp_path):
    # what `pipeline collect` writes: received rows only
    write_run(str(tmp_path), "live", [], [rcv("live", "c", i, "d1", i, 1, T0 + i) for i in range(3)])
    p = traces.read(spark, str(tmp_path), "published")
    assert p.count() == 0 and p.schema == traces.read(spark, str(tmp_path / "none"),
                                                      "published").schema
    f = audit.facts(p, traces.read(spark, str(tmp_path / "run=live"), "received"))
    run = rows(audit.summarize(f, audit.LEVELS["run"]), "run_id")["live"]
    assert (run["published"], run["stray"], run["lost"]) == (0, 3, 0)
    assert audit.violations(f) == []


def test_window_width_parsing():
    assert analytics.interval("1m") == "1 minutes"
    assert analytics.interval("90s") == "90 seconds"
    with pytest.raises(ValueError):
        analytics.interval("1 fortnight")


def test_job_writes_report_plots_and_summary(spark, trace_dir, tmp_path):
    out = str(tmp_path / "report")
    summary = job.run(spark, trace_dir, out, ("1m", "1h"))
    assert summary["ok"] is False and len(summary["violations"]) == 2
    for name in ("report.html", "latency.png", "profiles.png", "series.png", "summary.json"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    with open(os.path.join(out, "summary.json")) as fh:
        saved = json.load(fh)
    assert saved["violations"] == summary["violations"]
    assert [r["lost"] for r in saved["runs"]] == [2, 2]
    assert saved["windows"]["1m"]["rows"] == 2 + 1 + 1 + 1 + 1  # d1, d2, d3, dX, e1
    page = open(os.path.join(out, "report.html")).read()
    assert "Violations" in page and "<img src=latency.png>" in page


def test_spark_submit_runs_the_same_job_and_exits_nonzero_on_violations(trace_dir, tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "firmware")]),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    out = str(tmp_path / "submitted")
    fast = ["--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
            "--driver-java-options", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"]
    p = subprocess.run([submit, "--master", "local[2]", *fast,
                        os.path.join(root, "pipeline", "__main__.py"), "audit",
                        "--traces", trace_dir, "--out", out, "--no-plots"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr[-3000:]
    assert "VIOLATION run r1 subscriber s1 QoS 2: 1 duplicates" in p.stdout
    with open(os.path.join(out, "summary.json")) as fh:
        assert [r["published"] for r in json.load(fh)["runs"]] == [12, 6]
