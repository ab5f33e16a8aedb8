"""The audit job: read traces, audit deliveries, compute telemetry windows and
gaps, write the report. Runs the same under `python -m pipeline audit` and
spark-submit (only the master changes).

No large frame comes to the driver. The published rows are read once (and
two of their columns once more: the audit's runtime and fault-profile
codes, broadcast); the received rows three times (the subscriber list,
three columns, broadcast inside the audit query; the audit; the telemetry).
The audit groups one union of both inputs, shuffled once: no join. The telemetry,
deduplicated per message, partitioned by (run, device) and sorted for the
gaps pass (analytics.telemetry, _cache_telemetry), is the one thing cached:
the gaps, the windows and the report's series read it, none shuffles or
sorts again.
1. the audit: every level of the audit tables, the violations, the latency
   histogram, the sequence gaps and the messages per sensor, in one collect
   of a few thousand rows (it also fills the telemetry cache);
2. the windows: every width in one write (Parquet, partitioned by width,
   then moved to OUT/windows_<w>/), from the cache in one aggregation
   of every width, each window keyed by its start in milliseconds
   (analytics.batch_windows: the stream's F.window rows, a flat key);
3. the report: the busiest sensor's windows and, when they are few, its
   raw readings, in one small query over the cache."""
import glob
import json
import os
import shutil

from pyspark import StorageLevel
from pyspark.sql import functions as F

from . import analytics, audit, report, traces

SERIES_POINTS = 5000  # raw readings plotted at most (more: the windows only)


class NoInput(Exception):
    """The traces hold nothing to work on (the CLI's exit 2)."""


def check_input(traces_dir, tables=("published", "received")):
    """Raise NoInput with one line saying what is missing, unless some run
    under traces_dir has a Parquet file of one of `tables`."""
    if not os.path.isdir(traces_dir):
        raise NoInput("no traces directory %s" % traces_dir)
    runs = traces.runs(traces_dir)
    if not any(glob.glob(os.path.join(runs, t, "**", "*.parquet"), recursive=True)
               for t in tables):
        raise NoInput("no %s Parquet files under %s" % (
            " or ".join(tables), os.path.join(runs, "{%s}" % ",".join(tables))))


def run(spark, traces_dir, out, widths=analytics.DEFAULT_WINDOWS, expiry_slack_ms=1000,
        plots=True, progress=None):
    """Audit everything under traces_dir into out/; returns the summary dict
    (also written to out/summary.json). summary["violations"] lists broken
    guarantees; the caller turns them into the exit status. `progress`, if
    given, is called with the name of each stage as it starts."""
    step = progress or (lambda name: None)
    check_input(traces_dir)
    os.makedirs(out, exist_ok=True)
    pub = traces.read(spark, traces_dir, "published")
    rcv = traces.read(spark, traces_dir, "received")
    tel = _cache_telemetry(rcv)
    try:
        return _run(tel, pub, rcv, traces_dir, out, widths, expiry_slack_ms, plots, step)
    finally:
        tel.unpersist()


def _cache_telemetry(rcv):
    """The deduplicated telemetry, cached partitioned by (run, device) and
    sorted by analytics.SEQUENCE_ORDER within each partition, both known to
    the queries that read it: the sequence pass neither shuffles nor sorts,
    the windows aggregate without a shuffle. Adaptive execution is off while
    the cache is planned (an adaptive plan hides its partitioning and order
    until it has run), on again for every query."""
    spark = rcv.sparkSession
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        return (analytics.telemetry(rcv).sortWithinPartitions(*analytics.SEQUENCE_ORDER)
                .persist(StorageLevel.MEMORY_AND_DISK))
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)


def _run(tel, pub, rcv, traces_dir, out, widths, expiry_slack_ms, plots, step):
    step("audit")
    tables, viol, latency, gaps, sensors = _audit(pub, rcv, tel, expiry_slack_ms)
    step("windows")
    windows = _write_windows(tel, widths, out)

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
        step("report")
        series = _busiest_series(tel, sensors, widths[0])
        report.write(out, summary, tables, gaps, latency, series)
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=str)
    return summary


