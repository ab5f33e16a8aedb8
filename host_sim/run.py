"""The scenario runner: starts mosquitto (own config, free port), the
recording subscriber, one link simulator per device and the devices
(CPython threads, MicroPython processes or asyncio tasks), applies broker
actions, shows progress, then writes the traces and audits the run.
`python -m host_sim run SCENARIO [--out traces] [--seed N]`."""
import sys
import tempfile
import time

from . import audit, scenario, traces
from .broker import Mosquitto, find_mosquitto
from .devices import DeviceRun
from .link import Link, protocol_violations, pubrel_after_pubrec
from .subscriber import Subscriber

DEVICE_TIMEOUT_S = 180


class Progress:
    """The run's progress bar (tqdm): `done` of `total` with a status text;
    on a terminal redrawn in place, elsewhere a line every few seconds."""

    def __init__(self, total, out=sys.stderr, quiet=False):
        from tqdm import tqdm
        self.bar = tqdm(total=max(total, 1), file=out, disable=quiet, unit="msg",
                        mininterval=0.2 if out.isatty() else 5.0, dynamic_ncols=True)

    def show(self, done, text, final=False):
        self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(min(done, self.bar.total) - self.bar.n)
        if final:
            self.bar.close()


class Active:
    """One device in flight: its spec, link and program."""

    def __init__(self, spec, link, run, started):
        self.spec = spec
        self.link = link
        self.run = run
        self.started = started


def device_params(spec, port, topic, backoff_max_ms=500):
    return dict(host="127.0.0.1", port=port, version=spec.version, cid=spec.device,
                topic=topic, qos=spec.qos, n=spec.n, rate=spec.rate, clean=spec.clean,
                session_expiry=spec.session_expiry if spec.version >= 5 else None,
                keepalive=spec.keepalive, slots=spec.slots, backoff_min_ms=20,
                backoff_max_ms=backoff_max_ms, timeout_ms=3000, flush_ms=30000)


def published_rows(run_id, spec, topic, events):
    rows = {}
    for e in events:
        ev = e["ev"]
        if ev == "pub":
            rows[e["seq"]] = {
                "run_id": run_id, "device": spec.device,
                "runtime": "micropython" if spec.runtime == "micropython" else "cpython",
                "fault_profile": spec.profile, "mqtt_version": spec.version, "topic": topic,
                "qos": spec.qos, "retain": False, "seq": e["seq"],
                "packet_id": e["pid"] or None, "t_pub_ms": e["t_pub"], "t_ack_ms": None,
                "attempts": 1 if spec.qos == 0 else 0, "reason_code": None, "expiry_s": None,
                "outcome": "sent" if spec.qos == 0 else "pending"}
        elif ev == "done" and e["seq"] in rows:
            r = rows[e["seq"]]
            r.update(t_ack_ms=e["t_ack"], attempts=e["attempts"], reason_code=e["reason"],
                     outcome="acked" if e["reason"] < 0x80 else "refused")
        elif ev == "pending" and e["seq"] in rows:
            rows[e["seq"]]["attempts"] = e["attempts"]
    return [rows[k] for k in sorted(rows)]


