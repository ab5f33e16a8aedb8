"""Delivery audit: what each subscriber got against what each device published.

A message is one reading of one sensor: its identity is (run, device, topic,
seq) (MESSAGE), since the firmware publishes every sensor of a reading on its
own topic with the reading's seq. Every subscriber in a run is expected to
receive every message of that run. One fact row per (run, subscriber, device,
topic, seq) (KEY) holds what happened to that message for that subscriber;
the tables are the same sums over different keys. `qos` is the delivery QoS,
the lower of the published QoS and the subscription's QoS: the guarantee
that applies.

How it runs (one Spark query; explain() shows it): the received rows are
shuffled once by (run, device) and grouped per KEY in a hash aggregation,
the first delivery taken with min_by; one sort serves the arrival-order
window. The published rows, widened by the few subscribers (a broadcast
join; the subscriber list is a three-column scan of the received rows), are
shuffled once by (run, device) too, so the full outer join on KEY hashes
each partition and moves no rows. The facts fold into a histogram (one row
per latency value and key), and every level is one GROUPING SETS query over
it with exact percentiles by frequency.
"""
from pyspark.sql import Window
from pyspark.sql import functions as F

MESSAGE = ["run_id", "device", "topic", "seq"]
KEY = ["run_id", "subscriber", "device", "topic", "seq"]
PARTITION = ["run_id", "device"]  # the one shuffle of both inputs
NO_SUBSCRIBER = "(none)"  # a run whose traces show no subscriber at all
UNKNOWN = "(unknown)"     # received rows that match no published message

LEVELS = {
    "run": ["run_id"],
    "qos": ["run_id", "qos"],
    "profile": ["run_id", "fault_profile", "qos"],
    "device": ["run_id", "device", "runtime", "fault_profile"],
}
VIOLATION_KEYS = ["run_id", "subscriber", "qos"]
PERCENTILES = (0.5, 0.95, 0.99)
COUNTS = ("published", "promised", "delivered", "lost", "duplicates", "order_violations",
          "late_expiry", "dup_flagged", "stray")

def subscribers(rcv):
    """(run, subscriber, subscription QoS): a few rows from a narrow scan of
    the received rows, broadcast to the join that needs them (its stages run
    beside the audit's big ones, in the same query)."""
    return rcv.groupBy("run_id", "subscriber").agg(F.max("sub_qos").alias("sub_qos"))


def expected(pub, rcv):
    """One row per expected delivery: each published message x each
    subscriber of its run, partitioned by PARTITION (the published rows are
    shuffled first, so their scan need not wait for the subscriber list)."""
    return (pub.repartition(*PARTITION).join(F.broadcast(subscribers(rcv)), "run_id", "left")
            .select("run_id", F.coalesce("subscriber", F.lit(NO_SUBSCRIBER)).alias("subscriber"),
                    "device", "topic", "seq", "runtime", "fault_profile", "outcome", "t_pub_ms",
                    "expiry_s", F.col("qos").alias("pub_qos"), "sub_qos"))


def received_per_message(rcv):
    """Per KEY: deliveries, DUP-flagged ones, the first arrival (min_by the
    arrival counter), the last delivery's time and whether the first delivery
    came out of order. Order is judged by the arrival counter within one
    device's topic and QoS (the scope MQTT orders), first deliveries only."""
    m = (rcv.where(F.col("device").isNotNull() & F.col("seq").isNotNull())
         .repartition(*PARTITION)
         .groupBy(*KEY).agg(
             F.count(F.lit(1)).alias("deliveries"),
             F.sum(F.col("dup").cast("int")).alias("dup_flagged"),
             F.min("arrival").alias("first_arrival"),
             F.min_by("t_recv_ms", "arrival").alias("first_recv_ms"),
             F.min_by("qos", "arrival").alias("first_qos"),
             F.max("t_recv_ms").alias("last_recv_ms"),
             F.max("qos").alias("recv_qos"),
             F.max("sub_qos").alias("recv_sub_qos")))
    before = (Window.partitionBy("run_id", "subscriber", "device", "topic", "first_qos")
              .orderBy("first_arrival").rowsBetween(Window.unboundedPreceding, -1))
    return m.withColumn("out_of_order",
                        F.coalesce(F.col("seq") < F.max("seq").over(before), F.lit(False)))


def per_message(pub, rcv):
    """Expected deliveries and received messages side by side (full outer
    join on KEY; both sides are already partitioned by PARTITION, so the
    join hashes each partition and moves no rows)."""
    return expected(pub, rcv).join(received_per_message(rcv).hint("shuffle_hash"), KEY,
                                   "full_outer")


