"""Command line: audit (Spark), collect (MQTT -> Parquet), stream (Spark
Structured Streaming windows over collected files), gen (synthetic traces)."""
import argparse
import json
import os
import sys

from . import broker

EXIT_VIOLATIONS = 3  # the audit found a broken QoS 1/2 guarantee
EXIT_USAGE = 2       # bad input: missing or empty traces, a broker that cannot be reached, ...
SPARK_LOG = "spark.log"  # Spark's own output, in the --out folder unless -v


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pipeline")
    sub = ap.add_subparsers(dest="cmd", required=True)

    # Defaults in --help; no abbreviated options (--pass would be --password-file).
    shown = dict(formatter_class=_ShowDefaults, allow_abbrev=False)
    a = sub.add_parser("audit", help="delivery audit + telemetry analytics + report", **shown)
    a.add_argument("--traces", required=True, help="directory holding run=<id>/ folders")
    a.add_argument("--out", required=True, help="report directory")
    a.add_argument("--master", default=None, help="Spark master (default local[*])")
    a.add_argument("--windows", default="1m,1h", help="tumbling window widths, e.g. 1m,1h")
    a.add_argument("--expiry-slack-ms", type=int, default=1000,
                   help="delivery this long after the expiry still counts as in time")
    a.add_argument("--no-plots", action="store_true", help="summary.json only, no HTML")
    a.add_argument("-v", "--verbose", action="store_true",
                   help="Spark's own log on stderr (else in OUT/%s)" % SPARK_LOG)

    c = sub.add_parser("collect", help="subscribe and append received telemetry as Parquet",
                       **shown)
    broker.add_arguments(c)
    c.add_argument("--topic", default="#", help="topic filter (QoS 1)")
    c.add_argument("--out", required=True, help="traces directory (writes run=<id>/received)")
    c.add_argument("--run-id", default="live", help="the run=<id> folder written")
    c.add_argument("--client-id", default="pipeline-collect",
                   help="client id of the persistent session")
    c.add_argument("--batch", type=int, default=500, help="rows per Parquet file at most")
    c.add_argument("--idle-ms", type=int, default=200,
                   help="write the batch when nothing arrived for this long")
    c.add_argument("--max-age-ms", type=int, default=2000, help="write a batch this old")
    c.add_argument("--duration-s", type=float, default=0, help="stop after this (0: never)")
    c.add_argument("--count", type=int, default=0, help="stop after this many rows (0: never)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    s = sub.add_parser("stream", help="keep per-sensor windows current over collected files "
                       "or straight from the broker", **shown)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--traces", help="read the files collected under this directory")
    src.add_argument("--mqtt", metavar="HOST[:PORT]", type=broker.parse_address,
                     help="read the broker (the `mqtt` source: at-least-once, persistent session)")
    s.add_argument("--out", required=True, help="windows_<w>/ and _checkpoints/ go here")
    s.add_argument("--master", default=None, help="Spark master (default local[*])")
    s.add_argument("--windows", default="1m,1h", help="tumbling window widths")
    s.add_argument("--every-s", type=float, default=10, help="micro-batch interval")
    s.add_argument("--watermark", default="1h",
                   help="how late a reading may arrive and still be deduplicated")
    s.add_argument("--once", action="store_true", help="process what is there, then stop")
    s.add_argument("-v", "--verbose", action="store_true",
                   help="Spark's own log on stderr (else in OUT/%s)" % SPARK_LOG)
    s.add_argument("--topic", default="#", help="with --mqtt: the topic filter")
    s.add_argument("--client-id", default="pipeline-stream",
                   help="with --mqtt: session id prefix (one session per window width)")
    broker.add_arguments(s, address=False)

    g = sub.add_parser("gen", help="synthetic traces with known faults (for the benchmark)")
    g.add_argument("--out", required=True)
    g.add_argument("--rows", type=int, required=True, help="received rows, about")
    g.add_argument("--devices", type=int, default=1000)
    g.add_argument("--seed", type=int, default=1)

    args = ap.parse_args(argv)
    return globals()["_" + args.cmd](args)


class _ShowDefaults(argparse.HelpFormatter):
    """--help shows an option's default where it has one."""

    def _get_help_string(self, action):
        if (not action.help or action.default in (None, False, argparse.SUPPRESS)
                or "%(default)" in action.help):
            return action.help
        return action.help + " (default: %(default)s)"


def _widths(text):
    return tuple(w.strip() for w in text.split(",") if w.strip())


def _session(args, app):
    """The SparkSession for a command; its own output goes to OUT/spark.log
    unless -v."""
    from pipeline import spark
    os.makedirs(args.out, exist_ok=True)
    size = sum(os.path.getsize(os.path.join(d, f))
               for d, _, files in os.walk(args.traces) for f in files) \
        if args.traces else None
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
        return _fail("audit", e)
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
    try:
        n = collect.Collector(broker.from_args(args), args.topic, args.out, args.run_id,
                              args.client_id, args.batch, args.idle_ms, args.max_age_ms).run(
            args.duration_s, args.count, progress=not args.no_progress)
    except broker.BrokerError as e:
        return _fail("collect", e)
    print("collected %d rows into %s" % (n, args.out))
    return 0


def _stream(args):
    from pipeline import job, stream
    mqtt = None
    if args.traces:
        try:
            job.check_input(args.traces, ("received",))
        except job.NoInput as e:
            return _fail("stream", e)
    else:
        b = broker.from_args(args, *args.mqtt)
        try:  # fail in one line before Spark starts (a session of its own: ours untouched)
            check = b.client(args.client_id + "-check")
            b.connect(check)
            check.disconnect()
        except broker.BrokerError as e:
            return _fail("stream", e)
        mqtt = (b, args.topic, args.client_id)
    s = _session(args, "frugalmqtt-stream")
    try:
        stream.run(s, args.traces, args.out, _widths(args.windows), args.every_s, args.once,
                   mqtt, args.watermark)
    finally:
        s.stop()
    return 0


def _fail(cmd, error):
    print("pipeline %s: %s" % (cmd, error), file=sys.stderr)
    return EXIT_USAGE


def _gen(args):
    from pipeline import gen
    print(json.dumps(gen.generate(args.out, args.rows, args.devices, args.seed)))
    return 0
