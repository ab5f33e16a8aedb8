"""The `mqtt` streaming source against a real mosquitto (persistence on):
`pipeline stream` reading the broker straight into Structured Streaming,
stopped in the middle and started again from its checkpoint. Nothing is
lost (what Spark had not committed stays unacknowledged at the broker and
comes again) and nothing is counted twice (deduplicated downstream)."""
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time

from frugalmqtt.client import MQTTClient
from host_sim import schema
from pipeline import mqtt_source, stream
from pipeline.broker import Broker

T0 = 1767225600000  # 2026-01-01 00:00 UTC
SEQ = schema.names(schema.RECEIVED).index("seq")
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
    # Stopped right after that batch, before it asks for the next one, the
    # batch is not committed: none of its 12 messages is acknowledged. (The
    # next trigger's read() would acknowledge them. A processing-time trigger
    # fires at the multiples of its interval since the epoch, not an interval
    # after the last one: with 60 s, the second came at the next whole minute,
    # sometimes before the stop. One of 10**10 s comes in the year 2286.)
    failed, running = [], []

    def run():
        try:
            running.extend(stream.run(spark, None, out, WIDTHS, every_s=10**10, mqtt=mqtt))
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
    assert inputs(running) == [12, 12]  # the batch that took them, not acknowledged
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


def test_mqtt_stream_replays_a_batch_a_crash_left_uncommitted(spark, mosquitto, tmp_path):
    """The stream process is killed (SIGKILL: no DISCONNECT, no clean stop)
    in the middle of a batch: its offsets are logged, its commit is not. The
    restart replays that batch (empty: its messages were never acknowledged)
    and takes them again from the broker."""
    broker = mosquitto("persistence true")
    out = str(tmp_path / "live")
    mqtt = (Broker(broker.host, broker.port), "fleet/#", "crash")
    assert inputs(stream.run(spark, None, out, ("1m",), once=True, mqtt=mqtt)) == [0]
    publish(broker, "dev1", "temp", range(6))

    ck = os.path.join(out, "_checkpoints", "windows_1m")
    before = _batches(ck, "offsets")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.path.join(root, "firmware")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "stream", "--mqtt", "%s:%d" % (broker.host, broker.port),
         "--out", out, "--windows", "1m", "--every-s", "60", "--client-id", "crash"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(str(tmp_path / "stream.err"), "w"),
        start_new_session=True)
    try:  # the moment the batch is planned (its offsets logged), before it is done
        end = time.time() + 120
        while time.time() < end and _batches(ck, "offsets") == before and proc.poll() is None:
            time.sleep(0.005)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the JVM and the Python workers too
        proc.wait()
    planned = _batches(ck, "offsets") - before
    assert len(planned) == 1, (tmp_path / "stream.err").read_text()[-2000:]
    last, = planned
    assert last not in _batches(ck, "commits")

    publish(broker, "dev1", "temp", range(6, 9))
    q, = stream.run(spark, None, out, ("1m",), once=True, mqtt=mqtt)
    replayed = [p for p in q.recentProgress if p["batchId"] == last]
    assert replayed and replayed[0]["numInputRows"] == 0
    assert inputs([q]) == [6 + 3]  # the 6 again (never acknowledged), then the 3 new
    assert windows(spark, out, "1m") == minutes("dev1", "temp", range(9))


def test_mqtt_source_read_does_not_wait_for_a_gone_broker(mosquitto, capfd):
    """The broker goes away: a trigger's read() returns at once (no rows),
    one line says the link is lost; when the broker is back, the link
    reconnects by itself, says so, and what was published since arrives."""
    broker = mosquitto("persistence true")
    reader = mqtt_source.MQTTStreamReader(mqtt_source.options(
        Broker(broker.host, broker.port), "fleet/#", "gone", idle_ms=100))
    _, end = reader.read(reader.initialOffset())  # connects and subscribes
    publish(broker, "dev1", "temp", range(2))
    end, _ = _read_until(reader, end, {0, 1})
    broker.stop()
    time.sleep(1)  # the link notices and starts reconnecting

    done = []
    t = threading.Thread(target=lambda: done.append(reader.read(end)))
    t.start()
    t.join(5)
    assert not t.is_alive(), "read() waited for the broker"
    rows, same = done[0]
    assert list(rows) == [] and same == end
    lost = [line for line in capfd.readouterr().err.splitlines() if "mqtt source gone" in line]
    assert len(lost) == 1 and "lost the broker %s:%d" % (broker.host, broker.port) in lost[0]

    broker.start()  # same port, the session kept on disk
    publish(broker, "dev1", "temp", range(2, 4))
    _, again = _read_until(reader, end, {2, 3})
    assert again <= {0, 1, 2, 3}  # at least once: an acknowledgement the broker missed comes again
    reader.stop()
    err = capfd.readouterr().err
    assert "mqtt source gone: reconnected to %s:%d" % (broker.host, broker.port) in err
    assert "lost" not in err


def test_mqtt_source_first_read_takes_what_the_broker_kept_on_a_slow_start(mosquitto,
                                                                            monkeypatch):
    """What the broker kept for the session comes in the first read() even
    when connecting took longer than idleMs and the polling thread started
    late (a busy host): the pause counts from the polling thread's first look."""
    broker = mosquitto("persistence true")
    opts = mqtt_source.options(Broker(broker.host, broker.port), "fleet/#", "slow", idle_ms=100)
    first = mqtt_source.MQTTStreamReader(opts)
    first.read(first.initialOffset())  # makes the session
    first.stop()
    publish(broker, "dev1", "temp", range(5))

    connect, poll = Broker.connect, mqtt_source._Link._poll
    monkeypatch.setattr(Broker, "connect", lambda self, c: (connect(self, c), time.sleep(0.3))[0])
    monkeypatch.setattr(mqtt_source._Link, "_poll", lambda self: (time.sleep(0.3), poll(self)))
    reader = mqtt_source.MQTTStreamReader(opts)
    try:
        rows, end = reader.read(reader.initialOffset())
        assert sorted(r[SEQ] for r in rows) == list(range(5)) and end == {"n": 5}
    finally:
        reader.stop()


def _batches(checkpoint, log):
    """The batch ids in a query checkpoint's offsets or commits log."""
    d = os.path.join(checkpoint, log)
    return {int(f) for f in os.listdir(d) if f.isdigit()} if os.path.isdir(d) else set()


def _read_until(reader, start, seqs):
    """read() from `start` until every seq of `seqs` came; the offset after
    them (committed) and the seqs read."""
    got, end, deadline = set(), start, time.time() + 30
    while not seqs <= got and time.time() < deadline:
        rows, end = reader.read(end)
        got |= {r[SEQ] for r in rows}
        time.sleep(0.1)
    assert seqs <= got
    reader.commit(end)
    return end, got
