"""Install profiles: which device modules each kind of device installs.

The one definition read by `make mpy`/`make size` (tools/mpy.py), the mip
package files (package*.json, written by `make package-json`),
tools/heap_report.py and tools/deploy.py. To add a profile, add a line to
PROFILES and run `make package-json`.

Module names are files of firmware/frugalmqtt/ without ".py"; _cpython.py
(what MicroPython has built in, for CPython) is never installed on a device.
The broker side and the test conveniences are not in firmware/ at all: they
are the host package frugalmqtt_host/.
"""
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = REPO / "firmware" / "frugalmqtt"
APP_DIR = REPO / "firmware" / "app"

# The blocking client and everything it imports.
BASE = ["__init__", "err", "codec", "props", "publish", "control", "session", "transport", "base",
        "client"]

PROFILES = {
    "base": BASE,                        # frugalmqtt.client.MQTTClient
    "asyncio": BASE + ["aclient"],       # + frugalmqtt.aclient.AMQTTClient
    "umqtt": BASE + ["simple"],          # + the umqtt.simple facade
    "outbox": BASE + ["outbox"],         # + frugalmqtt.outbox.Outbox (offline buffer)
    "lite": ["__init__", "err", "core", "lite", "liteprops"],  # frugalmqtt.lite.Publisher: publish-only
}

# Profiles whose modules are built on another branch and not in this tree yet:
# the tools say so and leave them out instead of failing. Empty it when they land.
AWAITING = {}

# What the telemetry firmware adds (tools/deploy.py, the board manifests):
# modules of firmware/app/, installed at the device's root as .mpy; its
# main.py goes as source (MicroPython runs /main.py at boot).
APP = ["sensors", "wifi", "telemetry"]

# Board profiles (boards/<name>/board.py); "unix" is the MicroPython unix port
# standing in for a board in tests.
BOARDS = ["esp32", "rp2040", "unix"]
# Board-side modules besides board.py (the unix port's `network` stand-in).
BOARD_EXTRAS = {"unix": ["network"]}

# The mip package file of each profile: package.json (base), the others by
# name, e.g. package-asyncio.json. Those at the repository root install the
# .py sources; `make release` (tools/release.py) writes the same files for
# the compiled .mpy, which is what a device installs.
# The version is the package's own `__version__` (one version everywhere).
VERSION = re.search(r'^__version__ = "([^"]+)"', (PACKAGE_DIR / "__init__.py").read_text(),
                    re.M).group(1)


def package_file(profile):
    return "package.json" if profile == "base" else "package-%s.json" % profile


def available(profile):
    """True when every module of the profile is in this tree."""
    return all((PACKAGE_DIR / (m + ".py")).is_file() for m in PROFILES[profile])


def package_json(profile):
    """The mip package description of a profile (URLs relative to the repo root)."""
    return {
        "urls": [["frugalmqtt/%s.py" % m, "firmware/frugalmqtt/%s.py" % m]
                 for m in PROFILES[profile]],
        "deps": [],
        "version": VERSION,
    }


def package_text(profile):
    return json.dumps(package_json(profile), indent=2) + "\n"


def write_package_files():
    for p in PROFILES:
        (REPO / package_file(p)).write_text(package_text(p))


if __name__ == "__main__":
    write_package_files()
    for p in PROFILES:
        print("%-18s %s%s" % (package_file(p), "+".join(PROFILES[p]),
                              "" if available(p) else "  (not in this tree: %s)" % AWAITING.get(p)))
