"""Fleet devices: the telemetry program of host_sim/device.py on the
project's asyncio client (AMQTTClient), hundreds of them as tasks on one
event loop thread (CPython). Same events as the other runtimes, so the
runner treats them alike (runtime "asyncio" in a scenario)."""
import asyncio
import threading
import traceback

from frugalmqtt.aclient import AMQTTClient
from .device import Sensor, emitter, now_ms, publish_pid
from .schema import encode_payload


class ADevice(AMQTTClient):
    def __init__(self, *args, **kw):
        AMQTTClient.__init__(self, *args, **kw)
        self.writes = {}

    def _send(self, buf, off, n):  # every packet the core writes
        AMQTTClient._send(self, buf, off, n)
        pid = publish_pid(buf, off)
        if pid:
            self.writes[pid] = self.writes.get(pid, 0) + 1


async def telemetry(p, emit):
    kw = {}
    if p.get("session_expiry") is not None:
        kw["session_expiry"] = p["session_expiry"]
    c = ADevice(p["cid"], p["host"], p["port"], version=p["version"],
                keepalive=p.get("keepalive", 60), clean=p.get("clean", True),
                backoff_ms=(p.get("backoff_min_ms", 20), p.get("backoff_max_ms", 500)),
                timeout_ms=p.get("timeout_ms", 3000), slots=p.get("slots", 8), **kw)
    qos, topic, dev = p["qos"], p["topic"], p["cid"]
    sensor = Sensor("temp", 20 + len(dev) % 5)
    inflight = {}

    def on_done(pid, reason):
        f = inflight.pop(pid, None)
        if f is not None:
            emit("done", {"seq": f[0], "pid": pid, "reason": reason, "t_ack": now_ms(),
                          "attempts": c.writes.pop(pid, 0)})

    c.on_done = on_done
    delay = p.get("backoff_min_ms", 20) / 1000
    while True:  # the first connect is one attempt: retry while the link refuses
        try:
            sp = await c.connect()
            break
        except Exception:
            await asyncio.sleep(delay)
            delay = min(delay * 2, p.get("backoff_max_ms", 500) / 1000)
    emit("connected", {"sp": sp})
    interval = 1 / p["rate"] if p.get("rate") else 0
    for seq in range(p["n"]):
        t = now_ms()
        pid = await c.publish(topic, encode_payload(dev, seq, t, sensor.name, sensor.read(seq)),
                              qos)
        if pid > 0:
            inflight[pid] = [seq, t]
        emit("pub", {"seq": seq, "pid": pid, "t_pub": t})
        if interval:
            await asyncio.sleep(interval)
    try:
        await asyncio.wait_for(c.flush(), p.get("flush_ms", 20000) / 1000)
        flushed = True
    except asyncio.TimeoutError:
        flushed = False
    for pid, f in list(inflight.items()):
        emit("pending", {"seq": f[0], "pid": pid, "attempts": c.writes.get(pid, 0)})
    await c.disconnect()
    emit("end", {"flushed": flushed, "connects": c.connects, "sp": bool(c.sp)})


class _Loop:
    lock = threading.Lock()
    loop = None

    @classmethod
    def get(cls):
        with cls.lock:
            if cls.loop is None:
                cls.loop = asyncio.new_event_loop()
                threading.Thread(target=cls.loop.run_forever, name="host_sim-fleet",
                                 daemon=True).start()
            return cls.loop


class AsyncDeviceRun:
    """Like devices.DeviceRun, for one asyncio device task."""
    runtime = "asyncio"

    def __init__(self, params):
        self.params = params
        self.events = []
        self.error = None
        self.future = None

    def start(self):
        self.future = asyncio.run_coroutine_threadsafe(self._main(), _Loop.get())
        return self

    async def _main(self):
        try:
            await telemetry(self.params, emitter(self.events.append))
        except Exception:
            self.error = traceback.format_exc()

    @property
    def done(self):
        return self.future.done()

    @property
    def ended(self):
        return bool(self.events) and self.events[-1]["ev"] == "end"

    def kill(self):
        self.future.cancel()

    def join(self, timeout=None):
        try:
            self.future.result(timeout)
        except Exception as e:
            self.error = self.error or repr(e)
        return self

    def of(self, ev):
        return [e for e in self.events if e["ev"] == ev]
