"""Delivery audit: what each subscriber got against what each device published.

Every subscriber in a run is expected to receive every telemetry message of
that run (the fleet's topics). One fact row per (run, subscriber, device,
seq) holds what happened to that message for that subscriber; the tables are
the same sums over different keys. `qos` is the delivery QoS, the lower of
the published QoS and the subscription's QoS: the guarantee that applies.
"""
from pyspark.sql import Window
from pyspark.sql import functions as F

KEY = ["run_id", "subscriber", "device", "seq"]
NO_SUBSCRIBER = "(none)"  # a run whose traces show no subscriber at all
UNKNOWN = "(unknown)"     # received rows that match no published message

LEVELS = {
    "run": ["run_id"],
    "qos": ["run_id", "qos"],
    "profile": ["run_id", "fault_profile", "qos"],
    "device": ["run_id", "device", "runtime", "fault_profile"],
}
PERCENTILES = (0.5, 0.95, 0.99)


def received_per_message(rcv):
    """Per (run, subscriber, device, seq): deliveries, DUP-flagged ones, the
    first arrival's time, the last delivery's time and whether its first
    delivery came out of order. Order is judged by the arrival counter within
    one device's topic and QoS (the scope MQTT orders), first deliveries only."""
    r = rcv.where(F.col("device").isNotNull() & F.col("seq").isNotNull())
    first = Window.partitionBy(*KEY).orderBy("arrival")
    r = r.withColumn("first", F.row_number().over(first) == 1)
    before = (Window.partitionBy("run_id", "subscriber", "device", "topic", "qos")
              .orderBy("arrival").rowsBetween(Window.unboundedPreceding, -1))
    firsts = r.where("first").withColumn(
        "out_of_order", F.coalesce(F.col("seq") < F.max("seq").over(before), F.lit(False)))
    order = firsts.select(*KEY, "out_of_order")
    m = r.groupBy(*KEY).agg(
        F.count(F.lit(1)).alias("deliveries"),
        F.sum(F.col("dup").cast("int")).alias("dup_flagged"),
        F.min_by("t_recv_ms", "arrival").alias("first_recv_ms"),
        F.max("t_recv_ms").alias("last_recv_ms"),
        F.max("qos").alias("recv_qos"),
        F.max("sub_qos").alias("recv_sub_qos"))
    return m.join(order, KEY, "left")


def facts(pub, rcv, expiry_slack_ms=1000):
    """One row per expected delivery (published message x subscriber of its
    run) plus one per received message no device published ("stray").

    lost: promised (QoS 0 sent, QoS >= 1 acknowledged) and never received.
    late_expiry: delivered after t_pub + Message Expiry Interval + slack
    (brokers count expiry in whole seconds, hence the slack)."""
    subs = rcv.groupBy("run_id", "subscriber").agg(F.max("sub_qos").alias("sub_qos"))
    p = pub.select("run_id", "device", "seq", "runtime", "fault_profile", "outcome",
                   "t_pub_ms", "expiry_s", F.col("qos").alias("pub_qos"))
    expected = (p.join(subs, "run_id", "left")
                .withColumn("subscriber", F.coalesce("subscriber", F.lit(NO_SUBSCRIBER))))
    m = received_per_message(rcv)
    f = expected.join(m, KEY, "full_outer")
    published = F.col("pub_qos").isNotNull()
    n = F.coalesce(F.col("deliveries"), F.lit(0))
    promised = (((F.col("pub_qos") == 0) & (F.col("outcome") == "sent"))
                | ((F.col("pub_qos") >= 1) & (F.col("outcome") == "acked")))
    deadline = F.col("t_pub_ms") + F.col("expiry_s").cast("long") * 1000 + expiry_slack_ms
    return f.select(
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
        F.coalesce("dup_flagged", F.lit(0)).alias("dup_flagged"),
        F.coalesce("out_of_order", F.lit(False)).alias("out_of_order"),
        F.coalesce(published & (n > 0) & (F.col("last_recv_ms") > deadline),
                   F.lit(False)).alias("late_expiry"),
        (F.col("first_recv_ms") - F.col("t_pub_ms")).alias("latency_ms"),
        (~published).alias("stray"),
    )


def _n(c):
    return F.sum(F.col(c).cast("long"))


COUNTS = ("published", "promised", "delivered", "lost", "duplicates", "order_violations",
          "late_expiry", "dup_flagged", "stray")


def summarize(f, keys):
    """The audit table at one level: the COUNTS and latency percentiles."""
    pct = F.percentile("latency_ms", F.array(*[F.lit(q) for q in PERCENTILES]))
    t = f.groupBy(*keys).agg(
        _n("published").alias("published"),
        _n("promised").alias("promised"),
        F.sum((F.col("delivered") & F.col("published")).cast("long")).alias("delivered"),
        _n("lost").alias("lost"),
        _n("duplicates").alias("duplicates"),
        _n("out_of_order").alias("order_violations"),
        _n("late_expiry").alias("late_expiry"),
        _n("dup_flagged").alias("dup_flagged"),
        _n("stray").alias("stray"),
        pct.alias("pct"),
        F.max("latency_ms").alias("lat_max_ms"))
    return t.select(*keys, *COUNTS,
                    F.col("pct")[0].alias("lat_p50_ms"), F.col("pct")[1].alias("lat_p95_ms"),
                    F.col("pct")[2].alias("lat_p99_ms"), "lat_max_ms").orderBy(*keys)


def violations(f):
    """Broken guarantees, per run, subscriber and delivery QoS: QoS 1 loss,
    QoS 2 loss or duplicates. QoS 0 loss is reported, never a violation."""
    t = f.groupBy("run_id", "subscriber", "qos").agg(
        _n("lost").alias("lost"), _n("duplicates").alias("duplicates"))
    rows = []
    for r in t.where("qos >= 1").orderBy("run_id", "subscriber", "qos").collect():
        if r.lost:
            rows.append({"run_id": r.run_id, "subscriber": r.subscriber, "qos": r.qos,
                         "kind": "lost", "count": r.lost})
        if r.qos == 2 and r.duplicates:
            rows.append({"run_id": r.run_id, "subscriber": r.subscriber, "qos": r.qos,
                         "kind": "duplicates", "count": r.duplicates})
    return rows
