"""Install profiles: which device modules each kind of device installs.

The one definition read by `make mpy`/`make size` (tools/mpy.py), the mip
package files (package*.json, written by `make package-json`),
tools/heap_report.py, tools/deploy.py, tools/romfs.py, tools/release.py and
the freeze manifests (boards/common/manifest.py). To add a profile, add a
line to ENTRIES and run `make package-json`.

A profile whose import closure names a module not in this tree yet (being
written on another branch) is "awaiting" it: the tools say so and leave it
out instead of failing.

Module names are files of firmware/frugalmqtt/ without ".py"; time.py
(what MicroPython has built in, for CPython) is never installed on a device.
The broker side and the test conveniences are not in firmware/ at all: they
are the host package frugalmqtt_host/.
"""
import ast
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIR = REPO / "firmware" / "frugalmqtt"
APP_DIR = REPO / "firmware" / "app"

# Each profile is named by its entry modules, what the application imports;
# its module list is their import closure in firmware/frugalmqtt/ (never
# listed by hand), so a profile follows the code when an import changes.
ENTRIES = {
    "lite": ["lite", "liteprops"],        # lite.Publisher: publish-only
    "telemetry": ["telem", "liteprops", "outbox", "wake"],  # + outbound aliases, the outbox, the deep-sleep cycle
    "full": ["client"],                   # client.MQTTClient: + receiving, subscribe
    "asyncio": ["aclient"],               # aclient.AMQTTClient
    "umqtt": ["simple", "robust"],        # the umqtt.simple and umqtt.robust facades over client
}

# In every profile: the package, and err, where applications import the
# exceptions from (the core defines them, err re-exports them).
ALWAYS = ["__init__", "err"]

# What MicroPython has built in, stood in for CPython: never on a device
# (the device modules' fallback import `from .time import ...`, CPython's).
HOST_ONLY = {"time"}


def imports(module):
    """Package modules `module` imports (relative imports, lazy ones too)."""
    tree = ast.parse((PACKAGE_DIR / (module + ".py")).read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return found - HOST_ONLY


def closure(entries):
    """The package modules `entries` (and ALWAYS) need, in a stable order:
    each module before those that import it. A module not in the tree is
    listed (the tools report it missing) but not followed."""
    order, seen = [], set()

    def visit(m):
        if m in seen:
            return
        seen.add(m)
        if (PACKAGE_DIR / (m + ".py")).is_file():
            for dep in sorted(imports(m)):
                visit(dep)
        order.append(m)

    for e in ALWAYS + entries:
        visit(e)
    return order


PROFILES = {p: closure(e) for p, e in ENTRIES.items()}


def missing(profile):
    """The profile's modules not in this tree (being written on other branches)."""
    return [m for m in PROFILES[profile] if not (PACKAGE_DIR / (m + ".py")).is_file()]


def available(profile):
    """True when every module of the profile is in this tree."""
    return not missing(profile)


def ready():
    """The profiles whose modules are all in this tree."""
    return [p for p in PROFILES if available(p)]


def awaiting(profile):
    """Why a profile cannot be installed from this tree ("" when it can)."""
    gone = missing(profile)
    return "awaiting %s" % ", ".join(m + ".py" for m in gone) if gone else ""


# What the telemetry firmware adds (tools/deploy.py, the board manifests):
# modules of firmware/app/, installed at the device's root as .mpy; its
# main.py goes as source (MicroPython runs /main.py at boot).
APP = ["sensors", "wifi", "telemetry"]

# Board profiles (boards/<name>/board.py); "unix" is the MicroPython unix port
# standing in for a board in tests.
BOARDS = ["esp32", "rp2040", "unix"]
# Board-side modules besides board.py (the unix port's `network` stand-in).
BOARD_EXTRAS = {"unix": ["network"]}

# The mip package file of each profile: package.json (full), the others by
# name, e.g. package-asyncio.json. Those at the repository root install the
# .py sources; `make release` (tools/release.py) writes the same files for
# the compiled .mpy, which is what a device installs.
# The version is the package's own `__version__` (one version everywhere).
VERSION = re.search(r'^__version__ = "([^"]+)"', (PACKAGE_DIR / "__init__.py").read_text(),
                    re.M).group(1)


def package_file(profile):
    return "package.json" if profile == "full" else "package-%s.json" % profile


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
        print("%-22s %s%s" % (package_file(p), "+".join(PROFILES[p]),
                              "" if available(p) else "  (%s)" % awaiting(p)))
