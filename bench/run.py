"""Codec benchmark driver (`make bench`): the device's protocol core, sans-I/O.

Runs bench/codec_bench_mp.py (session.Session: encoding, acks, receiving,
no socket) under CPython, under the MicroPython unix port (source modules)
and under MicroPython with those modules compiled to .mpy by mpy-cross, parses its "@@RESULT" lines and prints one side-by-side markdown
table, also written to bench/results/codec-<date>.md with the machine facts.

    .venv/bin/python bench/run.py [--n 20000] [--repeats 5] [--no-mpy] [--out PATH]
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIRMWARE = REPO / "firmware"
SCRIPT = REPO / "bench" / "codec_bench_mp.py"
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "tools"))
import profiles  # noqa: E402

# session.Session and what it imports, as a device installs them
CODEC_MODULES = profiles.closure(["session", "props"])  # what codec_bench_mp.py imports
PATH = str(FIRMWARE)
HEAPSIZE = "2m"

OP_LABELS = {
    "publish_q0": "publish QoS 0 (MQTT 5, 32 B payload, 1 user property): encoded, written",
    "publish_q1_acked": "publish QoS 1 (same message): stored, written; its PUBACK handled",
    "receive_q1": "receive a QoS 1 PUBLISH (same message): parsed, on_message, PUBACK written",
}


def tool(name):
    candidate = Path(sys.executable).parent / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which(name)
    if not found:
        sys.exit("%s not found: run `make setup`" % name)
    return found


def run_bench(cmd, env_extra, label):
    env = dict(os.environ)
    env.update(env_extra)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit("%s benchmark failed (exit %d):\n%s\n%s" % (label, r.returncode, r.stdout, r.stderr))
    info, ops = None, {}
    for line in r.stdout.splitlines():
        if not line.startswith("@@RESULT "):
            continue
        d = json.loads(line[len("@@RESULT "):])
        if d["kind"] == "info":
            info = d
        else:
            ops[d["op"]] = d
    if info is None or set(ops) != set(OP_LABELS):
        sys.exit("%s benchmark printed incomplete results:\n%s" % (label, r.stdout))
    return info, ops


def compile_mpy(mpy_cross, dest):
    pkg = Path(dest) / "frugalmqtt"
    pkg.mkdir()
    for m in CODEC_MODULES:
        subprocess.run([mpy_cross, "-o", str(pkg / (m + ".mpy")),
                        str(FIRMWARE / "frugalmqtt" / (m + ".py"))],
                       check=True, capture_output=True, text=True)


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def first_line(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def git_rev():
    rev = first_line(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "firmware/frugalmqtt"],
                           capture_output=True, text=True).stdout.strip()
    return rev + (" (firmware/frugalmqtt has uncommitted changes)" if dirty else "")


def fmt_rate(n):
    return "{:,}".format(int(n))


def fmt_bytes(x):
    return ("%.1f" % x).rstrip("0").rstrip(".") if x != int(x) else "%d" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000, help="calls per timed loop")
    ap.add_argument("--repeats", type=int, default=5, help="timed loops per operation (best is kept)")
    ap.add_argument("--no-mpy", action="store_true", help="skip the .mpy run")
    ap.add_argument("--out", help="results file (default bench/results/codec-<date>.md)")
    args = ap.parse_args()

    micropython = tool("micropython")
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()
    bench_args = ["n=%d" % args.n, "repeats=%d" % args.repeats]

    runs = []  # (column label, info, ops)
    info, ops = run_bench([sys.executable, str(SCRIPT)] + bench_args,
                          {"PYTHONPATH": PATH}, "CPython")
    runs.append(("CPython", info, ops))
    info, ops = run_bench([micropython, "-X", "heapsize=" + HEAPSIZE, str(SCRIPT)] + bench_args,
                          {"MICROPYPATH": PATH}, "MicroPython")
    runs.append(("MicroPython", info, ops))
    if not args.no_mpy:
        mpy_cross = tool("mpy-cross")
        with tempfile.TemporaryDirectory(prefix="frugalmqtt-mpy-") as tmp:
            compile_mpy(mpy_cross, tmp)
            info, ops = run_bench([micropython, "-X", "heapsize=" + HEAPSIZE, str(SCRIPT)] + bench_args,
                                  {"MICROPYPATH": tmp}, "MicroPython .mpy")
        if not info.get("mpy_loaded"):
            sys.exit("the .mpy run did not load the compiled modules")
        runs.append(("MicroPython .mpy", info, ops))
    load_after = os.getloadavg()

    cp = runs[0][2]
    mp = runs[1][2]
    headers = ["operation", "packet bytes"] + ["%s ops/s" % label for label, _, _ in runs] + [
        "CPython / MicroPython", "MicroPython bytes/op (gc.mem_alloc)", "MicroPython heap_lock",
        "CPython peak bytes/op (tracemalloc)", "CPython retained bytes/op"]
    rows = []
    for op, label in OP_LABELS.items():
        row = [label, str(cp[op]["packet_bytes"])]
        row += [fmt_rate(ops[op]["ops_per_s"]) for _, _, ops in runs]
        row.append("%.1fx" % (cp[op]["ops_per_s"] / mp[op]["ops_per_s"]))
        allocs = [fmt_bytes(ops[op]["alloc_bytes_per_op"]) for lbl, _, ops in runs if lbl != "CPython"]
        row.append(" / ".join(allocs) if len(set(allocs)) > 1 else allocs[0])
        locks = ["ok" if ops[op]["heap_lock_ok"] else "ALLOCATES" for lbl, _, ops in runs if lbl != "CPython"]
        row.append(" / ".join(locks) if len(set(locks)) > 1 else locks[0])
        row.append(fmt_bytes(cp[op]["alloc_peak_bytes_per_op"]))
        row.append(fmt_bytes(cp[op]["alloc_retained_bytes_per_op"]))
        rows.append(row)
    table = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    table += ["| " + " | ".join(r) + " |" for r in rows]

    mp_info = runs[1][1]
    facts = [
        ("Date (UTC)", started.strftime("%Y-%m-%d %H:%M")),
        ("CPU", cpu_model()),
        ("Cores", str(os.cpu_count())),
        ("OS", platform.platform()),
        ("Load average (1 min) before / after", "%.2f / %.2f" % (load_before[0], load_after[0])),
        ("CPython", "%s (%s)" % (platform.python_version(), sys.executable)),
        ("MicroPython", "%s — `%s`, unix port, heap %s"
         % (mp_info["version"] + ("-" + mp_info["release"] if mp_info.get("release") else ""), first_line([micropython, "-c", "import sys; print(sys.version)"]), HEAPSIZE)),
        ("mpy-cross", first_line([tool("mpy-cross"), "--version"]) if not args.no_mpy else "not run"),
        ("Code", "git " + git_rev()),
        ("Loops", "best of %d timed loops of %d calls per operation (loop overhead included)"
         % (args.repeats, args.n)),
    ]
    lines = ["# Codec benchmark — %s" % started.strftime("%Y-%m-%d"), "",
             "Produced by `make bench` (`bench/run.py` running `bench/codec_bench_mp.py` under each "
             "interpreter).", "", "## Machine", ""]
    lines += ["- **%s:** %s" % kv for kv in facts]
    lines += ["", "## Results", ""] + table + [
        "",
        "## Method",
        "",
        "- Same script, same device source on both interpreters: `session.Session`, the full "
        "client's engine without a driver, connected to a stream that drops what it is given. "
        "Received packets are put in its receive buffer as a driver frames them, then `packet()` "
        "handles them. The PUBLISH is 64 bytes at QoS 0 and 66 at QoS 1: topic "
        "`sensors/dev1/temp`, property block with one user property `(\"unit\", \"C\")` "
        "(`props.build()`, once), 32-byte payload.",
        "- MicroPython bytes/op: `gc.mem_alloc()` difference over 1000 calls with the GC disabled, "
        "minus an empty run of the same loop, divided by 1000 (a `.py` / `.mpy` pair is shown when "
        "they differ). heap_lock: 10 calls under `micropython.heap_lock()`; \"ok\" means no "
        "allocation at all.",
        "- CPython bytes/op: `tracemalloc` peak traced memory during one call above the level "
        "before it (transient objects such as ints above 256, minus the empty loop), and memory "
        "still held after 1000 calls, per call. CPython figures are not comparable with a "
        "device's heap; they show only that nothing is retained.",
        "- Unix-port rates are not device rates (a server CPU, 64-bit objects); the allocation "
        "figures come from the same bytecode a device runs. The machine was shared with other "
        "jobs (load average above), so rates vary from run to run; compare columns within one "
        "file rather than across files.",
        "",
    ]
    text = "\n".join(lines)
    out = Path(args.out) if args.out else RESULTS / ("codec-%s.md" % started.strftime("%Y-%m-%d"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print("\n".join(table))
    print()
    for k, v in facts:
        print("%s: %s" % (k, v))
    out = out.resolve()
    print("\nwritten to %s" % (out.relative_to(REPO) if out.is_relative_to(REPO) else out))


if __name__ == "__main__":
    main()
