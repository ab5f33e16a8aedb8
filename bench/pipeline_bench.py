"""Pipeline benchmark (`make bench`): the delivery audit over 1e6 and 1e7
trace rows in Spark (local[*], this machine) beside the same audit in DuckDB
and Polars, the single-machine references, on the same traces in one run.
Wall time and peak memory (RSS of the whole process tree: python + JVM) per
engine, each in a fresh process; every engine's run totals are checked
against what the generator injected, and its tables (per QoS, fault profile
and device: every count and percentile) row for row against DuckDB's.

    .venv/bin/python bench/pipeline_bench.py [--sizes 1e6,1e7] [--no-job] [--out PATH]
                                             [--note "loaded machine: ..."]

Engines: "spark audit" = SparkSession + the audit tables (pipeline/audit.py),
"duckdb audit" = bench/duckdb_audit.py, "polars audit" = bench/polars_audit.py,
"spark job" = the whole `python -m pipeline audit` (audit + windows + gaps +
HTML/PNG report).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "firmware"), str(REPO / "bench")]
CHECK = ("published", "lost", "duplicates", "dup_flagged", "order_violations", "late_expiry")
COMPARE = {"by_qos": "qos", "by_fault_profile": "profile", "by_device": "device"}


def child(engine, traces):
    """Run one engine in this process; print its timings and tables."""
    t0 = time.time()
    if engine in ("duckdb", "polars"):
        mod = __import__(engine + "_audit")
        t1 = time.time()
        tables = mod.audit(traces)
    else:
        from pipeline import audit, spark, traces as tr
        s = spark.session(log=os.devnull, input_bytes=sum(
            os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(traces) for f in fs))
        t1 = time.time()
        t, _ = audit.tables(audit.facts(tr.read(s, traces, "published"),
                                        tr.read(s, traces, "received")))
        tables = {k: json.loads(v.to_json(orient="records")) for k, v in t.items()}
        s.stop()
    t2 = time.time()
    print("@@RESULT " + json.dumps({"startup_s": t1 - t0, "query_s": t2 - t1,
                                    "tables": {lvl: tables[lvl] for lvl in COMPARE.values()},
                                    "run": {k: int(tables["run"][0][k]) for k in CHECK}},
                                   default=float))


def same_rows(a, b):
    """Two engines' tables agree row for row (counts exactly, percentiles
    to 1e-9)."""
    if a is None or b is None or a.keys() != b.keys():
        return False
    for lvl in a:
        if len(a[lvl]) != len(b[lvl]):
            return False
        for x, y in zip(a[lvl], b[lvl]):
            for k, v in y.items():
                w = x.get(k)
                if isinstance(v, float) or isinstance(w, float):
                    if (v is None) != (w is None) or (v is not None and abs(v - w) > 1e-9):
                        return False
                elif v != w:
                    return False
    return True


def tree_rss(pid):
    """RSS (bytes) of pid and all its descendants."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(kids.get(p, ()))
        try:
            with open("/proc/%d/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def measure(cmd, env):
    """Wall seconds, peak tree RSS, exit code and stdout of cmd."""
    out = tempfile.TemporaryFile(mode="w+")
    t = time.time()
    p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.DEVNULL)
    peak = 0
    while p.poll() is None:
        peak = max(peak, tree_rss(p.pid))
        time.sleep(0.2)
    wall = time.time() - t
    out.seek(0)
    return wall, peak, p.returncode, out.read()


