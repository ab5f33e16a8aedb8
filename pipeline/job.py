"""The audit job: read traces, audit deliveries, compute telemetry windows and
gaps, write the report. Runs the same under `python -m pipeline audit` and
spark-submit (only the master changes)."""
import json
import os

from pyspark.sql import functions as F

from . import analytics, audit, report, traces

LATENCY_SAMPLE = 200000  # latencies brought to the driver for the plot
SERIES_POINTS = 5000     # points of the sensor time series plot


def run(spark, traces_dir, out, widths=analytics.DEFAULT_WINDOWS, expiry_slack_ms=1000,
        plots=True):
    """Audit everything under traces_dir into out/; returns the summary dict
    (also written to out/summary.json). summary["violations"] lists broken
    guarantees; the caller turns them into the exit status."""
    os.makedirs(out, exist_ok=True)
    pub = traces.read(spark, traces_dir, "published")
    rcv = traces.read(spark, traces_dir, "received").cache()
    f = audit.facts(pub, rcv, expiry_slack_ms).cache()
    tables = {lvl: audit.summarize(f, keys).toPandas() for lvl, keys in audit.LEVELS.items()}
    viol = audit.violations(f)

    tel = analytics.telemetry(rcv).cache()
    windows = {}
    for w in widths:
        path = os.path.join(out, "windows_%s" % w)
        analytics.windows(tel, w).write.mode("overwrite").parquet(path)
        windows[w] = {"path": path, "rows": spark.read.parquet(path).count()}
    gaps = analytics.gaps(rcv).toPandas()

    summary = {
        "traces": traces_dir,
        "report": os.path.abspath(os.path.join(out, "report.html")) if plots else None,
        "runs": _records(tables["run"]),
        "by_qos": _records(tables["qos"]),
        "by_fault_profile": _records(tables["profile"]),
        "by_device": _records(tables["device"]),
        "violations": viol,
        "ok": not viol,
        "windows": windows,
        "gaps": _records(gaps),
        "expiry_slack_ms": expiry_slack_ms,
    }
    if plots:
        lat = _latency_sample(f)
        series = _busiest_series(tel, widths[0])
        report.write(out, summary, tables, gaps, lat, series,
                     {w: spark.read.parquet(v["path"]).limit(50).toPandas()
                      for w, v in windows.items()})
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=str)
    f.unpersist()
    tel.unpersist()
    rcv.unpersist()
    return summary


def _records(df):
    """pandas rows as plain dicts (ints stay ints, NaN becomes None)."""
    return json.loads(df.to_json(orient="records", date_format="iso"))


def _latency_sample(f):
    d = f.where(F.col("latency_ms").isNotNull())
    n = d.count()
    if n > LATENCY_SAMPLE:
        d = d.sample(fraction=LATENCY_SAMPLE / n, seed=1)
    return d.select("qos", "latency_ms").toPandas()


def _busiest_series(tel, width):
    """(run, device, sensor), its raw values and its window means, for the
    sensor with the most messages."""
    top = tel.groupBy("run_id", "device", "sensor").count().orderBy(
        F.desc("count"), "run_id", "device", "sensor").limit(1).collect()
    if not top:
        return None
    key = top[0]
    one = tel.where((F.col("run_id") == key.run_id) & (F.col("device") == key.device)
                    & (F.col("sensor") == key.sensor))
    raw = one.orderBy("ts").select("ts", "value").limit(SERIES_POINTS).toPandas()
    win = analytics.windows(one, width).select("start", "end", "mean").limit(SERIES_POINTS).toPandas()
    return {"run_id": key.run_id, "device": key.device, "sensor": key.sensor,
            "width": width, "raw": raw, "windows": win}
