"""The pipeline's command line at its edges: missing or empty input is one
line and exit 2, --help shows defaults, Spark stays quiet unless -v, and the
summary and report show full run ids."""
import os
import subprocess
import sys

import pandas as pd
import pytest

from pipeline import report
from tracekit import T0, pub, rcv, write_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "firmware")]))


def pipeline(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "pipeline", *args], env=ENV,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("cmd", ["audit", "stream"])
def test_missing_traces_is_one_line_and_exit_2(cmd, tmp_path):
    p = pipeline(cmd, "--traces", "/nonexistent", "--out", str(tmp_path / "out"))
    assert p.returncode == 2
    assert p.stderr == "pipeline %s: no traces directory /nonexistent\n" % cmd
    assert p.stdout == ""


@pytest.mark.parametrize("cmd,what", [("audit", "published or received"),
                                      ("stream", "received")])
def test_empty_traces_is_one_line_and_exit_2(cmd, what, tmp_path):
    (tmp_path / "traces" / "run=r1" / "received").mkdir(parents=True)  # no files in it
    p = pipeline(cmd, "--traces", str(tmp_path / "traces"), "--out", str(tmp_path / "out"))
    assert p.returncode == 2
    assert p.stderr.startswith("pipeline %s: no %s Parquet files under " % (cmd, what))
    assert p.stderr.count("\n") == 1


@pytest.mark.parametrize("cmd,default", [("audit", "(default: 1m,1h)"),
                                         ("stream", "(default: 1h)"),
                                         ("collect", "rows per Parquet file at most (default: 500)")])
def test_help_shows_defaults(cmd, default):
    p = pipeline(cmd, "--help")
    assert p.returncode == 0 and default in " ".join(p.stdout.split())


def test_audit_is_quiet_and_shows_full_run_ids(tmp_path):
    run = "fleet_small-20261125-101500-seed1"
    traces, out = str(tmp_path / "traces"), str(tmp_path / "out")
    write_run(traces, run, [pub(run, "d1", s, 1, T0 + s * 1000) for s in range(3)],
              [rcv(run, "s1", s, "d1", s, 1, T0 + s * 1000 + 5, T0 + s * 1000, value=1.0)
               for s in range(3)])
    p = pipeline("audit", "--traces", traces, "--out", out, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "%s   1 " % run in p.stdout
    assert run in open(os.path.join(out, "report.html")).read()
    # Spark's own lines (JVM warnings, log4j, stage progress) are in the log
    # file, not on the terminal; the terminal has the progress of the stages
    for noise in ("WARN", "log4j", "Using Spark", "incubator"):
        assert noise not in p.stderr, p.stderr
    assert "4/4 stages" in p.stderr
    assert "log4j" in open(os.path.join(out, "spark.log")).read()


def test_report_with_a_thousand_devices_puts_summaries_first(tmp_path):
    counts = dict.fromkeys(("published", "promised", "delivered", "lost", "duplicates",
                            "order_violations", "late_expiry", "dup_flagged", "stray"), 0)
    lat = {"lat_p50_ms": 1.0, "lat_p95_ms": 2.0, "lat_p99_ms": 3.0, "lat_max_ms": 4}
    dev = pd.DataFrame([dict(run_id="r", device="d%04d" % i, runtime="cpython",
                             fault_profile="none", **dict(counts, lost=int(i == 777)), **lat)
                        for i in range(1000)])
    tables = {"run": pd.DataFrame([dict(run_id="r", **counts, **lat)]),
              "qos": pd.DataFrame([dict(run_id="r", qos=1, **counts, **lat)]),
              "profile": pd.DataFrame([dict(run_id="r", fault_profile="none", qos=1, **counts,
                                            **lat)]),
              "device": dev}
    gaps = pd.DataFrame(columns=["run_id", "device", "sensor", "first_missing",
                                 "last_missing", "missing"])
    summary = {"traces": "t", "violations": [], "windows": {}}
    report.write(str(tmp_path), summary, tables, gaps, None, None)
    page = (tmp_path / "report.html").read_text()
    order = [page.index(h) for h in ("<h2>Per run", "<h2>Per delivery QoS", "<h2>Telemetry",
                                     "<h2>Per device")]
    assert order == sorted(order)
    tail = page[page.index("<h2>Per device"):]
    assert "1000 rows, the first %d shown" % report.MAX_TABLE_ROWS in tail
    assert tail.count("<tr") == report.MAX_TABLE_ROWS + 1  # header + rows
    assert tail.index("d0777") < tail.index("d0000")  # the device with a loss first


def test_series_plot_spans_the_data_not_the_window(tmp_path):
    ts = pd.date_range("2026-01-01 00:00:10", periods=30, freq="s")
    series = {"run_id": "r", "device": "d", "sensor": "temp", "width": "1m", "messages": 30,
              "raw": pd.DataFrame({"ts": ts, "value": range(30)}),
              "windows": pd.DataFrame({"start": [pd.Timestamp("2026-01-01")],
                                       "end": [pd.Timestamp("2026-01-01 00:01")],
                                       "count": [30], "min": [0.0], "max": [29.0],
                                       "mean": [14.5]})}
    fig = report._series(series)
    lo, hi = fig.axes[0].get_xlim()
    import matplotlib.dates as mdates
    assert (mdates.num2date(lo).replace(tzinfo=None), mdates.num2date(hi).replace(tzinfo=None)) \
        == (ts[0].to_pydatetime(), ts[-1].to_pydatetime())
