"""Spark Structured Streaming over the collected files: keeps the per-sensor
tumbling windows current (the same definitions as the batch analytics).

Each width gets a query whose complete result replaces OUT/windows_<w>/ after
every micro-batch; its state lives in OUT/_checkpoints/ so a restart goes on
where it stopped. A message counts once: duplicates are dropped by its
identity (audit.MESSAGE: run, device, topic, seq) within the watermark, so
the deduplication state holds only the last `watermark` of event time (by
the device's timestamp). A reading that arrives later than that is dropped,
not counted twice."""
import os

from host_sim import schema

from . import analytics, traces
from .audit import MESSAGE


def run(spark, traces_dir, out, widths=analytics.DEFAULT_WINDOWS, every_s=10, once=False,
        watermark="1h"):
    rows = (spark.readStream.schema(schema.spark_schema(schema.RECEIVED))
            .parquet(traces.runs(traces_dir) + "/received"))
    tel = (analytics.readings(rows).withWatermark("ts", analytics.interval(watermark))
           .dropDuplicatesWithinWatermark(MESSAGE))
    queries = []
    for w in widths:
        target = os.path.join(out, "windows_%s" % w)

        def replace(df, _batch, target=target):
            df.write.mode("overwrite").parquet(target)

        q = (analytics.windows(tel, w).writeStream.outputMode("complete")
             .option("checkpointLocation", os.path.join(out, "_checkpoints", "windows_%s" % w))
             .foreachBatch(replace))
        q = q.trigger(availableNow=True) if once else q.trigger(processingTime="%g seconds" % every_s)
        queries.append(q.queryName("windows_%s" % w).start())
    try:
        for q in queries:
            q.awaitTermination()
    finally:
        for q in queries:
            q.stop()
