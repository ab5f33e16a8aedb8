"""The telemetry firmware (firmware/app/) unchanged on the MicroPython unix
port, with boards/unix (simulated sensors, `network` stand-in), against a real
mosquitto; and its payload read by host_sim.schema on CPython."""
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from host_sim import schema
from hostkit import PahoSubscriber, micropython_binary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "firmware" / "app"))
sys.path.insert(0, str(REPO / "tests" / "mp_api"))
import telemetry  # noqa: E402  (payload() runs on CPython too)
from apihost import certs, free_port, tls_listener  # noqa: E402,F401

MICROPYPATH = ":".join([".frozen", str(REPO / "firmware"), str(REPO / "firmware" / "app"),
                        str(REPO / "boards" / "unix")])


def config(broker, **over):
    cfg = {"client_id": "unix-1", "wifi": {"ssid": "lab", "password": "pw", "timeout_ms": 500},
           "broker": {"host": broker.host, "port": broker.port, "keepalive": 30},
           "qos": 1, "period_ms": 100, "samples": 4, "status_every": 2, "expiry_s": 600,
           "sensors": ["sim_temp", "sim_humidity"]}
    cfg.update(over)
    return cfg


def start_firmware(tmp_path, cfg):
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return subprocess.Popen([micropython_binary(), "-X", "heapsize=256k",
                             str(REPO / "firmware" / "app" / "main.py")], cwd=tmp_path,
                            env=dict(os.environ, MICROPYPATH=MICROPYPATH),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_firmware(tmp_path, cfg, timeout=30):
    p = start_firmware(tmp_path, cfg)
    out, _ = p.communicate(timeout=timeout)
    return p.returncode, out


def props_of(m):
    p = m.properties
    return (getattr(p, "ContentType", None), getattr(p, "MessageExpiryInterval", None),
            dict(getattr(p, "UserProperty", None) or []))


@pytest.mark.parametrize("value", [21.5, -3.25, 0.0, 1e6, float("nan")])
def test_payload_reads_with_host_sim_schema(value):
    data = telemetry.payload('dev "7"', 42, 1732300000123, "temp", value)
    dev, seq, ts, sensor, v = schema.decode_payload(data)
    assert (dev, seq, ts, sensor) == ('dev "7"', 42, 1732300000123, "temp")
    if math.isnan(value):
        assert v is None
    else:
        assert v == round(value, 2)
    # the same fields, in the same order, as host_sim writes them
    assert list(json.loads(data)) == list(json.loads(schema.encode_payload("d", 1, 2, "t", 3.0)))


def test_firmware_publishes_telemetry_and_status(tmp_path, mosquitto):
    broker = mosquitto()
    sub = PahoSubscriber(broker, "sensors/#", version=5, qos=1)
    try:
        rc, out = run_firmware(tmp_path, config(broker))
        assert rc == 0, out
        assert "wifi: joined lab" in out and "telemetry: done, 4 samples" in out
        msgs = sub.wait(lambda ms: len(ms) >= 10, "8 readings and 2 status messages")
    finally:
        sub.stop()
    readings = [m for m in msgs if not m.topic.endswith("/status")]
    status = [m for m in msgs if m.topic.endswith("/status")]
    assert len(readings) == 8 and len(status) == 2
    for sensor, unit in (("temp", "C"), ("humidity", "%")):
        rows = [m for m in readings if m.topic == "sensors/unix-1/" + sensor]
        decoded = [schema.decode_payload(m.payload) for m in rows]
        assert [d[1] for d in decoded] == [0, 1, 2, 3]
        assert all(d[0] == "unix-1" and d[3] == sensor for d in decoded)
        ts = [d[2] for d in decoded]
        assert ts == sorted(ts) and abs(ts[0] / 1000.0 - time.time()) < 60
        assert all(m.qos == 1 for m in rows)
        for m in rows:
            ctype, expiry, users = props_of(m)
            assert ctype == "application/json"
            assert 0 < expiry <= 600
            assert users == {"unit": unit}
    temps = [schema.decode_payload(m.payload)[4] for m in readings
             if m.topic.endswith("/temp")]
    assert all(18 < v < 24 for v in temps)  # the simulated sine around 21 C
    for m in status:
        s = json.loads(m.payload)
        assert s["dev"] == "unix-1" and s["board"] == "unix"
        assert s["heap_free"] > 0 and s["heap_used"] > 0 and s["uptime_s"] >= 0
        assert s["connects"] == 1 and s["dropped"] == 0
    assert [json.loads(m.payload)["seq"] for m in status] == [2, 4]
    assert (tmp_path / "seq.txt").read_text() == "4"


def test_deep_sleep_keeps_the_sequence_across_resets(tmp_path, mosquitto):
    broker = mosquitto()
    sub = PahoSubscriber(broker, "sensors/unix-1/temp", version=5, qos=1)
    try:
        cfg = config(broker, sleep="deep", samples=0, status_every=0, sensors=["sim_temp"])
        for boot in range(3):  # each "boot" samples once, deep-sleeps and ends
            rc, out = run_firmware(tmp_path, cfg)
            assert rc == 0 and "sleep: deep for 100 ms" in out, out
        msgs = sub.wait(lambda ms: len(ms) >= 3, "three readings")
    finally:
        sub.stop()
    assert [schema.decode_payload(m.payload)[1] for m in msgs] == [0, 1, 2]


def test_battery_mode_publishes_each_wake_in_one_cycle(tmp_path, mosquitto):
    """"wake" in the config: each run of the firmware is one wake (2 readings
    of each sensor, one frugalmqtt.wake cycle, then deep sleep: the process
    ends). The sequence number and the session's state live in the unix
    board's RTC stand-in (rtc.bin); a wake with the broker down keeps its
    readings for the next one."""
    broker = mosquitto("persistence true")
    sub = PahoSubscriber(broker, "sensors/unix-1/temp", version=5, qos=1, persistent=True)
    try:
        cfg = config(broker, samples=0, status_every=0, sensors=["sim_temp"],
                     session={"slots": 4, "slot_size": 160},
                     wake={"period_ms": 10, "readings": 2, "deadline_ms": 3000})
        rc, out = run_firmware(tmp_path, cfg)
        assert rc == 0 and "wake: 2 readings, 2 acknowledged, 0 waiting" in out, out
        broker.stop()
        rc, out = run_firmware(tmp_path, cfg)
        assert rc == 0 and "wake: 2 readings, 0 acknowledged, 2 waiting" in out, out
        broker.start()
        rc, out = run_firmware(tmp_path, cfg)
        assert rc == 0 and "wake: 2 readings, 4 acknowledged, 0 waiting" in out, out
        msgs = sub.wait(lambda ms: len(ms) >= 6, "six readings")
    finally:
        sub.stop()
    assert sorted(schema.decode_payload(m.payload)[1] for m in msgs) == list(range(6))
    assert not (tmp_path / "seq.txt").exists()  # kept in the wake store instead


def test_wifi_gives_up_after_its_retries(tmp_path, mosquitto):
    broker = mosquitto()
    cfg = config(broker, wifi={"ssid": "unreachable-ap", "timeout_ms": 200, "retries": 2,
                               "backoff_ms": 50})
    rc, out = run_firmware(tmp_path, cfg)
    assert "wifi: attempt 1/2 to join unreachable-ap failed (status 201)" in out
    assert "wifi: attempt 2/2" in out and "could not join unreachable-ap" in out
    assert "mqtt:" not in out  # never got as far as the broker
    assert rc == 0  # it sleeps to try again after a reset


def test_readings_taken_offline_arrive_after_the_broker_comes_back(tmp_path, mosquitto):
    """QoS 1 readings wait in the session's slots while the broker is down."""
    broker = mosquitto("persistence true")
    got = []
    cond = threading.Condition()
    sub = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="offline-sub",
                      protocol=paho.MQTTv311, clean_session=False)
    sub.reconnect_delay_set(0.1, 0.3)

    def on_message(c, u, m):
        with cond:
            got.append(schema.decode_payload(m.payload)[1])
            cond.notify_all()

    sub.on_message = on_message
    sub.on_connect = lambda c, u, f, r, p: c.subscribe("sensors/unix-1/temp", 1)
    sub.connect(broker.host, broker.port)
    sub.loop_start()
    try:
        deadline = time.monotonic() + 5
        while not broker.log().count("offline-sub 1 sensors/unix-1/temp"):
            assert time.monotonic() < deadline, broker.log()
            time.sleep(0.05)
        broker.stop()  # saves the subscriber's session
        p = start_firmware(tmp_path, config(broker, samples=8, period_ms=250, status_every=0,
                                            sensors=["sim_temp"]))
        time.sleep(1.2)  # about 4 readings while the broker is down
        broker.start()
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0, out
        with cond:
            assert cond.wait_for(lambda: len(set(got)) >= 8, 10), (got, out)
    finally:
        sub.disconnect()
        sub.loop_stop()
    assert out.count("mqtt: connect failed") >= 2
    assert sorted(set(got)) == list(range(8))
    assert "0 dropped" in out


