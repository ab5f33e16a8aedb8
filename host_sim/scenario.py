"""Scenario files (TOML, host_sim/scenarios/*.toml) and their expansion into
one DeviceSpec per simulated device. See host_sim/scenarios/README.md for
the keys."""
import tomllib
from itertools import zip_longest
from pathlib import Path

from . import faults
from .link import Rule

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
RUNTIMES = ("cpython", "micropython", "asyncio")


def find(name):
    """A scenario by path or by name under host_sim/scenarios/."""
    p = Path(name)
    if p.exists():
        return p
    p = SCENARIOS / (name if name.endswith(".toml") else name + ".toml")
    if not p.exists():
        raise SystemExit("no scenario %s (have: %s)" % (name, ", ".join(
            sorted(x.stem for x in SCENARIOS.glob("*.toml")))))
    return p


def load(name):
    path = find(name)
    with open(path, "rb") as f:
        sc = tomllib.load(f)
    sc.setdefault("name", path.stem)
    sc.setdefault("kind", "telemetry")
    return sc


class DeviceSpec:
    def __init__(self, device, runtime, version, qos, n, rate=0, clean=False,
                 session_expiry=300, keepalive=10, profile="none", rules=(), link=None,
                 label="", slots=8):
        assert runtime in RUNTIMES, runtime
        self.device = device
        self.runtime = runtime
        self.version = version
        self.qos = qos
        self.n = n
        self.rate = rate
        self.clean = clean
        self.session_expiry = session_expiry
        self.keepalive = keepalive
        self.profile = profile
        self.rules = list(rules)
        self.link = dict(link or {})
        self.label = label
        self.slots = slots

    def as_dict(self):
        d = {k: v for k, v in vars(self).items() if k != "rules"}
        d["rules"] = [r.as_dict() for r in self.rules]
        return d


def _profiles(sc):
    out = {"none": faults.NONE}
    for name, t in sc.get("faults", {}).items():
        out[name] = faults.Profile(name, **t)
    return out


def _listify(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def expand(sc, seed):
    """The DeviceSpecs of a scenario, deterministic for a seed."""
    kind = sc["kind"]
    if kind == "sweep":
        return _sweep(sc.get("sweep", {}))
    if kind != "telemetry":
        raise SystemExit("unknown scenario kind %r" % kind)
    profiles = _profiles(sc)
    groups = []
    for gi, g in enumerate(sc.get("devices", [])):
        specs = []
        groups.append(specs)
        qoss = _listify(g.get("qos", 1))
        versions = _listify(g.get("version", 5))
        prof = profiles.get(g.get("fault", "none"), faults.NONE)
        share = g.get("fault_share", 1.0)
        runtime = g.get("runtime", "cpython")
        prefix = g.get("prefix", "g%d" % gi)
        count = g.get("count", 1)
        for i in range(count):
            dev = "%s-%s%03d" % (prefix, runtime[:2], i)
            qos = qoss[i % len(qoss)]
            version = versions[(i // len(qoss)) % len(versions)]
            rng = faults.rng_for(seed, dev)
            faulty = prof.name != "none" and rng.random() < share
            p = prof if faulty else faults.NONE
            rules, link = p.schedule(rng, qos, g.get("n", 10))
            name = p.name
            if "rules" in g:  # a scripted schedule: the same for every device of the group
                rules = [Rule(**r) for r in g["rules"]]
                link = dict(g.get("link", {}))
                name = g.get("fault", "scripted")
            ka = p.keepalive or g.get("keepalive", 10)
            specs.append(DeviceSpec(dev, runtime, version, qos, g.get("n", 10),
                                    g.get("rate", 0), g.get("clean", False),
                                    g.get("session_expiry", 300), ka, name, rules, link,
                                    slots=g.get("slots", 8)))
    # groups interleaved: with limited concurrency every group runs all along
    # (and meets the broker actions)
    return [s for row in zip_longest(*groups) for s in row if s is not None]


def _sweep(sw):
    specs = []
    for runtime in _listify(sw.get("runtimes", ["cpython"])):
        for v in _listify(sw.get("versions", [4, 5])):
            for qos in _listify(sw.get("qos", [1, 2])):
                for label, rules in faults.sweep_points(qos, sw.get("nth", 3)):
                    dev = "sw-%s-v%d-q%d-%s" % (runtime[:2], v, qos, label)
                    specs.append(DeviceSpec(dev, runtime, v, qos, sw.get("n", 5),
                                            clean=False, profile="sweep", rules=rules,
                                            label=label, keepalive=10))
    return specs
