"""Command line: audit (Spark), collect (MQTT -> Parquet), stream (Spark
Structured Streaming windows over collected files), gen (synthetic traces)."""
import argparse
import json
import os
import sys

EXIT_VIOLATIONS = 3  # the audit found a broken QoS 1/2 guarantee
EXIT_USAGE = 2       # missing or empty input (argparse uses 2 for bad arguments too)
SPARK_LOG = "spark.log"  # Spark's own output, in the --out folder unless -v


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pipeline")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def parser(name, help):
        return sub.add_parser(name, help=help,
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter)

    a = parser("audit", "delivery audit + telemetry analytics + report")
    a.add_argument("--traces", required=True, help="directory holding run=<id>/ folders")
    a.add_argument("--out", required=True, help="report directory")
    a.add_argument("--master", default=None, help="Spark master (default local[*])")
    a.add_argument("--windows", default="1m,1h", help="tumbling window widths, e.g. 1m,1h")
    a.add_argument("--expiry-slack-ms", type=int, default=1000,
                   help="delivery this long after the expiry still counts as in time")
    a.add_argument("--no-plots", action="store_true", help="summary.json only, no HTML")
    a.add_argument("-v", "--verbose", action="store_true",
                   help="Spark's own log on stderr (else in OUT/%s)" % SPARK_LOG)

    c = parser("collect", "subscribe and append received telemetry as Parquet")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, default=1883)
    c.add_argument("--topic", default="#")
    c.add_argument("--out", required=True, help="traces directory (writes run=<id>/received)")
    c.add_argument("--run-id", default="live")
    c.add_argument("--client-id", default="pipeline-collect")
    c.add_argument("--batch", type=int, default=500, help="rows per Parquet file at most")
    c.add_argument("--idle-ms", type=int, default=200,
                   help="write the batch when nothing arrived for this long")
    c.add_argument("--max-age-ms", type=int, default=2000, help="write a batch this old")
    c.add_argument("--duration-s", type=float, default=0, help="stop after this (0: never)")
    c.add_argument("--count", type=int, default=0, help="stop after this many rows (0: never)")

    s = parser("stream", "keep per-sensor windows current over collected files")
    s.add_argument("--traces", required=True, help="directory holding run=<id>/received")
    s.add_argument("--out", required=True, help="windows_<w>/ and _checkpoints/ go here")
    s.add_argument("--master", default=None, help="Spark master (default local[*])")
    s.add_argument("--windows", default="1m,1h", help="tumbling window widths")
    s.add_argument("--every-s", type=float, default=10, help="micro-batch interval")
    s.add_argument("--watermark", default="1h",
                   help="how late a reading may arrive and still be deduplicated")
    s.add_argument("--once", action="store_true", help="process what is there, then stop")
    s.add_argument("-v", "--verbose", action="store_true",
                   help="Spark's own log on stderr (else in OUT/%s)" % SPARK_LOG)

    g = parser("gen", "synthetic traces with known faults (for the benchmark)")
    g.add_argument("--out", required=True)
    g.add_argument("--rows", type=int, required=True, help="received rows, about")
    g.add_argument("--devices", type=int, default=1000)
    g.add_argument("--seed", type=int, default=1)

    args = ap.parse_args(argv)
    return globals()["_" + args.cmd](args)


def _widths(text):
    return tuple(w.strip() for w in text.split(",") if w.strip())


def _fail(args, message):
    print("pipeline %s: %s" % (args.cmd, message), file=sys.stderr)
    return EXIT_USAGE


def _session(args, app):
    """The SparkSession for a command; its own output goes to OUT/spark.log
    unless -v."""
    from pipeline import spark
    os.makedirs(args.out, exist_ok=True)
    size = sum(os.path.getsize(os.path.join(d, f))
               for d, _, files in os.walk(args.traces) for f in files)
    if args.verbose:
        return spark.session(args.master, app=app, level="WARN", input_bytes=size)
    return spark.session(args.master, app=app, log=os.path.join(args.out, SPARK_LOG),
                         input_bytes=size)


def _audit(args):
    from tqdm import tqdm

    from pipeline import job
    try:
        job.check_input(args.traces)
    except job.NoInput as e:
        return _fail(args, e)
    stages = ["spark"] + ["audit", "windows"] + ([] if args.no_plots else ["report"])
    with tqdm(total=len(stages), desc="spark", unit="stage", file=sys.stderr,
              bar_format="{desc:<8} {n_fmt}/{total_fmt} stages {elapsed}") as bar:
        s = _session(args, "frugalmqtt-audit")

        def stage(name):
            bar.update()
            bar.set_description(name)
        try:
            summary = job.run(s, args.traces, args.out, _widths(args.windows),
                              args.expiry_slack_ms, plots=not args.no_plots, progress=stage)
            bar.update()
            bar.set_description("done")
        finally:
            s.stop()
    print_summary(summary)
    return 0 if summary["ok"] else EXIT_VIOLATIONS


def print_summary(summary):
    cols = ("published", "delivered", "lost", "duplicates", "order_violations",
            "late_expiry", "dup_flagged", "lat_p50_ms", "lat_p99_ms", "lat_max_ms")
    width = max([len("run")] + [len(r["run_id"]) for r in summary["by_qos"]])
    print("%-*s qos " % (width, "run") + " ".join("%10s" % c[:10] for c in cols))
    for r in summary["by_qos"]:
        print("%-*s %3s " % (width, r["run_id"], r["qos"])
              + " ".join("%10s" % _fmt(r[c]) for c in cols))
    for v in summary["violations"]:
        print("VIOLATION run %(run_id)s subscriber %(subscriber)s QoS %(qos)s: %(count)s %(kind)s"
              % v)
    print("gaps: %d, windows: %s" % (len(summary["gaps"]), json.dumps(
        {w: v["rows"] for w, v in summary["windows"].items()})))
    if summary["report"]:
        print("report: %s" % summary["report"])


def _fmt(v):
    return "-" if v is None else ("%.0f" % v if isinstance(v, float) else str(v))


def _collect(args):
    from pipeline import collect
    n = collect.Collector(args.host, args.port, args.topic, args.out, args.run_id,
                          args.client_id, args.batch, args.idle_ms, args.max_age_ms).run(
        args.duration_s, args.count)
    print("collected %d rows into %s" % (n, args.out))
    return 0


def _stream(args):
    from pipeline import job, stream
    try:
        job.check_input(args.traces, ("received",))
    except job.NoInput as e:
        return _fail(args, e)
    s = _session(args, "frugalmqtt-stream")
    try:
        stream.run(s, args.traces, args.out, _widths(args.windows), args.every_s, args.once,
                   args.watermark)
    finally:
        s.stop()
    return 0


def _gen(args):
    from pipeline import gen
    print(json.dumps(gen.generate(args.out, args.rows, args.devices, args.seed)))
    return 0
