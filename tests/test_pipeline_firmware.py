"""The telemetry firmware's own output through the whole pipeline: the
firmware (firmware/app, on the MicroPython unix port and on CPython)
publishes temperature and humidity, each reading's two sensors with the same
seq on their own topics, to mosquitto; `pipeline collect` writes what
arrives; the audit, the batch analytics and the stream must count every
reading once, both metrics in every table."""
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from pipeline import analytics, audit, job, stream, traces
from pipeline.broker import Broker
from pipeline.collect import Collector
from hostkit import micropython_binary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "firmware" / "app"))
import sensors  # noqa: E402  (the firmware's simulated sensors, for the expected values)

SAMPLES = 4
MICROPYPATH = ":".join([".frozen", str(REPO / "firmware"), str(REPO / "firmware" / "app"),
                        str(REPO / "boards" / "unix")])
RUNTIMES = {  # run id -> (device, command, status messages every n samples)
    "mp": ("unix-1", [micropython_binary(), "-X", "heapsize=256k",
                      str(REPO / "firmware" / "app" / "main.py")], 2),
    # CPython has no gc.mem_free(): no status messages there
    "cpython": ("cpy-1", [sys.executable, str(REPO / "tests" / "firmware_cpython.py")], 0),
}


def expected_values(kind):
    """The SAMPLES readings of a simulated sensor, rounded as the payload is."""
    s = sensors.KINDS[kind]()
    return [round(s.read(), 2) for _ in range(SAMPLES)]


def run_device(broker, out, run_id, tmp):
    """Subscribe the collector (persistent session), let the firmware publish
    SAMPLES readings, then collect everything it sent."""
    dev, cmd, status_every = RUNTIMES[run_id]
    c = Collector(Broker(broker.host, broker.port), "sensors/#", out, run_id=run_id,
                  client_id="col-" + run_id, batch=50, idle_ms=100)
    c.client.connect()
    assert c.client.subscribe("sensors/#", qos=1) == 1
    c.client.close()  # the broker queues for our session while the device runs
    d = tmp / dev
    d.mkdir()
    cfg = {"client_id": dev, "broker": {"host": broker.host, "port": broker.port},
           "qos": 1, "period_ms": 100, "samples": SAMPLES, "status_every": status_every,
           "expiry_s": 600, "sensors": ["sim_temp", "sim_humidity"]}
    (d / "config.json").write_text(json.dumps(cfg))
    p = subprocess.run(cmd, cwd=d, env=dict(os.environ, MICROPYPATH=MICROPYPATH),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "telemetry: done" in p.stdout, p.stdout + p.stderr
    n = 2 * SAMPLES + (SAMPLES // status_every if status_every else 0)
    assert c.run(duration_s=20, count=n, progress=False) == n
    return dev, n


def test_firmware_telemetry_through_collect_audit_analytics_and_stream(mosquitto, spark,
                                                                         tmp_path):
    broker = mosquitto()
    out = str(tmp_path / "traces")
    devices = {run: run_device(broker, out, run, tmp_path) for run in RUNTIMES}
    rcv = traces.read(spark, out, "received")
    pub = traces.read(spark, out, "published")

    # The audit: every message once (collect writes no published rows:
    # every message is a "stray" of its run), no duplicates, none flagged
    tables, viol = audit.tables(audit.facts(pub, rcv))
    runs = {r["run_id"]: r for r in tables["run"].to_dict("records")}
    assert set(runs) == set(RUNTIMES) and viol == []
    for run, (dev, n) in devices.items():
        r = runs[run]
        assert (r["stray"], r["duplicates"], r["dup_flagged"], r["lost"]) == (n, 0, 0, 0), r
        assert r["order_violations"] == 0

    # The analytics: both metrics, SAMPLES readings each, the firmware's values
    want = {"temp": expected_values("sim_temp"), "humidity": expected_values("sim_humidity")}
    tel = analytics.telemetry(rcv)
    for w in ("1m", "1h"):
        got = {}
        for x in analytics.windows(tel, w).collect():
            got.setdefault((x.run_id, x.device, x.sensor), []).append(x)
        assert set(got) == {(run, dev, s) for run, (dev, _) in devices.items() for s in want}
        for (run, dev, sensor), rows in got.items():
            assert sum(x["count"] for x in rows) == SAMPLES, (w, run, sensor)
            assert min(x["min"] for x in rows) == min(want[sensor])
            assert max(x["max"] for x in rows) == max(want[sensor])
    assert analytics.gaps(tel).collect() == []

    # The whole job and the stream over the same files agree
    summary = job.run(spark, out, str(tmp_path / "report"), ("1m", "1h"))
    assert summary["ok"] and summary["gaps"] == []
    assert sorted((r["run_id"], r["duplicates"]) for r in summary["runs"]) == \
        [("cpython", 0), ("mp", 0)]
    live = str(tmp_path / "live")
    stream.run(spark, out, live, ("1h",), once=True)
    counts = {}
    for x in spark.read.parquet(live + "/windows_1h").collect():
        counts[x.run_id, x.sensor] = counts.get((x.run_id, x.sensor), 0) + x["count"]
    assert counts == {(run, s): SAMPLES for run in RUNTIMES for s in want}
