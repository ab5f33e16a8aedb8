"""pipeline collect against a real mosquitto: rows in the `received` schema,
QoS 1 acknowledged only once written (a crash before the write gets the
messages again), arrival counter continued across restarts."""
import glob
import os
import time

import pyarrow.parquet as pq

from frugalmqtt.client import MQTTClient
from host_sim import schema
from pipeline import analytics, audit, traces
from pipeline.broker import Broker
from pipeline.collect import Collector

T0 = 1767225600000


def publish(broker, seqs, qos=1):
    dev = MQTTClient("dev1", broker.host, broker.port)
    dev.connect()
    for s in seqs:
        dev.publish("fleet/dev1/temp", schema.encode_payload("dev1", s, T0 + s * 1000, "temp",
                                                            20.0 + s), qos=qos)
    assert dev.flush(5000)
    dev.disconnect()


def collected(out):
    files = sorted(glob.glob(os.path.join(out, "run=live", "received", "*.parquet")))
    if not files:
        return []
    t = pq.read_table(files, schema=schema.arrow_schema(schema.RECEIVED))
    return sorted(t.to_pylist(), key=lambda r: r["arrival"])


def collector(broker, out, **kw):
    return Collector(Broker(broker.host, broker.port), "fleet/#", out, client_id="col",
                     batch=50, idle_ms=100, **kw)


def test_collect_writes_before_it_acknowledges(mosquitto, tmp_path, spark):
    broker = mosquitto()
    out = str(tmp_path / "traces")
    c = collector(broker, out)
    assert c.client.connect() is False and c.client.subscribe("fleet/#", qos=1) == 1
    publish(broker, range(5))
    end = time.time() + 10
    while c.pending() < 5 and time.time() < end:
        c.client.poll(100)
    assert c.pending() == 5
    c.client.close()  # the collector dies before writing: nothing acknowledged
    assert collected(out) == []

    assert collector(broker, out).run(duration_s=15, count=5) == 5
    rows = collected(out)
    assert [(r["seq"], r["dup"], r["arrival"], r["qos"]) for r in rows] == \
        [(s, True, s, 1) for s in range(5)]  # sent again by the broker, DUP set
    r = rows[0]
    assert (r["run_id"], r["subscriber"], r["device"], r["sensor"], r["value"]) == \
        ("live", "col", "dev1", "temp", 20.0)
    assert (r["t_device_ms"], r["topic"], r["sub_qos"]) == (T0, "fleet/dev1/temp", 1)

    # Acknowledged now: a restart gets only new messages, arrival continues
    publish(broker, range(5, 8))
    assert collector(broker, out).run(duration_s=15, count=3) == 3
    rows = collected(out)
    assert [(r["seq"], r["dup"], r["arrival"]) for r in rows[5:]] == \
        [(5, False, 5), (6, False, 6), (7, False, 7)]
    assert len(rows) == 8

    # The audit and the analytics read what the collector wrote
    r = traces.read(spark, out, "received")
    f = audit.facts(traces.read(spark, out, "published"), r)
    run = audit.summarize(f, audit.LEVELS["run"]).collect()[0]
    assert (run["stray"], run["duplicates"], run["dup_flagged"]) == (8, 0, 5)
    w = analytics.windows(analytics.telemetry(r), "1m").collect()
    assert [(x["count"], x["min"], x["max"]) for x in w] == [(8, 20.0, 27.0)]
