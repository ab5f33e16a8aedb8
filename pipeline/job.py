"""The audit job: read traces, audit deliveries, compute telemetry windows and
gaps, write the report. Runs the same under `python -m pipeline audit` and
spark-submit (only the master changes).

Two Spark actions do the heavy work, neither caches anything nor brings a
large frame to the driver:
1. the audit: every level of the audit tables, the violations, the latency
   histogram and the sequence gaps, in one collect of a few thousand rows;
2. the windows: every width in one write (Parquet, partitioned by width,
   then moved to OUT/windows_<w>/).
The report then reads only small things: the collected rows and the
busiest sensor's windows (and its raw readings when they are few)."""
import glob
import json
import os
import shutil

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

    step("audit")
    tables, viol, latency, gaps = _audit(pub, rcv, expiry_slack_ms)
    step("windows")
    windows = _write_windows(analytics.telemetry(rcv), widths, out)

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
        series = _busiest_series(spark, rcv, windows, widths)
        report.write(out, summary, tables, gaps, latency, series)
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=str)
    return summary


def _audit(pub, rcv, expiry_slack_ms):
    """The audit levels, violations, latency histogram (per QoS) and gaps, as
    pandas frames from one Spark query."""
    hist = audit.histogram(audit.facts(pub, rcv, expiry_slack_ms))
    sets = dict(audit.LEVELS, violations=audit.VIOLATION_KEYS, latency=audit.LATENCY_KEYS)
    gaps = analytics.gaps(analytics.telemetry(rcv)).withColumn("level", F.lit("gaps"))
    rows = audit.levels(hist, sets).unionByName(gaps, allowMissingColumns=True).toPandas()
    tables = audit.split(rows, sets)
    latency = tables.pop("latency")
    latency = latency[latency["latency_ms"].notna()][["qos", "latency_ms", "rows"]]
    viol = audit.violation_rows(tables.pop("violations"))
    keys = ["run_id", "device", "sensor", "first_missing"]
    gaps = rows[rows["level"] == "gaps"][keys + ["last_missing", "missing"]]
    gaps = gaps.astype({c: "int64" for c in ("first_missing", "last_missing", "missing")})
    return tables, viol, latency, gaps.sort_values(keys).reset_index(drop=True)


def _write_windows(tel, widths, out):
    """Every width's windows in one write; returns {width: {path, rows}}."""
    both = None
    for w in widths:
        one = analytics.windows(tel, w).withColumn("width", F.lit(w))
        both = one if both is None else both.unionByName(one)
    tmp = os.path.join(out, "_windows")
    (both.sortWithinPartitions("width", "run_id", "device", "sensor", "start")
     .write.mode("overwrite").partitionBy("width").parquet(tmp))
    result = {}
    for w in widths:
        path = os.path.join(out, "windows_%s" % w)
        shutil.rmtree(path, ignore_errors=True)
        src = os.path.join(tmp, "width=%s" % w)
        if os.path.isdir(src):
            os.rename(src, path)
        else:  # no telemetry at all: an empty table with the schema
            analytics.windows(tel.limit(0), w).write.mode("overwrite").parquet(path)
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


def _busiest_series(spark, rcv, windows, widths):
    """The sensor with the most messages: its windows of the narrowest
    width over its whole history, and its raw readings when there are at
    most SERIES_POINTS of them (a Parquet read of one device's rows)."""
    path = windows[widths[0]]["path"]
    if not windows[widths[0]]["rows"]:
        return None
    w = spark.read.parquet(path)
    top = (w.groupBy("run_id", "device", "sensor").agg(F.sum("count").alias("n"))
           .orderBy(F.desc("n"), "run_id", "device", "sensor").limit(1).collect()[0])
    one = ((F.col("run_id") == top.run_id) & (F.col("device") == top.device)
           & (F.col("sensor") == top.sensor))
    win = w.where(one).select("start", "end", "count", "min", "max", "mean") \
        .orderBy("start").toPandas()
    raw = None
    if top.n <= SERIES_POINTS:
        raw = (analytics.readings(rcv).where(one).dropDuplicates(audit.MESSAGE)
               .select("ts", "value").orderBy("ts").toPandas())
    return {"run_id": top.run_id, "device": top.device, "sensor": top.sensor,
            "width": widths[0], "messages": int(top.n), "raw": raw, "windows": win}
