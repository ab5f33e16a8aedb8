"""The HTML report (tables + PNG plots, matplotlib's Agg backend).

Summaries come first (violations, per run, per QoS, per fault profile, the
plots); the long tables (gaps, per device) come last, worst rows first and
cut to MAX_TABLE_ROWS (all rows are in summary.json), so a fleet of a
thousand devices still reads from the top."""
import html
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)
import numpy as np  # noqa: E402

MAX_TABLE_ROWS = 200
PROBLEMS = ["lost", "duplicates", "order_violations", "late_expiry"]


def write(out, summary, tables, gaps, latency, series):
    plots = [("latency.png", "Latency of first deliveries per QoS", _latency(latency)),
             ("profiles.png", "Delivered, lost and duplicated per fault profile",
              _profiles(tables["profile"])),
             ("series.png", _series_title(series), _series(series))]
    parts = ["<!doctype html><meta charset=utf-8><title>frugalmqtt delivery audit</title>",
             "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             ".bad{color:#b00}.ok{color:#070}</style>",
             "<h1>Delivery audit</h1><p>Traces: %s</p>" % html.escape(summary["traces"])]
    if summary["violations"]:
        parts.append("<h2 class=bad>Violations</h2><ul>%s</ul>" % "".join(
            "<li>run %(run_id)s, subscriber %(subscriber)s, QoS %(qos)s: %(count)s %(kind)s"
            % {k: html.escape(str(v)) for k, v in v.items()} for v in summary["violations"]))
    else:
        parts.append("<h2 class=ok>No violations</h2><p>No QoS 1 loss, no QoS 2 loss or "
                     "duplicate. QoS 0 loss is reported below, not flagged.</p>")
    for key, title in (("run", "Per run"), ("qos", "Per delivery QoS"),
                       ("profile", "Per fault profile and QoS")):
        parts.append(_table(title, tables[key]))
    parts.append("<h2>Telemetry</h2><ul>%s<li>%d gaps in sensor sequences</li></ul>" % (
        "".join("<li>windows of %s: %d rows in %s</li>" % (
            html.escape(w), v["rows"], html.escape(v["path"]))
            for w, v in summary["windows"].items()), len(gaps)))
    for name, title, fig in plots:
        if fig is not None:
            fig.savefig(os.path.join(out, name), dpi=90, bbox_inches="tight")
            plt.close(fig)
            parts.append("<h2>%s</h2><img src=%s>" % (html.escape(title), name))
    parts.append(_table("Gaps in sensor sequences, longest first",
                        gaps.sort_values("missing", ascending=False, kind="stable")))
    dev = tables["device"]
    worst = dev.assign(_p=dev[PROBLEMS].sum(axis=1)).sort_values(
        "_p", ascending=False, kind="stable").drop(columns="_p")
    parts.append(_table("Per device (%d), most problems first" % len(dev), worst))
    with open(os.path.join(out, "report.html"), "w") as fh:
        fh.write("\n".join(parts))


def _table(title, df):
    more = ""
    if len(df) > MAX_TABLE_ROWS:
        more = "<p>%d rows, the first %d shown (all in summary.json)</p>" % (
            len(df), MAX_TABLE_ROWS)
        df = df.head(MAX_TABLE_ROWS)
    return "<h2>%s</h2>%s%s" % (html.escape(title), more,
                                df.to_html(index=False, na_rep="", border=0))


def _latency(hist):
    """Step histogram per QoS from the (qos, latency_ms, rows) bins."""
    if hist is None or not len(hist):
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    lo = max(hist["latency_ms"].min(), 1)
    hi = max(hist["latency_ms"].max(), lo + 1)
    bins = np.geomspace(lo, hi, 60)
    for qos, g in hist.groupby("qos"):
        ax.hist(g["latency_ms"].clip(lower=lo), bins=bins, weights=g["rows"], histtype="step",
                label="QoS %d (%d)" % (qos, g["rows"].sum()))
    ax.set_xscale("log")
    ax.set_xlabel("publish to first delivery (ms)")
    ax.set_ylabel("messages")
    ax.legend()
    return fig


def _profiles(prof):
    if not len(prof):
        return None
    g = prof.groupby("fault_profile")[["delivered", "lost", "duplicates"]].sum()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = np.arange(len(g))
    for i, col in enumerate(g.columns):
        bars = ax.bar(x + (i - 1) * 0.27, g[col].clip(lower=0.5), 0.27, label=col)
        ax.bar_label(bars, labels=[str(v) for v in g[col]], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)  # a count of 1 still shows; 0 shows as a stub labelled 0
    ax.set_xticks(x, g.index)
    ax.set_ylabel("messages")
    ax.legend()
    return fig


def _series_title(s):
    if not s:
        return "Sensor time series (no telemetry)"
    return "Sensor %s of %s (run %s, %d readings), with %s windows" % (
        s["sensor"], s["device"], s["run_id"], s["messages"], s["width"])


def _series(s):
    """The busiest sensor over its whole history: raw readings when there
    are few, each window's min-max band and mean, the x axis cut to the
    span of the data (a window reaching past the data is drawn only over
    the data)."""
    if not s:
        return None
    w, raw = s["windows"], s["raw"]
    lo, hi = w["start"].min(), w["end"].max()
    if raw is not None and len(raw):
        lo, hi = raw["ts"].min(), raw["ts"].max()
    start, end = w["start"].clip(lower=lo), w["end"].clip(upper=hi)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.fill_between(np.ravel(np.column_stack([start, end])), np.repeat(w["min"], 2),
                    np.repeat(w["max"], 2), color="C1", alpha=0.2,
                    label="window min-max")
    ax.hlines(w["mean"], start, end, colors="C1", label="window mean")
    if raw is not None and len(raw):
        ax.plot(raw["ts"], raw["value"], ".", ms=3, label="readings")
    if hi > lo:
        ax.set_xlim(lo, hi)
    ax.legend()
    fig.autofmt_xdate()
    return fig
