"""Telemetry analytics over received rows: per-sensor tumbling windows and
gaps in each device's sequence. Each message counts once, however many
subscribers or redeliveries brought it."""
from pyspark.sql import Window
from pyspark.sql import functions as F

DEFAULT_WINDOWS = ("1m", "1h")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def interval(text):
    """'1m' -> '1 minutes' (Spark's window duration); '90s', '2h', '1d' too."""
    text = text.strip()
    if text[-1:] not in _UNITS or not text[:-1].isdigit():
        raise ValueError("window must look like 30s, 1m, 1h or 1d: %r" % text)
    return "%s %s" % (text[:-1], _UNITS[text[-1]])


def telemetry(rcv):
    """One row per telemetry message (device, seq), with its event time."""
    return (rcv.where(F.col("device").isNotNull() & F.col("seq").isNotNull()
                      & F.col("sensor").isNotNull() & F.col("value").isNotNull()
                      & F.col("t_device_ms").isNotNull())
            .dropDuplicates(["run_id", "device", "seq"])
            .withColumn("ts", F.timestamp_millis("t_device_ms")))


def windows(tel, width):
    """count/min/max/mean per (run, device, sensor) and tumbling window of
    `width` ('1m', '1h', ...) by the device's timestamp."""
    return (tel.groupBy("run_id", "device", "sensor", F.window("ts", interval(width)).alias("w"))
            .agg(F.count(F.lit(1)).alias("count"), F.min("value").alias("min"),
                 F.max("value").alias("max"), F.avg("value").alias("mean"))
            .select("run_id", "device", "sensor", F.col("w.start").alias("start"),
                    F.col("w.end").alias("end"), "count", "min", "max", "mean")
            .orderBy("run_id", "device", "sensor", "start"))


def gaps(rcv):
    """Runs of sequence numbers missing between two received ones, per device:
    first and last missing seq and how many."""
    s = (rcv.where(F.col("device").isNotNull() & F.col("seq").isNotNull())
         .select("run_id", "device", "seq").distinct())
    nxt = F.lead("seq").over(Window.partitionBy("run_id", "device").orderBy("seq"))
    return (s.withColumn("next", nxt).where(F.col("next") - F.col("seq") > 1)
            .select("run_id", "device", (F.col("seq") + 1).alias("first_missing"),
                    (F.col("next") - 1).alias("last_missing"),
                    (F.col("next") - F.col("seq") - 1).alias("missing"))
            .orderBy("run_id", "device", "first_missing"))
