# A simulated device: the real frugalmqtt client with a simulated sensor,
# publishing telemetry (host_sim/schema.py encode_payload) and reporting what
# happened to each message. Plain MicroPython (also runs on CPython): no
# f-strings, no typing.
#
# Under the MicroPython unix port:
#   MICROPYPATH=firmware:. micropython host_sim/device.py PROGRAM PARAMS_JSON
#   (PARAMS_JSON "-": read from one line on stdin)
# prints one "@@ {json}" line per event and "@@ {"ev": "end", ...}" last.
# On CPython host_sim.devices calls run(program, params, sink) in a thread:
# the same events, passed to sink as dicts.
#
# Programs:
#   telemetry  publish n messages at `qos` (rate msg/s, 0 = as fast as the
#              window allows), then flush; events "pub" (seq, pid, t_pub),
#              "done" (seq, pid, reason, t_ack, attempts), "end".
#   edge       connect, publish `n` messages at `qos`, poll for `seconds`
#              (for the scripted-broker cases); events "msg", "done", "error",
#              "end" with the client's state.
import sys
import time

try:
    import json
except ImportError:
    import ujson as json

from frugalmqtt.client import MQTTClient, ticks_ms, ticks_diff, sleep_ms
from frugalmqtt.client import WINDOW_FULL
from host_sim.schema import encode_payload


def now_ms():
    return time.time_ns() // 1000000


class Sensor:
    """A deterministic temperature-like signal (a triangle wave over seq)."""

    def __init__(self, name, base):
        self.name = name
        self.base = base

    def read(self, seq):
        k = seq % 40
        return self.base + (k if k < 20 else 40 - k) / 10


def publish_pid(buf, off):
    """The packet id of the QoS 1/2 PUBLISH at buf[off], else 0."""
    first = buf[off]
    if first >> 4 != 3 or not first & 0x06:
        return 0
    i = off + 1
    while buf[i] & 0x80:
        i += 1
    i += 1
    j = i + 2 + ((buf[i] << 8) | buf[i + 1])
    return (buf[j] << 8) | buf[j + 1]


class Device(MQTTClient):
    """MQTTClient that also counts how often each outbound PUBLISH packet id
    was written (1 + resends), read from the packets it writes."""

    def __init__(self, *args, **kw):
        MQTTClient.__init__(self, *args, **kw)
        self.writes = {}  # packet id -> PUBLISH writes

    def send(self, t, n, reason=0, buf=None):  # every packet the core writes but QoS 0
        MQTTClient.send(self, t, n, reason, buf)
        if buf is not None:  # (without: a two-byte-header ack)
            pid = publish_pid(buf, t)
            if pid:
                self.writes[pid] = self.writes.get(pid, 0) + 1


def emitter(sink):
    """emit(ev, dict): a "@@ json" line on stdout, or sink(dict) in-process
    (one per device: CPython runs many devices at once)."""
    def emit(ev, d):
        d["ev"] = ev
        if sink is None:
            print("@@ " + json.dumps(d))
        else:
            sink(d)
    return emit


def make_client(p):
    kw = {}
    if p.get("session_expiry") is not None:
        kw["session_expiry"] = p["session_expiry"]
    for k in ("slots", "inbound", "max_packet"):
        if k in p:
            kw[k] = p[k]
    return Device(p["cid"], p["host"], p["port"], version=p["version"],
                  keepalive=p.get("keepalive", 60), clean=p.get("clean", True),
                  backoff_ms=(p.get("backoff_min_ms", 20), p.get("backoff_max_ms", 500)),
                  timeout_ms=p.get("timeout_ms", 3000), **kw)


def telemetry(p, emit):
    c = make_client(p)
    qos = p["qos"]
    n = p["n"]
    topic = p["topic"]
    dev = p["cid"]
    sensor = Sensor("temp", 20 + len(dev) % 5)
    interval = 1000 // p["rate"] if p.get("rate") else 0
    inflight = {}  # pid -> [seq, t_pub]

    def on_done(pid, reason):
        f = inflight.pop(pid, None)
        if f is not None:
            emit("done", {"seq": f[0], "pid": pid, "reason": reason, "t_ack": now_ms(),
                          "attempts": c.writes.pop(pid, 0)})

    c.on_done = on_done
    c.ensure_connected()
    emit("connected", {"sp": bool(c.sp)})
    t_next = ticks_ms()
    for seq in range(n):
        t = now_ms()
        payload = encode_payload(dev, seq, t, sensor.name, sensor.read(seq))
        pid = WINDOW_FULL
        while pid == WINDOW_FULL:
            pid = c.publish(topic, payload, qos, False, None, 1000)
        if pid > 0:
            inflight[pid] = [seq, t]
        emit("pub", {"seq": seq, "pid": pid, "t_pub": t})
        c.poll(0)
        if interval:
            t_next += interval
            wait = ticks_diff(t_next, ticks_ms())
            while wait > 0:
                c.poll(wait)
                wait = ticks_diff(t_next, ticks_ms())
    flushed = c.flush(p.get("flush_ms", 20000))
    for pid in list(inflight):
        f = inflight[pid]
        emit("pending", {"seq": f[0], "pid": pid, "attempts": c.writes.get(pid, 0)})
    c.disconnect()
    emit("end", {"flushed": flushed, "connects": c.connects, "sp": bool(c.sp)})


def _error(emit, where, e):
    emit("error", {"where": where, "type": type(e).__name__,
                   "reason": getattr(e, "reason", e.args[0] if e.args else None),
                   "text": str(e)})


def edge(p, emit):
    """reconnect=False so every error surfaces here; the program reconnects
    by itself (as the client would) and reports each error."""
    c = make_client(p)
    c.reconnect = False
    counts = {"msg": 0, "done": 0}

    def on_message(m):
        counts["msg"] += 1
        emit("msg", {"topic": str(bytes(m.topic), "utf-8"),
                     "payload": str(bytes(m.payload), "utf-8"), "qos": m.qos, "dup": m.dup})

    def on_done(pid, reason):
        counts["done"] += 1
        emit("done", {"pid": pid, "reason": reason})

    c.on_message = on_message
    c.on_done = on_done
    try:
        emit("connected", {"sp": c.connect()})
        for i in range(p.get("n", 0)):
            c.publish(p["topic"], b"e%d" % i, p.get("qos", 1))
    except Exception as e:
        _error(emit, "setup", e)
    t0 = ticks_ms()
    while ticks_diff(ticks_ms(), t0) < p.get("seconds", 1) * 1000:
        try:
            if c.sock is None:
                sleep_ms(50)
                emit("connected", {"sp": c.connect()})
            else:
                c.poll(20)
        except Exception as e:
            _error(emit, "poll", e)
            c.close()
    emit("end", {"connects": c.connects, "connected": c.connected, "pending": c.pending(),
                 "messages": counts["msg"], "done": counts["done"]})
    if c.sock:
        c.disconnect()


PROGRAMS = {"telemetry": telemetry, "edge": edge}


def run(program, params, sink=None):
    PROGRAMS[program](params, emitter(sink))


if __name__ == "__main__":
    # PARAMS_JSON "-": one line on stdin (the unix port v1.29 dies with "FATAL:
    # uncaught NLR" on a command-line argument of 250 characters or more)
    arg = sys.argv[2]
    run(sys.argv[1], json.loads(sys.stdin.readline() if arg == "-" else arg))
