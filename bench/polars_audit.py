"""The delivery audit of pipeline/audit.py written for Polars (lazy frames):
the second single-machine reference `make bench` sets beside Spark. Same
definitions (see pipeline/audit.py and bench/duckdb_audit.py); returns the
same tables as lists of dicts."""
import polars as pl

KEY = ["run_id", "subscriber", "device", "topic", "seq"]
LEVELS = {"run": ["run_id"], "qos": ["run_id", "qos"],
          "profile": ["run_id", "fault_profile", "qos"],
          "device": ["run_id", "device", "runtime", "fault_profile"],
          "violations": ["run_id", "subscriber", "qos"]}


def facts(pub, rcv, expiry_slack_ms=1000):
    subs = rcv.group_by("run_id", "subscriber").agg(pl.col("sub_qos").max())
    m = (rcv.filter(pl.col("device").is_not_null() & pl.col("seq").is_not_null())
         .sort("arrival")
         .group_by(KEY).agg(
             pl.len().cast(pl.Int64).alias("deliveries"),
             pl.col("dup").cast(pl.Int64).sum().alias("dup_flagged"),
             pl.col("arrival").first().alias("first_arrival"),
             pl.col("t_recv_ms").first().alias("first_recv_ms"),
             pl.col("qos").first().alias("first_qos"),
             pl.col("t_recv_ms").max().alias("last_recv_ms"),
             pl.col("qos").max().alias("recv_qos"),
             pl.col("sub_qos").max().alias("recv_sub_qos"))
         .sort("first_arrival")
         .with_columns((pl.col("seq") < pl.col("seq").cum_max().shift(1).over(
             ["run_id", "subscriber", "device", "topic", "first_qos"]))
             .fill_null(False).alias("out_of_order")))
    e = (pub.join(subs, on="run_id", how="left")
         .with_columns(pl.col("subscriber").fill_null("(none)"))
         .select("run_id", "subscriber", "device", "topic", "seq", "runtime", "fault_profile",
                 "outcome", "t_pub_ms", "expiry_s", pl.col("qos").alias("pub_qos"),
                 "sub_qos"))
    f = e.join(m, on=KEY, how="full", coalesce=True)
    published = pl.col("pub_qos").is_not_null()
    n = pl.col("deliveries").fill_null(0)
    promised = (((pl.col("pub_qos") == 0) & (pl.col("outcome") == "sent"))
                | ((pl.col("pub_qos") >= 1) & (pl.col("outcome") == "acked")))
    deadline = pl.col("t_pub_ms") + pl.col("expiry_s").cast(pl.Int64) * 1000 + expiry_slack_ms
    # Spark's least() and Polars' min_horizontal both skip nulls
    qos = pl.coalesce(pl.min_horizontal("pub_qos", pl.coalesce("sub_qos", "pub_qos")),
                      pl.min_horizontal("recv_qos", "recv_sub_qos"))
    return f.select(
        "run_id", "subscriber", "device",
        qos.cast(pl.Int32).alias("qos"),
        pl.col("runtime").fill_null("(unknown)"),
        pl.col("fault_profile").fill_null("(unknown)"),
        published.alias("published"),
        (published & promised).fill_null(False).alias("promised"),
        (n > 0).alias("delivered"),
        (published & promised & (n == 0)).fill_null(False).alias("lost"),
        (n - 1).clip(lower_bound=0).alias("duplicates"),
        pl.col("dup_flagged").fill_null(0),
        pl.col("out_of_order").fill_null(False),
        (published & (n > 0) & (pl.col("last_recv_ms") > deadline)).fill_null(False)
        .alias("late_expiry"),
        (pl.col("first_recv_ms") - pl.col("t_pub_ms")).alias("latency_ms"),
        (~published).alias("stray"))


def audit(traces, expiry_slack_ms=1000):
    def scan(table):
        return pl.scan_parquet("%s/run=*/%s/*.parquet" % (traces.rstrip("/"), table),
                               hive_partitioning=False)

    f = facts(scan("published"), scan("received"), expiry_slack_ms).collect()
    lat = pl.col("latency_ms")
    out = {}
    for level, keys in LEVELS.items():
        t = f.group_by(keys).agg(
            pl.col("published").sum(), pl.col("promised").sum(),
            (pl.col("delivered") & pl.col("published")).sum().alias("delivered"),
            pl.col("lost").sum(), pl.col("duplicates").sum(),
            pl.col("out_of_order").sum().alias("order_violations"),
            pl.col("late_expiry").sum(), pl.col("dup_flagged").sum(), pl.col("stray").sum(),
            lat.quantile(0.5, "linear").alias("lat_p50_ms"),
            lat.quantile(0.95, "linear").alias("lat_p95_ms"),
            lat.quantile(0.99, "linear").alias("lat_p99_ms"),
            lat.max().alias("lat_max_ms")).sort(keys)
        out[level] = t.to_dicts()
    return out