def _audit(pub, rcv, tel, expiry_slack_ms):
    """The audit levels, violations, latency histogram (per QoS), gaps and
    telemetry messages per sensor, as pandas frames from one Spark query."""
    hist = audit.histogram(audit.facts(pub, rcv, expiry_slack_ms))
    sets = dict(audit.LEVELS, violations=audit.VIOLATION_KEYS, latency=audit.LATENCY_KEYS)
    seqs = analytics.sequences(tel).withColumn("level", F.lit("sequences"))
    rows = audit.levels(hist, sets).unionByName(seqs, allowMissingColumns=True).toPandas()
    tables = audit.split(rows, sets)
    latency = tables.pop("latency")
    latency = latency[latency["latency_ms"].notna()][["qos", "latency_ms", "rows"]]
    viol = audit.violation_rows(tables.pop("violations"))
    seqs = rows[rows["level"] == "sequences"]
    keys = ["run_id", "device", "sensor", "first_missing"]
    gaps = seqs[seqs["missing"].notna()][keys + ["last_missing", "missing"]]
    gaps = gaps.astype({c: "int64" for c in ("first_missing", "last_missing", "missing")})
    sensors = seqs[seqs["messages"].notna()][["run_id", "device", "sensor", "messages"]]
    return (tables, viol, latency, gaps.sort_values(keys).reset_index(drop=True),
            sensors.astype({"messages": "int64"}))


def _write_windows(tel, widths, out):
    """Every width's windows in one write; returns {width: {path, rows}}."""
    both = analytics.batch_windows(tel, widths)
    tmp = os.path.join(out, "_windows")
    # The cache keeps every shuffle partition: a few files per core, not one per partition.
    (both.coalesce(tel.sparkSession.sparkContext.defaultParallelism)
     .sortWithinPartitions("width", "run_id", "device", "sensor", "start")
     .write.mode("overwrite").partitionBy("width").parquet(tmp))
    result = {}
    for w in widths:
        path = os.path.join(out, "windows_%s" % w)
        shutil.rmtree(path, ignore_errors=True)
        src = os.path.join(tmp, "width=%s" % w)
        if os.path.isdir(src):
            os.rename(src, path)
        else:  # no telemetry at all: an empty table with the schema
            (analytics.batch_windows(tel.limit(0), [w]).drop("width")
             .write.mode("overwrite").parquet(path))
        result[w] = {"path": path, "rows": _parquet_rows(path)}
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def _parquet_rows(path):
    """Rows of a Parquet folder, from the files' footers."""
    import pyarrow.parquet as pq
    return sum(pq.ParquetFile(f).metadata.num_rows
               for f in glob.glob(os.path.join(path, "*.parquet")))


def _records(df):
    """pandas rows as plain dicts (ints stay ints, NaN becomes None)."""
    return json.loads(df.to_json(orient="records", date_format="iso"))


def _busiest_series(tel, sensors, width):
    """The sensor with the most messages (`sensors`: messages per run,
    device and sensor): its windows of `width` over its whole history, and its raw
    readings when there are at most SERIES_POINTS of them, in one query
    over the cached telemetry."""
    if not len(sensors):
        return None
    top = sensors.sort_values(["messages", "run_id", "device", "sensor"],
                              ascending=[False, True, True, True], kind="stable").iloc[0]
    n = int(top["messages"])
    one = tel.where((F.col("run_id") == top["run_id"]) & (F.col("device") == top["device"])
                    & (F.col("sensor") == top["sensor"]))
    win = analytics.batch_windows(one, [width]).select(
        F.lit("window").alias("kind"), "start", "end", "count", "min", "max", "mean")
    if n <= SERIES_POINTS:
        win = win.unionByName(one.select(F.lit("raw").alias("kind"), "ts", "value"),
                              allowMissingColumns=True)
    both = win.toPandas()
    raw = None
    if n <= SERIES_POINTS:
        raw = both[both["kind"] == "raw"][["ts", "value"]].sort_values("ts", kind="stable")
        raw = raw.reset_index(drop=True)
    win = both[both["kind"] == "window"][["start", "end", "count", "min", "max", "mean"]]
    win = win.astype({"count": "int64"}).sort_values("start").reset_index(drop=True)
    return {"run_id": top["run_id"], "device": top["device"], "sensor": top["sensor"],
            "width": width, "messages": n, "raw": raw, "windows": win}
