"""Delivery audit of one run from its rows (the same logic the Spark pipeline
runs at scale): per QoS sent, acknowledged, delivered, lost, duplicated, and
the guarantees a run must keep:
- QoS 1 and 2: every message published is delivered (none lost);
- QoS 2: no message delivered twice;
- every device finished its program without an error;
- on the wire (link logs): DUP=1 on every resent PUBLISH, and PUBREL, not
  PUBLISH, resent after PUBREC (host_sim.link.protocol_violations)."""
from collections import Counter


def summarize(published, received):
    """{qos: {sent, acked, delivered, lost, duplicated, refused, pending}}."""
    got = Counter((r["device"], r["seq"]) for r in received if r["device"] is not None)
    out = {}
    for row in published:
        s = out.setdefault(row["qos"], Counter())
        k = (row["device"], row["seq"])
        s["sent"] += 1
        s["acked"] += row["outcome"] == "acked"
        s["refused"] += row["outcome"] == "refused"
        s["pending"] += row["outcome"] == "pending"
        if got[k]:
            s["delivered"] += 1
            s["duplicated"] += got[k] > 1
        else:
            s["lost"] += 1
    return {q: {k: c[k] for k in ("sent", "acked", "delivered", "lost", "duplicated",
                                  "refused", "pending")} for q, c in sorted(out.items())}


def broken(summary, device_errors, wire_violations):
    """Human-readable list of broken guarantees (empty: all kept)."""
    bad = []
    for q, s in summary.items():
        if q >= 1 and s["lost"]:
            bad.append("QoS %d: %d message(s) lost" % (q, s["lost"]))
        if q >= 1 and s["pending"]:
            bad.append("QoS %d: %d message(s) never acknowledged" % (q, s["pending"]))
        if q == 2 and s["duplicated"]:
            bad.append("QoS 2: %d message(s) delivered more than once" % s["duplicated"])
    for dev, err in device_errors:
        bad.append("device %s: %s" % (dev, err.strip().splitlines()[-1] if err else "failed"))
    for dev, v in wire_violations:
        bad.append("device %s on the wire: %s" % (dev, v))
    return bad


def lost_keys(published, received):
    got = set((r["device"], r["seq"]) for r in received)
    return [(r["device"], r["seq"], r["qos"]) for r in published
            if r["qos"] >= 1 and (r["device"], r["seq"]) not in got]


def format_summary(summary):
    cols = ("sent", "acked", "delivered", "lost", "duplicated")
    lines = ["QoS  " + "".join("%11s" % c for c in cols)]
    for q, s in summary.items():
        lines.append("%-5d" % q + "".join("%11d" % s[c] for c in cols))
    return "\n".join(lines)
