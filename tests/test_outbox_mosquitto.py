"""The outbox (firmware/frugalmqtt/outbox.py) on a device against a real
mosquitto: a MicroPython device process killed with SIGKILL at random points
while publishing, and a device publishing while the broker is down. The device
side is tests/mp_client/outbox_device.py; tests/outbox_reboot.py drives it
(and runs the long soak, `make reboot-soak`)."""
import json
import time

import pytest

from hostkit import PahoSubscriber, micropython_binary
from outbox_reboot import Device, reboot_run, receive_run

STORED = -5  # frugalmqtt.outbox.STORED


@pytest.mark.parametrize("driver", ["client", "telem"])
def test_device_reboot_sigkill_loses_nothing(driver, mosquitto, tmp_path):
    # 6 SIGKILLs at seeded random moments (a fifth of them during start-up)
    # while publishing QoS 1 and QoS 2 as fast as the device can; each
    # restart reloads the outbox and resumes the persistent session (the full
    # client, and the telemetry profile's publish-only driver). Every
    # message whose publish() returned arrives, QoS 2 exactly once; nothing
    # arrives that the device did not publish.
    micropython_binary()
    broker = mosquitto()
    stats = reboot_run(broker, lambda t: PahoSubscriber(broker, t, persistent=True),
                       tmp_path / "outbox.bin", kills=6, seed=20261123, tail=60, driver=driver)
    print(json.dumps({k: v for k, v in stats.items() if not isinstance(v, list) or k ==
                      "kill_points"}))
    assert stats["missing"] == [], stats["missing"][:20]
    assert stats["qos2_dups"] == [], stats["qos2_dups"][:20]
    assert stats["unknown"] == [], stats["unknown"][:20]
    assert stats["accepted"] >= 60 + 6 and stats["qos2_accepted"] >= stats["accepted"] // 2 - 1
    assert sum(1 for k in stats["kill_points"][:-1] if k) >= 3, stats  # most kills hit a publishing run
    # restarts found unacknowledged messages in the outbox (the device reads
    # acks after bursts of 8: a kill finds some in flight or in the backlog)
    assert stats["reloaded_runs"] >= 3, stats


def test_device_reboot_inbound_qos2_never_delivered_twice(mosquitto, tmp_path):
    # The device subscribes at QoS 2 with a persistent session; 120 messages
    # come while it is killed 8 times. on_message works 30 ms after printing,
    # so most kills land after a delivery and before its PUBREC: mosquitto then
    # sends the PUBLISH again after the restart, and only the id recorded in
    # the outbox keeps it from on_message (without the record, every seed
    # tried delivered one twice). The id is recorded before on_message: a kill
    # between the record and the print loses that delivery, at most one per kill.
    micropython_binary()
    broker = mosquitto("max_queued_messages 100000")
    pub = PahoSubscriber(broker, "frugal/outbox/unused")
    try:
        stats = receive_run(broker, pub, tmp_path / "outbox.bin", kills=8, seed=20261124,
                            n=120, gap=0.01, work_ms=30)
    finally:
        pub.stop()
    print(json.dumps({k: v for k, v in stats.items() if not isinstance(v, list)}),
          stats["missing"])
    assert stats["dups"] == [], stats["dups"][:20]
    assert stats["unknown"] == [], stats["unknown"]
    assert len(stats["missing"]) <= stats["kills"], stats["missing"]
    assert "end" not in stats["missing"]


@pytest.mark.parametrize("runtime", ["micropython", "cpython"])
def test_offline_publishes_are_stored_and_drain_in_order(runtime, mosquitto, tmp_path):
    # Online: 5 messages. Broker down: 40 more; publish() never waits for the
    # link (the first ones take the slots, the rest return STORED). Broker
    # back (with its persistence): all 45 reach the persistent subscriber, in
    # publish order.
    if runtime == "micropython":
        micropython_binary()
    broker = mosquitto("persistence true")
    sub = PahoSubscriber(broker, "frugal/outbox/offline", persistent=True)
    d = None
    try:
        params = dict(host=broker.host, port=broker.port, cid="offline-" + runtime,
                      topic="frugal/outbox/offline", path=str(tmp_path / "outbox.bin"),
                      size=8192, n=5, m=40)
        d = Device(runtime, "offline", params, stdin=True)
        assert d.wait_line("online", 30), d.lines
        sub.wait(lambda ms: len(ms) >= 5, "the 5 online messages")
        broker.stop()
        d.send("down")
        t0 = time.monotonic()
        assert d.wait_line("offline", 30), (d.lines, d.finish(), d.err)
        offline_s = time.monotonic() - t0
        pubs = d.published()
        results = [r for n, q, r in pubs[5:]]
        assert len(results) == 40
        assert results[-36:] == [STORED] * 36, results  # beyond the 4 slots: in the file
        assert all(r > 0 for r in results[:4]), results
        assert offline_s < 10  # no reconnect attempt inside publish()
        broker.start()
        d.send("up")
        assert d.wait_line("flushed", 60), (d.lines, d.finish(), d.err)
        assert d.finish() == 0, d.err
        want = [b"%d" % k for k in range(45)]
        got = sub.wait(lambda ms: set(want) <= set(m.payload for m in ms), "45 messages")
        payloads = [m.payload for m in got]
        firsts = []
        for p in payloads:
            if p not in firsts:
                firsts.append(p)
        assert firsts == want, payloads  # (QoS 1: a redelivery may repeat one)
        connects = [int(l.split()[1]) for l in d.lines if l.split()[0] in ("offline", "flushed")]
        assert connects[1] > connects[0], d.lines  # it reconnected to drain
    finally:
        if d and d.proc.poll() is None:
            d.kill()
        sub.stop()


def test_asyncio_client_takes_an_outbox(mosquitto, tmp_path):
    # AMQTTClient(outbox=...): with 2 slots the later messages wait in the
    # file (STORED) and follow in order; a restart finds nothing left.
    # (CPython asyncio, in-process.)
    import asyncio
    from frugalmqtt.aclient import AMQTTClient
    from frugalmqtt.outbox import Outbox

    broker = mosquitto()
    sub = PahoSubscriber(broker, "frugal/outbox/async", persistent=True)
    path = str(tmp_path / "outbox.bin")

    async def run():
        ob = Outbox(path, 4096)
        c = AMQTTClient("async-ob", broker.host, broker.port, clean=False, outbox=ob, slots=2)
        await c.connect()
        got = [await c.publish(b"frugal/outbox/async", b"%d" % k, 1 + k % 2) for k in range(8)]
        await c.flush()
        await c.disconnect()
        ob.close()
        return got, ob.backlog

    try:
        got, backlog = asyncio.run(run())
        assert got.count(STORED) >= 1 and all(r > 0 or r == STORED for r in got), got
        assert backlog == 0
        msgs = sub.wait(lambda ms: len(ms) >= 8, "8 messages")
        for q in (1, 2):  # in order per QoS (mosquitto forwards QoS 2 at PUBREL)
            assert [m.payload for m in msgs if m.qos == q] == [b"%d" % k for k in range(8)
                                                               if 1 + k % 2 == q], msgs
        from frugalmqtt.session import Session
        s = Session("x", 5, slots=2)
        ob = Outbox(path, 4096)
        ob.attach(s)
        assert s.pending() == 0 and ob.backlog == 0
        ob.close()
    finally:
        sub.stop()
