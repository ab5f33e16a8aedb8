"""Telemetry analytics over received rows: per-sensor tumbling windows and
gaps in each sensor's sequence. Each message counts once, however many
subscribers or redeliveries brought it: a message is (run, device, topic,
seq), audit.MESSAGE (the firmware sends every sensor of one reading with the
same seq, each on its own topic)."""
from pyspark.sql import Window
from pyspark.sql import functions as F

from .audit import MESSAGE, PARTITION, topic_hash

DEFAULT_WINDOWS = ("1m", "1h")
WINDOW_COLUMNS = ["run_id", "device", "sensor", "start", "end", "count", "min", "max", "mean"]
_UNITS = {"s": ("seconds", 1000), "m": ("minutes", 60000), "h": ("hours", 3600000),
          "d": ("days", 86400000)}


def _width(text):
    """'1m' -> (1, 'm'); ValueError unless it looks like 30s, 1m, 1h or 1d."""
    text = text.strip()
    if text[-1:] not in _UNITS or not text[:-1].isdigit():
        raise ValueError("window must look like 30s, 1m, 1h or 1d: %r" % text)
    return int(text[:-1]), text[-1]


def interval(text):
    """'1m' -> '1 minutes' (Spark's window duration); '90s', '2h', '1d' too."""
    n, unit = _width(text)
    return "%d %s" % (n, _UNITS[unit][0])


def width_ms(text):
    """'1m' -> 60000: a window width (as interval() reads it) in milliseconds."""
    n, unit = _width(text)
    return n * _UNITS[unit][1]


def readings(rcv):
    """Received rows that carry a sensor reading, with their event time `ts`."""
    return (rcv.where(F.col("device").isNotNull() & F.col("seq").isNotNull()
                      & F.col("sensor").isNotNull() & F.col("value").isNotNull()
                      & F.col("t_device_ms").isNotNull())
            .select(*MESSAGE, "sensor", "value", F.timestamp_millis("t_device_ms").alias("ts")))


def telemetry(rcv):
    """One row per telemetry message (MESSAGE, the topic by its hash:
    audit.topic_hash()), partitioned by (run, device) so the windows and
    gaps over it need no other shuffle; the topic is a key only, left out.
    (The sensor is part of the payload, so it is a key here too: that keeps
    every aggregation buffer fixed-width, a hash aggregation rather than a
    sort.)"""
    return (readings(rcv).select("*", topic_hash()).drop("topic").repartition(*PARTITION)
            .groupBy("run_id", "device", "topic_hash", "seq", "sensor")
            .agg(F.first("value").alias("value"), F.first("ts").alias("ts"))
            .drop("topic_hash"))


def _stats():
    """A window's aggregates, WINDOW_COLUMNS' count/min/max/mean."""
    return (F.count(F.lit(1)).alias("count"), F.min("value").alias("min"),
            F.max("value").alias("max"), F.avg("value").alias("mean"))


def windows(tel, width):
    """count/min/max/mean per (run, device, sensor) and tumbling window of
    `width` ('1m', '1h', ...) by the device's timestamp."""
    return (tel.groupBy("run_id", "device", "sensor", F.window("ts", interval(width)).alias("w"))
            .agg(*_stats())
            .select("run_id", "device", "sensor", F.col("w.start").alias("start"),
                    F.col("w.end").alias("end"), "count", "min", "max", "mean"))


def batch_windows(tel, widths):
    """windows() of every width in `widths` for a batch query, in ONE
    aggregation (each reading once per width, then one hash aggregation;
    column `width` names the width of each row): the same rows as
    windows(), grouped by each window's start in epoch milliseconds (floor
    of the timestamp to the width, as F.window's tumbling windows, before
    1970 too) rather than by F.window's struct, a flat long key. The stream
    keeps windows(): its checkpointed state is keyed by F.window's struct."""
    t = F.unix_millis("ts")
    ms_of = {w: width_ms(w) for w in widths}  # a width given twice: counted once
    each = F.array(*[F.struct(F.lit(w).alias("width"), F.lit(ms).alias("ms"),
                              (t - F.pmod(t, F.lit(ms))).alias("w"))
                     for w, ms in ms_of.items()])
    return (tel.select("run_id", "device", "sensor", "value", F.inline(each))
            .groupBy("run_id", "device", "sensor", "width", "ms", "w")
            .agg(*_stats())
            .select("run_id", "device", "sensor", F.timestamp_millis("w").alias("start"),
                    F.timestamp_millis(F.col("w") + F.col("ms")).alias("end"),
                    "count", "min", "max", "mean", "width"))


# The order of sequences(). Device first: a sort's 8-byte key prefix then
# tells most rows apart, where run_id's is the same on every row of a run.
SEQUENCE_ORDER = ["device", "sensor", "run_id", "seq"]


def sequences(tel):
    """One pass over each device's and sensor's messages in seq order: a row
    per run of missing sequence numbers (first and last missing seq and how
    many; `messages` null) and, on the sensor's last message, a row with
    its message count (`messages`; the gap columns null). Over telemetry
    partitioned by (run, device) and sorted by SEQUENCE_ORDER, Spark neither
    shuffles nor sorts again."""
    w = Window.partitionBy(*SEQUENCE_ORDER[:-1]).orderBy(SEQUENCE_ORDER[-1])
    t = tel.select("run_id", "device", "sensor", "seq", F.lead("seq").over(w).alias("next"),
                   F.row_number().over(w).alias("n"))
    gap = F.col("next") - F.col("seq") > 1
    last = F.col("next").isNull()
    return (t.where(gap | last)
            .select("run_id", "device", "sensor",
                    F.when(gap, F.col("seq") + 1).alias("first_missing"),
                    F.when(gap, F.col("next") - 1).alias("last_missing"),
                    F.when(gap, F.col("next") - F.col("seq") - 1).alias("missing"),
                    F.when(last, F.col("n").cast("long")).alias("messages")))


def gaps(tel):
    """Runs of sequence numbers missing between two received ones, per
    device and sensor: first and last missing seq and how many."""
    return sequences(tel).where(F.col("missing").isNotNull()).drop("messages")
