"""Spark Structured Streaming over the collected files: keeps the per-sensor
tumbling windows current (the same definitions as the batch analytics).

Each width gets a query whose complete result replaces OUT/windows_<w>/ after
every micro-batch; its state lives in OUT/_checkpoints/ so a restart goes on
where it stopped. Duplicates are dropped by (run, device, seq) across all
batches, so the dedup state grows with the number of messages seen."""
import os

from host_sim import schema

from . import analytics, traces


def run(spark, traces_dir, out, widths=analytics.DEFAULT_WINDOWS, every_s=10, once=False):
    rows = (spark.readStream.schema(schema.spark_schema(schema.RECEIVED))
            .parquet(traces.runs(traces_dir) + "/received"))
    tel = analytics.telemetry(rows)
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
