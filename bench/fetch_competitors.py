#!/usr/bin/env python3
"""Fetch the pinned MicroPython MQTT clients of bench/competitors.txt from PyPI.

    python bench/fetch_competitors.py [--dest build/competitors]

These packages are MicroPython-only sdists without setup.py (made for upip,
MicroPython's old PyPI installer), which pip refuses to download. This does
what upip did, for the pinned versions only: finds the file in PyPI's simple
index (JSON form, PEP 691), downloads it, checks its sha256 against the pin
and unpacks the .py files to DEST/<name>-<version>/ (skipping setup.py and
metadata). Already unpacked pins are not fetched again.
"""
import argparse
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PINS = REPO / "bench" / "competitors.txt"
DEST = REPO / "build" / "competitors"
INDEX = "https://pypi.org/simple/%s/"


def pins(path=PINS):
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if line:
            out.append(tuple(line))
    return out


def normalize(name):
    return name.lower().replace(".", "-").replace("_", "-")


def sdist_url(name, version):
    req = urllib.request.Request(INDEX % normalize(name),
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    want = "%s-%s.tar.gz" % (name, version)
    for f in files:
        if f["filename"].lower() == want.lower():
            return f["url"]
    raise SystemExit("fetch_competitors: %s not on PyPI" % want)


def unpack(data, dest):
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            parts = m.name.split("/")[1:]  # drop "<name>-<version>/"
            if (not m.isfile() or not parts or not parts[-1].endswith(".py")
                    or parts[0] == "setup.py" or any(".egg-info" in p for p in parts)):
                continue
            out = dest.joinpath(*parts)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(t.extractfile(m).read())


def fetch(dest=DEST, log=print):
    """Unpack every pin; returns {name: (version, directory)}."""
    got = {}
    for name, version, sha in pins():
        d = Path(dest) / ("%s-%s" % (name, version))
        if not (d / ".sha256").is_file() or (d / ".sha256").read_text() != sha:
            data = urllib.request.urlopen(sdist_url(name, version), timeout=60).read()
            digest = hashlib.sha256(data).hexdigest()
            if digest != sha:
                raise SystemExit("fetch_competitors: %s %s has sha256 %s, pinned %s" % (
                    name, version, digest, sha))
            unpack(data, d)
            (d / ".sha256").write_text(sha)
            log("fetched %s %s (%d bytes, sha256 ok)" % (name, version, len(data)))
        got[name] = (version, d)
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", default=str(DEST))
    a = ap.parse_args()
    for name, (version, d) in fetch(Path(a.dest)).items():
        files = sorted(str(p.relative_to(d)) for p in d.rglob("*.py"))
        print("%s %s: %s" % (name, version, ", ".join(files)))


if __name__ == "__main__":
    sys.exit(main())