class Runner:
    def __init__(self, sc, seed=0, out="traces", quiet=False, log=sys.stdout):
        self.sc = sc
        self.seed = seed
        self.out = out
        self.quiet = quiet
        self.log = log
        self.specs = scenario.expand(sc, seed)
        now = time.time()
        self.run_id = "%s-s%d-%s%03d" % (sc["name"], seed,
                                         time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)),
                                         int(now * 1000) % 1000)
        self.prefix = "sim/%s" % self.run_id
        opts = sc.get("run", {})
        self.concurrency = opts.get("concurrency", 0) or len(self.specs)
        self.settle_s = opts.get("settle_s", 10)
        self.result = None
        self.finished = []  # Active devices (spec, link, run) after execute()

    def topic(self, spec):
        return "%s/%s" % (self.prefix, spec.device)

    def execute(self):
        bcfg = self.sc.get("broker", {})
        work = tempfile.TemporaryDirectory(prefix="host_sim-")
        config = list(bcfg.get("config", []))
        if bcfg.get("acl"):
            acl = "%s/acl" % work.name
            with open(acl, "w") as f:
                f.write("\n".join(bcfg["acl"]) + "\n")
            config.append("acl_file " + acl)
        if bcfg.get("persistence"):
            config.append("persistence true")
        binary = find_mosquitto()
        if binary is None:
            raise SystemExit("mosquitto not found; run `make setup`")
        broker = Mosquitto(binary, work.name, config).start()
        restarts = sorted(bcfg.get("restart_at_s", []))
        scfg = self.sc.get("subscriber", {})
        sub = Subscriber(broker.host, broker.port, self.prefix + "/#", "rec-" + self.run_id,
                         self.run_id, scfg.get("version", 5), scfg.get("qos", 2))
        t0 = time.monotonic()
        started_at = time.time()
        finished, errors, restarted = [], [], []
        try:
            finished, errors, restarted = self._devices(broker, sub, restarts, t0)
            self.finished = finished
            expect = [(a.spec.device, s) for a in finished if a.spec.qos >= 1
                      for s in range(a.spec.n)]
            sub.wait_for(expect, self.settle_s)
            sub.quiet(500)
        finally:
            sub.stop()
            broker.stop()
            broker_log_tail = broker.log()[-4000:]
            work.cleanup()
        return self._report(finished, errors, restarted, sub, started_at,
                            time.monotonic() - t0, broker_log_tail)

    def _start(self, spec, broker):
        link = Link((broker.host, broker.port), spec.rules, name=spec.device,
                    **spec.link).start()
        params = device_params(spec, link.port, self.topic(spec))
        if spec.runtime == "asyncio":
            from .fleet import AsyncDeviceRun
            run = AsyncDeviceRun(params).start()
        else:
            run = DeviceRun(spec.runtime, "telemetry", params).start()
        return Active(spec, link, run, time.monotonic())

    def _devices(self, broker, sub, restarts, t0):
        queue = list(self.specs)
        active, finished, errors, restarted = [], [], [], []
        total = sum(s.n for s in self.specs)
        progress = Progress(total, quiet=self.quiet)
        while queue or active:
            while queue and len(active) < self.concurrency:
                active.append(self._start(queue.pop(0), broker))
            if restarts and time.monotonic() - t0 >= restarts[0]:
                restarts.pop(0)
                broker.restart()
                restarted.append(round(time.monotonic() - t0, 2))
            for a in list(active):
                overdue = time.monotonic() - a.started > DEVICE_TIMEOUT_S
                if a.run.done or overdue:
                    if overdue:
                        a.run.kill()
                        errors.append((a.spec.device, "timed out after %ds" % DEVICE_TIMEOUT_S))
                    elif a.run.error or not a.run.ended:
                        errors.append((a.spec.device, a.run.error or "did not finish"))
                    a.link.close()
                    active.remove(a)
                    finished.append(a)
            acked = sum(len(a.run.of("done")) + (len(a.run.of("pub")) if a.spec.qos == 0 else 0)
                        for a in finished + active)
            progress.show(acked, "%d/%d acked, %d/%d devices done, %d received" % (
                acked, total, len(finished), len(self.specs), sub.count()))
            time.sleep(0.05)
        progress.show(total, "%d devices done, %d received" % (len(finished), sub.count()),
                      final=True)
        return finished, errors, restarted

    def _report(self, finished, errors, restarted, sub, started_at, elapsed, broker_log):
        published = []
        violations = []
        cuts = 0
        for a in finished:
            published += published_rows(self.run_id, a.spec, self.topic(a.spec), a.run.events)
            cuts += a.link.cuts
            for v in protocol_violations(a.link.log):
                violations.append((a.spec.device, v))
            if self.sc["kind"] == "sweep":
                for rule in a.link.rules:
                    if not rule.fired:
                        violations.append((a.spec.device, "cut point never reached: %r" % rule))
            for p, name in pubrel_after_pubrec(a.link.log).items():
                if name == "PUBLISH":
                    violations.append((a.spec.device, "PUBLISH %r resent after PUBREC" % p))
        received = list(sub.rows)
        summary = audit.summarize(published, received)
        bad = audit.broken(summary, errors, violations)
        meta = {"run_id": self.run_id, "scenario": self.sc["name"], "kind": self.sc["kind"],
                "seed": self.seed, "start_ms": int(started_at * 1000),
                "elapsed_s": round(elapsed, 2), "broker_restarts_at_s": restarted,
                "link_cuts": cuts, "devices": [a.spec.as_dict() for a in finished],
                "fault_profiles": {k: v for k, v in self.sc.get("faults", {}).items()},
                "summary": {str(q): s for q, s in summary.items()}, "broken": bad}
        root = traces.write(self.out, self.run_id, published, received, meta)
        self.result = dict(meta, root=str(root), lost=audit.lost_keys(published, received))
        w = self.log.write
        w("run %s: %d devices, %d messages, %d link cuts, %d broker restarts, %.1fs\n" % (
            self.run_id, len(finished), len(published), cuts, len(restarted), elapsed))
        w(audit.format_summary(summary) + "\n")
        w("traces: %s\n" % root)
        if bad:
            w("BROKEN (%d):\n" % len(bad))
            for b in bad[:30]:
                w("  " + b + "\n")
            if any("lost" in b for b in bad):
                w("mosquitto log tail:\n" + broker_log[-1500:] + "\n")
        else:
            w("all guarantees kept\n")
        return 1 if bad else 0


def run(name, seed=0, out="traces", quiet=False, overrides=None):
    sc = scenario.load(name)
    for k, v in (overrides or {}).items():
        sc[k] = v
    r = Runner(sc, seed, out, quiet)
    code = r.execute()
    return code, r.result

