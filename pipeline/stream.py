"""Spark Structured Streaming over the collected files, or straight from the
broker (pipeline/mqtt_source.py): keeps the per-sensor tumbling windows
current (the same definitions as the batch analytics).

Each width gets a query whose complete result replaces OUT/windows_<w>/ after
every micro-batch; its state lives in OUT/_checkpoints/ so a restart goes on
where it stopped. A message counts once: duplicates are dropped by its
identity (audit.MESSAGE: run, device, topic, seq) within the watermark, so
the deduplication state holds only the last `watermark` of event time (by
the device's timestamp). A reading that arrives later than that is dropped,
not counted twice."""
import os

from host_sim import schema

from . import analytics, mqtt_source, traces
from .audit import MESSAGE


def run(spark, traces_dir, out, widths=analytics.DEFAULT_WINDOWS, every_s=10, once=False,
        mqtt=None, watermark="1h"):
    """Run the window queries until stopped (once: until what is there is
    done); returns them. Reads the files under traces_dir, or, with
    mqtt=(Broker, topic, client_id), the broker through the `mqtt` source:
    one persistent session per width, client id `<client_id>-<width>`.
    Without `once`, a micro-batch starts at every multiple of every_s since
    the epoch (Spark's processing-time trigger): the second comes 0 to
    every_s seconds after the first, not every_s after it."""
    queries = []
    for w in widths:
        tel = (analytics.readings(_received(spark, traces_dir, mqtt, w))
               .withWatermark("ts", analytics.interval(watermark))
               .dropDuplicatesWithinWatermark(MESSAGE))
        target = os.path.join(out, "windows_%s" % w)

        def replace(df, _batch, target=target):
            df.write.mode("overwrite").parquet(target)

        q = (analytics.windows(tel, w).writeStream.outputMode("complete")
             .option("checkpointLocation", os.path.join(out, "_checkpoints", "windows_%s" % w))
             .foreachBatch(replace))
        # (in milliseconds: "%g seconds" wrote a long interval as 1e+06 seconds)
        q = (q.trigger(availableNow=True) if once else
             q.trigger(processingTime="%d milliseconds" % round(every_s * 1000)))
        queries.append(q.queryName("windows_%s" % w).start())
    try:
        for q in queries:
            q.awaitTermination()
    finally:
        for q in queries:
            q.stop()
    return queries


def _received(spark, traces_dir, mqtt, width):
    if mqtt is None:
        return (spark.readStream.schema(schema.spark_schema(schema.RECEIVED))
                .parquet(traces.runs(traces_dir) + "/received"))
    broker, topic, client_id = mqtt
    spark.dataSource.register(mqtt_source.MQTTDataSource)
    return (spark.readStream.format("mqtt")
            .options(**mqtt_source.options(broker, topic, "%s-%s" % (client_id, width)))
            .load())
