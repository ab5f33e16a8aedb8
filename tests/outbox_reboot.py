"""The device-reboot runs: a MicroPython device (tests/mp_client/outbox_device.py)
with an outbox, talking to a real mosquitto, is killed with SIGKILL at random
(seeded) moments, then restarted.
- reboot_run: the device publishes QoS 1 and QoS 2 (driver "client":
  client.MQTTClient, "telem": telem.Telemetry); a persistent QoS 2 paho
  subscriber must end with every message the device accepted, each QoS 2 one
  exactly once.
- receive_run: the device subscribes at QoS 2; its on_message must never see
  a message twice (a kill inside on_message may lose that one delivery).

Used by tests/test_outbox_mosquitto.py (short runs) and on its own for a
long soak of both (`make reboot-soak`):
    python tests/outbox_reboot.py --kills 100 --seed 7
"""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEVICE = REPO / "tests" / "mp_client" / "outbox_device.py"
HEAP = "256k"


def device_cmd(runtime, mode, params):
    """The command and environment that run the device script. The params go
    in a file beside the outbox: the unix port dies at start-up ("FATAL:
    uncaught NLR") on a command-line argument over 255 bytes."""
    env = dict(os.environ)
    arg = params["path"] + ".params.json"
    with open(arg, "w") as f:
        json.dump(params, f)
    if runtime == "micropython":
        binary = str(Path(sys.executable).parent / "micropython")
        env["MICROPYPATH"] = str(REPO / "firmware")
        cmd = [binary, "-X", "heapsize=" + HEAP, str(DEVICE), mode, arg]
    else:
        env["PYTHONPATH"] = str(REPO / "firmware")
        cmd = [sys.executable, str(DEVICE), mode, arg]
    return cmd, env