def facts(pub, rcv, expiry_slack_ms=1000):
    """One row per expected delivery (published message x subscriber of its
    run) plus one per received message no device published ("stray").

    lost: promised (QoS 0 sent, QoS >= 1 acknowledged) and never received.
    late_expiry: delivered after t_pub + Message Expiry Interval + slack
    (brokers count expiry in whole seconds, hence the slack)."""
    published = F.col("pub_qos").isNotNull()
    n = F.coalesce(F.col("deliveries"), F.lit(0))
    promised = (((F.col("pub_qos") == 0) & (F.col("outcome") == "sent"))
                | ((F.col("pub_qos") >= 1) & (F.col("outcome") == "acked")))
    deadline = F.col("t_pub_ms") + F.col("expiry_s").cast("long") * 1000 + expiry_slack_ms
    return per_message(pub, rcv).select(
        *KEY,
        F.coalesce(F.least("pub_qos", F.coalesce("sub_qos", "pub_qos")),
                   F.least("recv_qos", "recv_sub_qos")).cast("int").alias("qos"),
        F.coalesce("runtime", F.lit(UNKNOWN)).alias("runtime"),
        F.coalesce("fault_profile", F.lit(UNKNOWN)).alias("fault_profile"),
        published.alias("published"),
        F.coalesce(published & promised, F.lit(False)).alias("promised"),
        (n > 0).alias("delivered"),
        F.coalesce(published & promised & (n == 0), F.lit(False)).alias("lost"),
        F.greatest(n - 1, F.lit(0)).alias("duplicates"),
        F.coalesce("dup_flagged", F.lit(0)).cast("long").alias("dup_flagged"),
        F.coalesce("out_of_order", F.lit(False)).alias("out_of_order"),
        F.coalesce(published & (n > 0) & (F.col("last_recv_ms") > deadline),
                   F.lit(False)).alias("late_expiry"),
        (F.col("first_recv_ms") - F.col("t_pub_ms")).alias("latency_ms"),
        (~published).alias("stray"),
    )


HIST_KEYS = ["run_id", "subscriber", "device", "runtime", "fault_profile", "qos", "latency_ms"]
LATENCY_KEYS = ["qos", "latency_ms"]  # the latency histogram per QoS (the report's plot)


def histogram(f):
    """The facts folded into one row per HIST_KEYS (a few hundred latency
    values per device): how many facts (`rows`) and the sums of their flags."""
    def n(c):
        return F.sum(F.col(c).cast("long"))

    return f.groupBy(*HIST_KEYS).agg(
        F.count(F.lit(1)).alias("rows"),
        n("published").alias("published"),
        n("promised").alias("promised"),
        F.sum((F.col("delivered") & F.col("published")).cast("long")).alias("delivered"),
        n("lost").alias("lost"),
        n("duplicates").alias("duplicates"),
        n("out_of_order").alias("order_violations"),
        n("late_expiry").alias("late_expiry"),
        n("dup_flagged").alias("dup_flagged"),
        n("stray").alias("stray"))


def levels(hist, sets):
    """The COUNTS and exact latency percentiles (percentile by frequency over
    the histogram) for each grouping set in `sets` (name -> key columns), in
    one GROUPING SETS query; column `level` names the set of each row."""
    cols = sorted({c for keys in sets.values() for c in keys}, key=HIST_KEYS.index)
    level = F.lit(None).cast("string")
    for name, keys in sets.items():
        gid = sum(1 << (len(cols) - 1 - i) for i, c in enumerate(cols) if c not in keys)
        level = F.when(F.grouping_id() == gid, F.lit(name)).otherwise(level)
    pct = F.percentile("latency_ms", list(PERCENTILES), F.col("rows"))
    t = hist.groupingSets([list(k) for k in sets.values()], *cols).agg(
        level.alias("level"),
        F.sum("rows").alias("rows"),
        *[F.sum(c).alias(c) for c in COUNTS],
        pct.alias("pct"),
        F.max(F.col("latency_ms")).alias("lat_max_ms"))
    return t.select("level", *cols, "rows", *COUNTS,
                    *[F.col("pct")[i].alias("lat_p%d_ms" % round(q * 100))
                      for i, q in enumerate(PERCENTILES)], "lat_max_ms")


def split(rows, sets):
    """The pandas rows of levels() as one frame per set, each with its own
    key columns first and sorted by them; `rows` (facts counted) is kept
    only where latency_ms is a key (the histogram's bins)."""
    out = {}
    for name, keys in sets.items():
        d = rows[rows["level"] == name]
        n = ["rows"] if "latency_ms" in keys else []
        d = d[[*keys, *n, *COUNTS, *[c for c in d.columns if c.startswith("lat_")]]]
        d = d.astype({c: "int64" for c in (*COUNTS, *n)})
        if "qos" in keys:
            d = d.astype({"qos": "int64"})
        out[name] = d.sort_values(keys, na_position="first").reset_index(drop=True)
    return out


def summarize(f, keys):
    """The audit table at one level (a DataFrame): the COUNTS and latency
    percentiles per `keys`."""
    return levels(histogram(f), {"one": keys}).select(
        *keys, *COUNTS, "lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "lat_max_ms").orderBy(*keys)


def tables(f):
    """Every level of LEVELS (pandas frames) and the violations, from one query."""
    sets = dict(LEVELS, violations=VIOLATION_KEYS)
    out = split(levels(histogram(f), sets).toPandas(), sets)
    return out, violation_rows(out.pop("violations"))


def violations(f):
    """Broken guarantees, per run, subscriber and delivery QoS: QoS 1 loss,
    QoS 2 loss or duplicates. QoS 0 loss is reported, never a violation."""
    return tables(f)[1]


def violation_rows(t):
    """violations() from the per (run, subscriber, qos) level table."""
    rows = []
    for r in t.itertuples():
        if r.qos >= 1 and r.lost:
            rows.append({"run_id": r.run_id, "subscriber": r.subscriber, "qos": int(r.qos),
                         "kind": "lost", "count": int(r.lost)})
        if r.qos == 2 and r.duplicates:
            rows.append({"run_id": r.run_id, "subscriber": r.subscriber, "qos": int(r.qos),
                         "kind": "duplicates", "count": int(r.duplicates)})
    return rows
