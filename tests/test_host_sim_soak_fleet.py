"""The soak and the fleet in small (the full ones run under `make
scenarios`): seeded random link faults with a mosquitto restart (persistence
on) mid-run, and a fleet of asyncio devices (AMQTTClient) with MicroPython
device processes on one mosquitto, a fault profile on a share of the links."""
from host_sim import scenario, traces
from host_sim.run import Runner


def _run(name, seed, tmp_path):
    r = Runner(scenario.load(name), seed, str(tmp_path), quiet=True)
    code = r.execute()
    assert code == 0, r.result["broken"]
    return r


def test_soak_small_with_broker_restart(tmp_path):
    r = _run("soak_small", 5, tmp_path)
    res = r.result
    assert len(res["broker_restarts_at_s"]) == 1
    assert res["link_cuts"] >= 30
    s = res["summary"]
    assert s["1"]["sent"] == s["2"]["sent"] == 12 * 30
    assert s["1"]["lost"] == s["2"]["lost"] == s["2"]["duplicated"] == 0
    # the restart ended every connection: each device connected again and
    # resumed its session (session present after the restart)
    for a in r.finished:
        assert a.run.of("end")[0]["connects"] >= 2, a.spec.device
    resumed = [a for a in r.finished
               if any(e["type"] == 2 and e["sp"] for e in a.link.log)]
    assert len(resumed) == len(r.finished)


def test_fleet_small(tmp_path):
    r = _run("fleet_small", 1, tmp_path)
    pub = traces.read(r.result["root"], "published")
    runtimes = {}
    for row in pub:
        runtimes.setdefault(row["runtime"], set()).add(row["device"])
    assert len(runtimes["cpython"]) == 60 and len(runtimes["micropython"]) == 2
    profiles = {a.spec.device: a.spec.profile for a in r.finished}
    faulty = [d for d, p in profiles.items() if p == "flaky"]
    assert 0 < len(faulty) < len(profiles)  # the profile hit a share of the links
    assert {row["fault_profile"] for row in pub} == {"none", "flaky"}
    s = r.result["summary"]
    assert s["1"]["lost"] == s["2"]["lost"] == s["2"]["duplicated"] == 0