class Device:
    """One run of the device process; its "@@" lines are collected as they come."""

    def __init__(self, runtime, mode, params, stdin=False):
        cmd, env = device_cmd(runtime, mode, params)
        self.proc = subprocess.Popen(cmd, env=env, cwd=str(REPO), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL)
        self.lines = []
        self.other = []  # the rest of stdout (MicroPython prints tracebacks there)
        self.cond = threading.Condition()
        self.err = b""
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            if line.startswith("@@ "):
                with self.cond:
                    self.lines.append(line[3:])
                    self.cond.notify_all()
            else:
                self.other.append(line)
        with self.cond:
            self.cond.notify_all()

    def wait_line(self, prefix, timeout):
        """Wait for a line starting with prefix; returns it (None on timeout/exit)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for l in self.lines:
                    if l.startswith(prefix):
                        return l
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.t.is_alive()):
                    return None
                self.cond.wait(min(left, 0.1))

    def send(self, text):
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.finish()

    def finish(self, timeout=60):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.t.join(5)
        self.err = self.proc.stderr.read()
        for f in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            if f:
                f.close()
        return self.proc.returncode

    def published(self):
        """[(n, qos, result)] for every publish() that returned."""
        out = []
        for l in self.lines:
            if l.startswith("pub "):
                n, q, r = l.split()[1:]
                out.append((int(n), int(q), int(r)))
        return out


def reboot_run(broker, subscriber_factory, outbox_path, kills, seed, tail=50,
               runtime="micropython", cid="reboot-dev", topic="frugal/outbox/reboot",
               size=16384, max_delay=0.4, log=None, driver="client"):
    """Run the device (publishing without end), SIGKILL it `kills` times at
    random moments (uniform in 0..max_delay s after its first publish), then
    let a last run publish `tail` more messages and flush; returns statistics."""
    rng = random.Random(seed)
    sub = subscriber_factory(topic)
    accepted = {}  # payload -> qos, publish() returned
    attempted = {}  # payload -> qos, publish() may have been called
    start = 0
    kill_points = []
    reloaded = []  # messages each run found in the outbox
    boot = 0
    try:
        params = dict(host=broker.host, port=broker.port, cid=cid, topic=topic,
                      path=str(outbox_path), size=size, driver=driver)
        for boot in range(kills + 1):
            last = boot == kills
            count = start + tail if last else 1 << 30
            params.update(boot=boot, start=start, count=count)
            d = Device(runtime, "publish", params)
            if last:
                code = d.finish(timeout=120)
                assert code == 0 and d.wait_line("flushed", 1), (
                    "last run: exit %s\n%s" % (code, d.err.decode(errors="replace")))
            elif rng.random() < 0.2:  # during start-up: import, reload, connect
                delay = rng.uniform(0.0, 0.15)
                time.sleep(delay)
                code = d.kill()
            else:  # a random moment after the first publish
                d.wait_line("pub ", 30)
                delay = rng.uniform(0.0, max_delay)
                time.sleep(delay)
                code = d.kill()
            if not last:
                assert code == -signal.SIGKILL or code == 0, (
                    "boot %d: device exited %s before the kill\n%s\n%s\n%s" % (
                        boot, code, d.lines[-5:], "\n".join(d.other[-12:]),
                        d.err.decode(errors="replace")))
            pubs = d.published()
            kill_points.append(len(pubs))
            r = d.wait_line("reloaded", 0)
            if r:
                reloaded.append(int(r.split()[1]) + int(r.split()[2]))
            for n, q, r in pubs:
                assert r > 0 or r == -5, (n, q, r)  # a packet id or STORED, never full
                accepted[b"%d:%d" % (boot, n)] = q
            top = pubs[-1][0] + 1 if pubs else start
            for n in range(start, min(top + 1, count)):  # publish() of top may have begun
                attempted[b"%d:%d" % (boot, n)] = 1 if n % 2 else 2
            if log:
                log("boot %d: %d publishes returned (n %d..%d), killed after %.3fs"
                    % (boot, len(pubs), start, top - 1, 0 if last else delay))
            start = top
        sub.wait(lambda ms: set(accepted) <= set(m.payload for m in ms), "every accepted message")
        time.sleep(0.5)  # late duplicates would arrive now
        got = [m.payload for m in sub.msgs]
    finally:
        sub.stop()
    counts = {}
    for p in got:
        counts[p] = counts.get(p, 0) + 1
    return {
        "kills": kills, "accepted": len(accepted), "received": len(got),
        "distinct": len(counts),
        "missing": sorted(p for p in accepted if p not in counts),
        "qos2_dups": sorted(p for p, c in counts.items() if c > 1 and attempted.get(p) == 2),
        "qos1_dups": sum(c - 1 for p, c in counts.items() if attempted.get(p) == 1),
        "unknown": sorted(p for p in counts if p not in attempted),
        "qos2_accepted": sum(1 for q in accepted.values() if q == 2),
        "kill_points": kill_points,
        "reloaded_runs": sum(1 for n in reloaded if n), "reloaded_msgs": sum(reloaded),
    }


def receive_run(broker, publisher, outbox_path, kills, seed, n=400, gap=0.004, work_ms=0,
                runtime="micropython", cid="reboot-rx", topic="frugal/outbox/rx",
                size=16384, max_delay=0.4, log=None):
    """The device subscribes at QoS 2 (persistent session) and prints each
    message from on_message, which then works `work_ms` (a kill in there
    comes after the delivery, before the PUBREC); a publisher sends n QoS 2
    messages, one every `gap` s, while the device is killed `kills` times; a
    last run takes the rest until "end". Returns the counts of what
    on_message saw."""
    rng = random.Random(seed)
    params = dict(host=broker.host, port=broker.port, cid=cid, topic=topic,
                  path=str(outbox_path), size=size, inbound=32, work_ms=work_ms)
    got = {}
    sender = None

    def send():
        for k in range(n):
            publisher.publish(topic, b"m%d" % k, qos=2)
            time.sleep(gap)

    def collect(d):
        for l in d.lines:
            if l.startswith("got "):
                got[l[4:]] = got.get(l[4:], 0) + 1

    try:
        for boot in range(kills + 1):
            params.update(boot=boot)
            d = Device(runtime, "receive", params)
            if boot == 0:
                assert d.wait_line("subscribed", 30), d.lines
                sender = threading.Thread(target=send, daemon=True)
                sender.start()
            if boot == kills:
                sender.join(120)
                publisher.publish(topic, b"end", qos=2)
                code = d.finish(timeout=60)
                assert code == 0, "last run: exit %s\n%s\n%s" % (code, d.lines[-5:], d.err.decode(errors="replace"))
            else:
                if boot and rng.random() < 0.2:
                    delay = rng.uniform(0.0, 0.15)  # during start-up
                else:
                    d.wait_line("subscribed", 30)
                    delay = rng.uniform(0.0, max_delay)
                time.sleep(delay)
                code = d.kill()
                assert code == -signal.SIGKILL, (code, d.err.decode(errors="replace"), d.lines[-3:])
            collect(d)
            if log:
                log("boot %d: %d messages delivered so far" % (boot, sum(got.values())))
    finally:
        if sender:
            sender.join(120)
    want = [("m%d" % k) for k in range(n)] + ["end"]
    return {"kills": kills, "published": len(want), "delivered": sum(got.values()),
            "dups": sorted(p for p, c in got.items() if c > 1),
            "missing": [p for p in want if p not in got],
            "unknown": sorted(p for p in got if p not in want)}


def main(argv):
    import argparse
    import tempfile
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import Mosquitto, find_mosquitto
    from hostkit import PahoSubscriber

    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-delay", type=float, default=0.4, help="seconds")
    ap.add_argument("--runtime", default="micropython")
    ap.add_argument("--drivers", default="client,telem", help="the publishing devices")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        broker = Mosquitto(find_mosquitto(), Path(tmp) / "broker",
                           ["max_queued_messages 1000000"]).start()
        try:
            runs = {}
            for drv in a.drivers.split(","):
                t0 = time.monotonic()
                runs[drv] = reboot_run(broker, lambda t: PahoSubscriber(broker, t, persistent=True),
                                       Path(tmp) / ("outbox-%s.bin" % drv), a.kills, a.seed,
                                       runtime=a.runtime, max_delay=a.max_delay, log=print,
                                       cid="reboot-" + drv, topic="frugal/outbox/" + drv,
                                       driver=drv)
                runs[drv]["seconds"] = round(time.monotonic() - t0, 1)
            t0 = time.monotonic()
            pub = PahoSubscriber(broker, "frugal/outbox/unused")
            try:
                rx = receive_run(broker, pub, Path(tmp) / "outbox-rx.bin", a.kills, a.seed,
                                 n=40 * a.kills, gap=0.005, work_ms=5, runtime=a.runtime,
                                 max_delay=a.max_delay, log=print)
            finally:
                pub.stop()
            rx["seconds"] = round(time.monotonic() - t0, 1)
        finally:
            broker.stop()
    ok = not rx["dups"] and not rx["unknown"] and len(rx["missing"]) <= rx["kills"]
    for drv, stats in runs.items():
        kp = stats.pop("kill_points")
        print("publishing (%s):" % drv, json.dumps(stats, default=lambda b: b.decode()))
        print("  publishes returned per run: %s" % kp[:20])
        ok = ok and not stats["missing"] and not stats["qos2_dups"] and not stats["unknown"]
    print("receiving:", json.dumps(rx))
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