def test_outbox_keeps_offline_readings_beyond_the_slots_across_a_reset(tmp_path, mosquitto):
    """With "outbox" in the config (the telemetry profile's Outbox), 2 slots
    and the broker down, 6 readings are taken: 2 take the slots, 4 wait in
    the file, none is dropped; the firmware stops (a reset: all RAM state
    gone). Started again with the broker up, it reloads the file and every
    reading arrives, in order."""
    broker = mosquitto("persistence true")
    sub = PahoSubscriber(broker, "sensors/unix-1/temp", version=5, qos=1, persistent=True)
    try:
        broker.stop()  # saves the subscriber's session
        cfg = config(broker, samples=6, period_ms=50, status_every=0, sensors=["sim_temp"],
                     session={"slots": 2}, outbox={"path": "outbox.bin", "size": 4096})
        rc, out = run_firmware(tmp_path, cfg)
        assert rc == 0 and out.count("mqtt: connect failed") == 6, out
        assert "0 dropped" in out, out
        broker.start()
        rc, out = run_firmware(tmp_path, dict(cfg, samples=2))
        assert rc == 0 and "0 dropped" in out, out
        msgs = sub.wait(lambda ms: len(set(m.payload for m in ms)) >= 8, "8 readings")
    finally:
        sub.stop()
    seqs = []
    for m in msgs:
        n = schema.decode_payload(m.payload)[1]
        if n not in seqs:
            seqs.append(n)
    assert seqs == list(range(8)), seqs


def test_firmware_over_tls_verifies_the_broker(tmp_path, mosquitto, certs):
    port = free_port()
    broker = mosquitto(*tls_listener(port, certs))
    sub = PahoSubscriber(broker, "sensors/unix-1/temp", version=5, qos=1)
    try:
        cfg = config(broker, samples=2, status_every=0, sensors=["sim_temp"],
                     tls={"ca": str(certs / "ca.der")})
        cfg["broker"]["port"] = port
        rc, out = run_firmware(tmp_path, cfg)
        assert rc == 0 and "mqtt: connected to 127.0.0.1:%d" % port in out, out
        msgs = sub.wait(lambda ms: len(ms) >= 2, "two readings over TLS")
        # the same firmware with a CA that did not sign the broker's certificate
        cfg.update(client_id="unix-2", qos=0, tls={"ca": str(certs / "other.der")})
        rc, out = run_firmware(tmp_path, cfg)
    finally:
        sub.stop()
    assert [schema.decode_payload(m.payload)[1] for m in msgs] == [0, 1]
    assert rc == 0 and out.count("mqtt: connect failed") == 2, out
    assert "2 dropped" in out  # QoS 0 readings with no connection
