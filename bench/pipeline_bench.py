"""Pipeline benchmark (`make bench`): the delivery audit over 1e6 and 1e7
trace rows in Spark (local[*], this machine) beside the same audit in DuckDB,
the single-machine reference. Wall time and peak memory (RSS of the whole
process tree: python + JVM) per engine, each in a fresh process; every
engine's counts are checked against what the generator injected.

    .venv/bin/python bench/pipeline_bench.py [--sizes 1e6,1e7] [--no-job] [--out PATH]

Engines: "spark audit" = SparkSession + the audit tables (pipeline/audit.py),
"duckdb audit" = bench/duckdb_audit.py, "spark job" = the whole
`python -m pipeline audit` (audit + windows + gaps + HTML/PNG report).
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


def child(engine, traces):
    """Run one engine in this process; print its timings and run totals."""
    t0 = time.time()
    if engine == "duckdb":
        import duckdb_audit
        t1 = time.time()
        run = duckdb_audit.audit(traces)["run"][0]
    else:
        from pipeline import audit, spark, traces as tr
        s = spark.session()
        t1 = time.time()
        f = audit.facts(tr.read(s, traces, "published"), tr.read(s, traces, "received")).cache()
        tables = {lvl: audit.summarize(f, k).toPandas() for lvl, k in audit.LEVELS.items()}
        audit.violations(f)
        run = tables["run"].iloc[0].to_dict()
        s.stop()
    t2 = time.time()
    print("@@RESULT " + json.dumps({"startup_s": t1 - t0, "query_s": t2 - t1,
                                    "run": {k: int(run[k]) for k in CHECK}}))


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
    import pyspark
    return [("Machine", platform.node()), ("CPU", "%s, %d cores" % (cpu, os.cpu_count())),
            ("Memory", "%.1f GB" % mem), ("OS", platform.platform()),
            ("Python", platform.python_version()), ("Java", java.splitlines()[0]),
            ("PySpark", pyspark.__version__ + " local[*], driver memory 2g, shuffle partitions 4 x cores"),
            ("DuckDB", duckdb.__version__),
            ("Load average at start", " ".join("%.2f" % x for x in os.getloadavg()))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=("spark", "duckdb"))
    ap.add_argument("--traces")
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--no-job", action="store_true", help="skip the whole-job runs")
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
            engines = [("spark audit", [sys.executable, __file__, "--child", "spark", "--traces",
                                        work]),
                       ("duckdb audit", [sys.executable, __file__, "--child", "duckdb",
                                         "--traces", work])]
            if not args.no_job:
                engines.append(("spark job", [sys.executable, "-m", "pipeline", "audit",
                                              "--traces", work, "--out", work + "/report"]))
            for name, cmd in engines:
                wall, peak, rc, out = measure(cmd, env)
                res = [json.loads(l[9:]) for l in out.splitlines() if l.startswith("@@RESULT ")]
                r = res[0] if res else {}
                if name == "spark job" and os.path.exists(work + "/report/summary.json"):
                    with open(work + "/report/summary.json") as fh:
                        total = json.load(fh)["runs"][0]
                    r = {"run": {k: total[k] for k in CHECK}}
                ok = r.get("run") == {k: want[k] for k in CHECK}
                rows.append((size, want["received"], name, wall, r.get("startup_s"),
                             r.get("query_s"), peak, rc, ok))
                print("  %-12s %7.1f s wall, peak %6.0f MB, exit %d, counts %s" % (
                    name, wall, peak / 2 ** 20, rc, "ok" if ok else "WRONG"), flush=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    write(args.out, facts, rows)


def write(path, facts, rows):
    lines = ["# Pipeline benchmark: delivery audit, Spark local mode vs DuckDB", "",
             "Generated by `bench/pipeline_bench.py` (`make bench`) on %s." %
             datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "", "| | |", "|---|---|"]
    lines += ["| %s | %s |" % f for f in facts]
    lines += ["", "Traces from `pipeline/gen.py` (1000 devices, faults injected at known "
              "counts; each engine's counts are checked against them). Times are wall "
              "clock of a fresh process; startup = SparkSession (JVM) or imports; peak "
              "memory = largest RSS sum of the process tree, sampled every 0.2 s. The "
              "spark job also computes windows and gaps and writes the HTML report "
              "(exit 3: it found the injected QoS 1/2 violations, as it should).", "",
              "| published rows | received rows | engine | wall s | startup s | audit s | "
              "peak MB | exit | counts right |", "|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for size, recv, name, wall, st, q, peak, rc, ok in rows:
        lines.append("| %d | %d | %s | %.1f | %s | %s | %.0f | %d | %s |" % (
            size, recv, name, wall, "-" if st is None else "%.1f" % st,
            "-" if q is None else "%.1f" % q, peak / 2 ** 20, rc, "yes" if ok else "NO"))
    lines += ["", "Spark / DuckDB ratio (audit only):", ""]
    by = {(r[0], r[2]): r for r in rows}
    for size in sorted({r[0] for r in rows}):
        s, d = by.get((size, "spark audit")), by.get((size, "duckdb audit"))
        if s and d:
            lines.append("- %d rows: wall %.1fx, audit query %.1fx, peak memory %.1fx" % (
                size, s[3] / d[3], s[5] / max(d[5], 1e-9), s[6] / max(d[6], 1)))
    text = "\n".join(lines) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