def machine():
    cpu = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = int(open("/proc/meminfo").readline().split()[1]) / 1024 / 1024
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    import duckdb
    import polars
    import pyspark

    from pipeline.spark import archive_path
    return [("Machine", platform.node()), ("CPU", "%s, %d cores" % (cpu, os.cpu_count())),
            ("Memory", "%.1f GB" % mem), ("OS", platform.platform()),
            ("Python", platform.python_version()), ("Java", java.splitlines()[0]),
            ("PySpark", pyspark.__version__ + " local[*], driver memory 2g, shuffle partitions "
             "by input size, 4 to 16 x cores (pipeline/spark.py)"),
            ("Spark class archive at start", "present" if os.path.exists(archive_path()) else
             "absent (the first Spark run writes it as it exits)"),
            ("DuckDB", duckdb.__version__), ("Polars", polars.__version__),
            ("Load average at start", " ".join("%.2f" % x for x in os.getloadavg()))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=("spark", "duckdb", "polars"))
    ap.add_argument("--traces")
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--no-job", action="store_true", help="skip the whole-job runs")
    ap.add_argument("--note", help="a line about the run (e.g. a loaded machine), in the results")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / (
        "pipeline-%s.md" % datetime.date.today().isoformat())))
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.traces)

    from pipeline import gen
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "firmware")]),
               PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    facts = machine()
    rows = []
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        work = tempfile.mkdtemp(prefix="pipeline-bench-")
        try:
            t = time.time()
            want = gen.generate(work, size, devices=1000)
            print("%.0e rows generated in %.1f s: %s" % (size, time.time() - t, want), flush=True)
            reference = None
            engines = [("%s audit" % e, [sys.executable, __file__, "--child", e, "--traces", work])
                       for e in ("duckdb", "polars", "spark")]
            if not args.no_job:
                engines.append(("spark job", [sys.executable, "-m", "pipeline", "audit",
                                              "--traces", work, "--out", work + "/report"]))
            for name, cmd in engines:
                wall, peak, rc, out = measure(cmd, env)
                res = [json.loads(l[9:]) for l in out.splitlines() if l.startswith("@@RESULT ")]
                r = res[0] if res else {}
                if name == "spark job" and os.path.exists(work + "/report/summary.json"):
                    with open(work + "/report/summary.json") as fh:
                        summary = json.load(fh)
                    r = {"run": {k: summary["runs"][0][k] for k in CHECK},
                         "tables": {lvl: summary[k] for k, lvl in COMPARE.items()}}
                if name == "duckdb audit":
                    reference = r.get("tables")
                ok = r.get("run") == {k: want[k] for k in CHECK}
                agree = same_rows(r.get("tables"), reference)
                rows.append((size, want["received"], name, wall, r.get("startup_s"),
                             r.get("query_s"), peak, rc, ok, agree))
                print("  %-12s %7.1f s wall, peak %6.0f MB, exit %d, counts %s, rows %s" % (
                    name, wall, peak / 2 ** 20, rc, "ok" if ok else "WRONG",
                    "agree" if agree else "DIFFER"), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    write(args.out, facts, rows, args.note)


def write(path, facts, rows, note=None):
    lines = ["# Pipeline benchmark: delivery audit, Spark local mode vs DuckDB and Polars", "",
             "Generated by `bench/pipeline_bench.py` (`make bench`) on %s." %
             datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), ""]
    lines += ["**%s**" % note, ""] if note else []
    lines += ["| | |", "|---|---|"]
    lines += ["| %s | %s |" % f for f in facts]
    lines += ["| Load average at end | %s |" % " ".join("%.2f" % x for x in os.getloadavg())]
    lines += ["", "Traces from `pipeline/gen.py` (1000 devices, faults injected at known "
              "counts; each engine's run totals are checked against them, and its tables "
              "per QoS, fault profile and device, every count and percentile, row for row "
              "against DuckDB's). Times are wall clock of a fresh process; startup = "
              "SparkSession (JVM) or imports; peak memory = largest RSS sum of the process "
              "tree, sampled every 0.2 s. The spark job also computes windows and gaps and "
              "writes the HTML report (exit 3: it found the injected QoS 1/2 violations, as "
              "it should).", "",
              "| published rows | received rows | engine | wall s | startup s | audit s | "
              "peak MB | exit | counts right | rows agree with DuckDB |",
              "|---:|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for size, recv, name, wall, st, q, peak, rc, ok, agree in rows:
        lines.append("| %d | %d | %s | %.1f | %s | %s | %.0f | %d | %s | %s |" % (
            size, recv, name, wall, "-" if st is None else "%.1f" % st,
            "-" if q is None else "%.1f" % q, peak / 2 ** 20, rc, "yes" if ok else "NO",
            "yes" if agree else "NO"))
    lines += ["", "Ratios to DuckDB (audit only, wall clock of the fresh process):", ""]
    by = {(r[0], r[2]): r for r in rows}
    for size in sorted({r[0] for r in rows}):
        d = by.get((size, "duckdb audit"))
        for e in ("spark audit", "polars audit"):
            x = by.get((size, e))
            if x and d:
                lines.append("- %d rows, %s: wall %.1fx, peak memory %.1fx" % (
                    size, e, x[3] / d[3], x[6] / max(d[6], 1)))
    text = "\n".join(lines) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
