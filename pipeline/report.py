"""The HTML report (tables + PNG plots, matplotlib's Agg backend)."""
import html
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend choice)

MAX_TABLE_ROWS = 200


def write(out, summary, tables, gaps, latencies, series, window_heads):
    plots = [("latency.png", "Latency of first deliveries per QoS", _latency(latencies)),
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
    for name, title, fig in plots:
        if fig is not None:
            fig.savefig(os.path.join(out, name), dpi=90, bbox_inches="tight")
            plt.close(fig)
            parts.append("<h2>%s</h2><img src=%s>" % (html.escape(title), name))
    for key, title in (("run", "Per run"), ("qos", "Per delivery QoS"),
                       ("profile", "Per fault profile and QoS"), ("device", "Per device")):
        parts.append(_table(title, tables[key]))
    parts.append(_table("Gaps in device sequences", gaps))
    for w, head in window_heads.items():
        parts.append(_table("Telemetry windows of %s (first rows; all in windows_%s/)" % (w, w),
                            head))
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


def _latency(lat):
    if lat is None or not len(lat):
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    lo = max(lat["latency_ms"].min(), 1)
    hi = max(lat["latency_ms"].max(), lo + 1)
    import numpy as np
    bins = np.geomspace(lo, hi, 60)
    for qos, g in lat.groupby("qos"):
        ax.hist(g["latency_ms"].clip(lower=lo), bins=bins, histtype="step",
                label="QoS %d (%d)" % (qos, len(g)))
    ax.set_xscale("log")
    ax.set_xlabel("publish to first delivery (ms)")
    ax.set_ylabel("messages")
    ax.legend()
    return fig


def _profiles(prof):
    if not len(prof):
        return None
    import numpy as np
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
    return "Sensor %s of %s (run %s), with %s means" % (s["sensor"], s["device"], s["run_id"],
                                                        s["width"])


def _series(s):
    if not s:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(s["raw"]["ts"], s["raw"]["value"], ".", ms=2, label="values")
    w = s["windows"]
    ax.hlines(w["mean"], w["start"], w["end"], colors="C1", label="window mean")
    ax.legend()
    fig.autofmt_xdate()
    return fig
