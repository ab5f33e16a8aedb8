"""The `mqtt` streaming source against a real mosquitto (persistence on):
`pipeline stream` reading the broker straight into Structured Streaming,
stopped in the middle and started again from its checkpoint. Nothing is
lost (what Spark had not committed stays unacknowledged at the broker and
comes again) and nothing is counted twice (deduplicated downstream)."""
import datetime as dt
import threading
import time

from frugalmqtt.client import MQTTClient
from host_sim import schema
from pipeline import stream
from pipeline.broker import Broker

T0 = 1767225600000  # 2026-01-01 00:00 UTC
WIDTHS = ("1m", "1h")


def publish(broker, device, sensor, seqs):
    """One reading every 20 s of device time, value = seq, QoS 1."""
    dev = MQTTClient(device, broker.host, broker.port)
    dev.connect()
    for s in seqs:
        dev.publish("fleet/%s/%s" % (device, sensor),
                    schema.encode_payload(device, s, T0 + s * 20000, sensor, float(s)), qos=1)
    assert dev.flush(5000)
    dev.disconnect()


def windows(spark, out, w):
    return {(r.device, r.sensor, r.start): (r["count"], r["min"], r["max"])
            for r in spark.read.parquet("%s/windows_%s" % (out, w)).collect()}


def inputs(queries):
    """Rows each query's source gave Spark over its run."""
    return [sum(p["numInputRows"] for p in q.recentProgress) for q in queries]


def minutes(device, sensor, seqs):
    """The expected 1-minute windows of `seqs` (3 readings a minute)."""
    out = {}
    for s in seqs:
        start = dt.datetime(2026, 1, 1) + dt.timedelta(minutes=s // 3)
        n, lo, hi = out.get((device, sensor, start), (0, s, s))
        out[(device, sensor, start)] = (n + 1, min(lo, s), max(hi, s))
    return out


def test_mqtt_stream_restart_loses_nothing_and_counts_nothing_twice(spark, mosquitto, tmp_path):
    broker = mosquitto("persistence true")
    out = str(tmp_path / "live")
    mqtt = (Broker(broker.host, broker.port), "fleet/#", "stream")

    # The first run makes the persistent sessions (one per width); nothing yet.
    assert inputs(stream.run(spark, None, out, WIDTHS, once=True, mqtt=mqtt)) == [0, 0]
    publish(broker, "dev1", "temp", range(6))
    publish(broker, "dev2", "hum", range(6))

    # A long-running query: its first batch takes what the broker kept for it.
    # Stopped right after that batch, before it asks for the next one (60 s
    # later), the batch is not committed: none of its 12 messages is acknowledged.
    failed = []

    def run():
        try:
            stream.run(spark, None, out, WIDTHS, every_s=60, mqtt=mqtt)
        except Exception as e:  # a stopped query ends quietly; anything else fails the test
            failed.append(e)

    t = threading.Thread(target=run)
    t.start()
    end = time.time() + 60
    while time.time() < end and not all(_total(spark, out, w) == 12 for w in WIDTHS):
        time.sleep(0.1)
    for q in spark.streams.active:
        q.stop()
    t.join(30)
    assert not failed and not t.is_alive()
    assert windows(spark, out, "1m") == {**minutes("dev1", "temp", range(6)),
                                         **minutes("dev2", "hum", range(6))}

    # More readings while it is down; then start again from the same checkpoints.
    publish(broker, "dev1", "temp", range(6, 10))
    publish(broker, "dev2", "hum", range(6, 10))
    # The broker sends the 12 unacknowledged messages again with the 8 new ones...
    assert inputs(stream.run(spark, None, out, WIDTHS, once=True, mqtt=mqtt)) == [20, 20]
    # ... and every reading counts once.
    expected = {**minutes("dev1", "temp", range(10)), **minutes("dev2", "hum", range(10))}
    assert windows(spark, out, "1m") == expected
    h = dt.datetime(2026, 1, 1)
    assert windows(spark, out, "1h") == {("dev1", "temp", h): (10, 0.0, 9.0),
                                         ("dev2", "hum", h): (10, 0.0, 9.0)}

    # All acknowledged now: one more run gets nothing and changes nothing.
    assert inputs(stream.run(spark, None, out, WIDTHS, once=True, mqtt=mqtt)) == [0, 0]
    assert windows(spark, out, "1m") == expected


def _total(spark, out, w):
    try:
        return sum(n for n, _, _ in windows(spark, out, w).values())
    except Exception:  # no output written yet
        return 0
