"""Deep-sleep wake cycles in the simulator: a device process (bench/mp/wake.py)
runs once per wake and exits (the process ending is the deep sleep: its heap
is gone, the frugalmqtt state survives in a file standing in for RTC memory),
through a host_sim.link.Link to mosquitto, with a recording subscriber.

- run_wakes(): `make compare`'s deep-sleep table: a device wakes N times and
  publishes one reading each time over a fixed-latency link; round trips from
  socket open to the last ack, bytes on the wire, wall and CPU time per wake,
  messages lost and duplicated, for frugalmqtt's cycle (wake.Wake),
  umqtt.simple and mqtt_as.
- sweep(): the cycle's fault sweep (scenario kind "wake",
  host_sim/scenarios/wake_sweep.toml): the link cut before and after every
  packet of a resumed cycle, the device reset before every step, the broker
  restarted between wakes; every stored QoS 1/2 message must arrive, a QoS 2
  one exactly once, and the link log must be clean.
"""
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paho.mqtt.client as paho
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes

from frugalmqtt_host.ref.codec import PUBACK, PUBCOMP, PUBLISH
from .link import Link, Rule, protocol_violations

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "mp" / "wake.py"
ACKS = (PUBACK, PUBCOMP)


class Recorder:
    """A persistent QoS 2 subscriber to wake/#: how often each payload came."""

    def __init__(self, host, port, cid="wake-recorder"):
        self.got = Counter()
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cid,
                             protocol=paho.MQTTv5)
        self.c.reconnect_delay_set(0.05, 0.5)
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = lambda *a: self.ready.set()
        self.c.on_message = self._on_message
        p = Properties(PacketTypes.CONNECT)
        p.SessionExpiryInterval = 3600
        self.c.connect(host, port, clean_start=False, properties=p)
        self.c.loop_start()
        if not self.ready.wait(10):
            self.stop()
            raise RuntimeError("recorder never got SUBACK")

    def _on_connect(self, client, userdata, flags, reason, properties):
        if flags.session_present:
            self.ready.set()
        else:
            client.subscribe("wake/#", 2)

    def _on_message(self, client, userdata, m):
        with self.lock:
            self.got[m.payload.decode()] += 1

    def count(self, payloads):
        with self.lock:
            return [self.got[p] for p in payloads]

    def wait(self, payloads, timeout=5.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end and 0 in self.count(payloads):
            time.sleep(0.02)
        time.sleep(0.1)  # a late duplicate lands first

    def stop(self):
        self.c.disconnect()
        self.c.loop_stop()


class Device:
    """How to start one wake: runtime "cpython" or "micropython"; path: the
    unix port's MICROPYPATH (compiled modules and bench/mp/wake.mpy, as
    `make compare` builds them), else the sources."""

    def __init__(self, runtime="micropython", path=None, micropython=None, extra=()):
        self.runtime = runtime
        self.env = dict(os.environ)
        if runtime == "cpython":
            self.cmd = [sys.executable, str(SCRIPT)]
            self.env["PYTHONPATH"] = str(REPO / "firmware")
        else:
            mp = micropython or str(Path(sys.executable).parent / "micropython")
            if path:
                self.cmd = [mp, "-X", "heapsize=256k", "-m", "wake"]
                self.env["MICROPYPATH"] = str(path)
            else:  # the sources, and `extra` directories (other libraries, stand-ins)
                self.cmd = [mp, "-X", "heapsize=256k", str(SCRIPT)]
                self.env["MICROPYPATH"] = ":".join([".frozen", str(REPO / "firmware")] + list(extra))

    def wake(self, *args, timeout=30):
        """One wake; returns (the "@@" lines split, CPU seconds, exit status)."""
        p = subprocess.Popen(self.cmd + [str(a) for a in args], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        out = p.stdout.read()
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        timer.cancel()
        lines = [l[3:].split() for l in out.decode().splitlines() if l.startswith("@@ ")]
        if p.returncode not in (0, 3):  # 3: the scripted reset
            raise RuntimeError("wake %s failed (%d): %s\n%s" % (
                " ".join(map(str, args)), p.returncode, out.decode()[-2000:],
                err.decode()[-2000:]))
        return lines, ru.ru_utime + ru.ru_stime, p.returncode


def _pick(lines, key):
    return [l[1:] for l in lines if l[0] == key]


# ---- make compare: N wakes, one QoS 1 reading each ------------------------------

def run_wakes(lib, device, upstream, recorder, cid, wakes=100, latency_ms=50, version=4, qos=1,
              store_dir="/tmp"):
    """Figures per wake, averaged over `wakes` wakes (one process each). cid:
    the client id (of the same length for every library: it is in the
    CONNECT, the topic and the payload); upstream: the broker's (host, port)."""
    store = os.path.join(str(store_dir), cid + ".rtc")
    if os.path.exists(store):
        os.remove(store)
    link = Link(upstream, latency_ms=latency_ms, name=cid).start()
    sent = []
    first = []  # each wake's first connection
    cpu = wall = 0.0
    try:
        for w in range(wakes):
            first.append(len(link.t_open))
            p = "%s-%03d" % (cid, w)
            lines, c, _ = device.wake(lib, "127.0.0.1", link.port, cid, store, p, qos, 5000, 0,
                                      version)
            sent += [x[0] for x in _pick(lines, "stored")]
            cpu += c
            wall += int(_pick(lines, "wall_ms")[0][0])
        recorder.wait(sent)
    finally:
        link.close()
    n = recorder.count(sent)
    rtt = 2 * latency_ms / 1000
    trips = []  # per wake: from its first socket open to its last ack
    for w, c in enumerate(first):
        end = first[w + 1] if w + 1 < len(first) else len(link.t_open)
        acks = [e["due"] for e in link.log if c <= e["conn"] < end and e["dir"] == "s2c"
                and e["type"] in ACKS]
        if acks:
            trips.append((max(acks) - link.t_open[c]) / rtt)
    return {"lib": lib, "wakes": wakes, "connections": len(link.t_open),
            # the first wake (nothing remembered yet), then the mean of the others
            "round_trips_first": trips[0] if trips else float("nan"),
            "round_trips": sum(trips[1:]) / len(trips[1:]) if trips[1:] else float("nan"),
            "round_trips_each": trips,
            "bytes_up": link.bytes["c2s"] / wakes, "bytes_down": link.bytes["s2c"] / wakes,
            "wall_ms": wall / wakes, "cpu_ms": cpu * 1000 / wakes,
            "lost": sum(1 for k in n if not k), "dup": sum(1 for k in n if k > 1),
            "sent": len(sent), "violations": protocol_violations(link.log)}


# ---- the fault sweep ----------------------------------------------------------------

# A resumed cycle with one QoS 1 and one QoS 2 message stored: its packets, by
# direction, in the order they go (the sweep cuts before and after each).
CYCLE = {"c2s": [("CONNECT", 1), ("PUBLISH", 1), ("PUBLISH", 2), ("PUBREL", 1),
                 ("DISCONNECT", 1)],
         "s2c": [("CONNACK", 1), ("PUBACK", 1), ("PUBREC", 1), ("PUBCOMP", 1)]}


class Case:
    def __init__(self, label, rules=(), reset_at=0, restart=False):
        self.label = label
        self.rules = rules
        self.reset_at = reset_at
        self.restart = restart


def cases(steps):
    """Every cut point of CYCLE (drop: before the packet, after: once it
    went), a reset before each of the `steps` steps of wake 1, a broker
    restart. Rules are made afresh for each run (they count packets)."""
    out = []
    for d, packets in CYCLE.items():
        for t, nth in packets:
            for action in ("drop", "after"):
                out.append(Case("%s-%s%d-%s" % (d, t, nth, action), (d, t, nth, action)))
    for k in range(1, steps + 1):
        out.append(Case("reset-%d" % k, reset_at=k))
    out.append(Case("broker-restart", restart=True))
    return out


def run_case(case, device, broker, recorder, version, store_dir):
    """Wake 0 starts the session (the CONNACK's limits are remembered), wake 1
    stores a QoS 1 and a QoS 2 reading and meets the fault, wakes 2 and 3 run
    clean (a broker restart: between wakes 0 and 1, and 1 and 2). Returns
    what went wrong (empty: passed) and the steps wake 1 counted."""
    cid = "sw-%s-v%d-%s" % (device.runtime[:2], version, case.label)
    store = os.path.join(str(store_dir), cid + ".rtc")
    if os.path.exists(store):
        os.remove(store)
    stored = {}
    links = []
    steps = 0
    for w, payloads in enumerate(["w0:1", "w1q1:1,w1q2:2", "w2:2", ""]):
        if case.restart and w in (1, 2):
            broker.restart()
        rules = [Rule(*case.rules)] if case.rules and w == 1 else []
        link = Link((broker.host, broker.port), rules=rules, name=cid).start()
        links.append(link)
        try:
            lines, _, _ = device.wake(
                "frugalmqtt", "127.0.0.1", link.port, cid, store,
                ",".join("%s-%s" % (cid, p) for p in payloads.split(",") if p), 1, 3000,
                case.reset_at if w == 1 else 0, version)
        finally:
            link.close()
        for p, q in _pick(lines, "stored"):
            stored[p] = int(q)
        if w == 1:
            steps = int((_pick(lines, "steps") or [[0]])[0][0])
    bad = []
    want = list(stored)
    recorder.wait(want)
    for p, k in zip(want, recorder.count(want)):
        if not k:
            bad.append("lost %s" % p)
        elif k > 1 and stored[p] == 2:
            bad.append("QoS 2 %s delivered %d times" % (p, k))
    for link in links:
        bad += ["%s: %s" % (cid, v) for v in protocol_violations(link.log) + resent(link.log)]
    return bad, steps


def resent(log):
    """A PUBLISH sent twice on one connection: a message that went right
    after the CONNECT must not go again when the CONNACK comes (a resend is
    only for a new connection [MQTT-4.4.0-1])."""
    n = Counter((e["conn"], e["payload"]) for e in log
                if e["dir"] == "c2s" and e["type"] == PUBLISH and e.get("qos"))
    return ["PUBLISH %r sent %d times on connection %d" % (p, k, c)
            for (c, p), k in n.items() if k > 1]


def sweep(broker, runtimes=("cpython", "micropython"), versions=(5,), workers=4,
          store_dir="/tmp", log=print):
    """The whole sweep on a broker with persistence (sessions survive its
    restart); returns {case label: what went wrong} for the failed cases and
    the number of cases run."""
    recorder = Recorder(broker.host, broker.port, "wake-sweep-recorder")
    failed = {}
    n = 0
    try:
        for runtime in runtimes:
            device = Device(runtime)
            for v in versions:
                # a clean run counts the steps of wake 1 (the hooks on, no reset)
                bad, steps = run_case(Case("calibrate", reset_at=-1), device, broker, recorder,
                                      v, store_dir)
                if bad or not steps:
                    failed["%s v%d calibrate" % (runtime, v)] = bad or ["no steps counted"]
                    continue
                todo = cases(steps)
                with ThreadPoolExecutor(workers) as ex:
                    fs = {c.label: ex.submit(run_case, c, device, broker, recorder, v, store_dir)
                          for c in todo if not c.restart}
                    for label, f in fs.items():
                        bad, _ = f.result()
                        if bad:
                            failed["%s v%d %s" % (runtime, v, label)] = bad
                for c in todo:
                    if c.restart:  # alone: it cuts every connection to the broker
                        bad, _ = run_case(c, device, broker, recorder, v, store_dir)
                        if bad:
                            failed["%s v%d %s" % (runtime, v, c.label)] = bad
                n += len(todo)
                log("wake sweep: %s v%d: %d cases, %d steps per wake" % (
                    runtime, v, len(todo), steps))
    finally:
        recorder.stop()
    return failed, n


def main(cfg):
    """`python -m host_sim run wake_sweep`: the sweep on a broker of its own."""
    import tempfile
    from .broker import Mosquitto, find_mosquitto
    binary = find_mosquitto()
    if binary is None:
        raise SystemExit("mosquitto not found; run `make setup`")
    with tempfile.TemporaryDirectory(prefix="host_sim-wake-") as work:
        broker = Mosquitto(binary, work, ["persistence true"]).start()
        try:
            failed, n = sweep(broker, cfg.get("runtimes", ["cpython", "micropython"]),
                              cfg.get("versions", [5, 4]), cfg.get("workers", 4), work)
        finally:
            broker.stop()
    for label, bad in failed.items():
        print("FAILED %s: %s" % (label, "; ".join(bad)))
    print("wake sweep: %d cases, %d failed" % (n, len(failed)))
    return 1 if failed or not n else 0
