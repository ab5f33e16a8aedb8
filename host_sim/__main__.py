"""python -m host_sim run SCENARIO [--out traces] [--seed N] [--quiet]
python -m host_sim list
python -m host_sim edge [--runtime cpython|micropython]"""
import argparse
import sys

from . import scenario


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m host_sim")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a scenario (name under host_sim/scenarios/ or a path)")
    r.add_argument("scenario")
    r.add_argument("--out", default="traces", help="trace directory (default: traces)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("list", help="list the scenarios")
    e = sub.add_parser("edge", help="run the scripted-broker edge cases")
    e.add_argument("--runtime", action="append", choices=["cpython", "micropython"])
    a = ap.parse_args(argv)
    if a.cmd == "list":
        for p in sorted(scenario.SCENARIOS.glob("*.toml")):
            sc = scenario.load(str(p))
            print("%-18s %-10s %s" % (p.stem, sc["kind"], sc.get("description", "")))
        return 0
    if a.cmd == "edge":
        from . import edge
        return edge.main(a.runtime or ["cpython", "micropython"])
    sc = scenario.load(a.scenario)
    if sc["kind"] == "edge":  # scripted-broker cases: no traces
        from . import edge
        e = sc.get("edge", {})
        return edge.main(e.get("runtimes", ["cpython", "micropython"]), e.get("cases"))
    if sc["kind"] == "wake":  # deep-sleep cycles, one device process per wake
        from . import wake
        return wake.main(sc.get("wake", {}))
    from .run import run
    code, _ = run(a.scenario, a.seed, a.out, a.quiet)
    return code


if __name__ == "__main__":
    sys.exit(main())
