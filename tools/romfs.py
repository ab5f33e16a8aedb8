#!/usr/bin/env python3
"""A ROMFS image of an install profile: the bytecode stays in flash.

    python tools/romfs.py PROFILE [--out build/romfs/PROFILE.romfs]
    make romfs PROFILE=lite
    mpremote connect PORT romfs deploy build/romfs/lite.romfs

The profile's modules (tools/profiles.py), compiled as `make mpy` compiles
them, go into the image at lib/frugalmqtt/. Firmware built with ROMFS
(MICROPY_VFS_ROM) mounts the image at /rom with /rom/lib on sys.path and runs
the .mpy bytecode in place, where a module on the flash filesystem is copied
into the heap: the same import holds about half the heap (`make bench`, the
ROMFS rows). Stock ESP32_GENERIC and RPI_PICO_W firmware is built without it
(`mpremote romfs query` says so); freezing the modules into the firmware
(boards/*/manifest.py) is the other way to keep bytecode out of RAM.
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mpy  # noqa: E402
import profiles  # noqa: E402

from mpremote.romfs import VfsRomWriter  # noqa: E402

DEFAULT_DIR = profiles.REPO / "build" / "romfs"


def tree_image(root, under="lib"):
    """ROMFS image bytes holding every file below `root`, at under/<path>."""
    rom = VfsRomWriter()
    rom.opendir(under)
    _add(rom, Path(root))
    rom.closedir()
    return rom.finalise()


def _add(rom, d):
    for p in sorted(d.iterdir()):
        if p.is_dir():
            rom.opendir(p.name)
            _add(rom, p)
            rom.closedir()
        else:
            rom.mkfile(p.name, p.read_bytes())


def profile_image(profile):
    """ROMFS image bytes of an install profile's modules, lib/frugalmqtt/*.mpy."""
    if profile not in profiles.PROFILES:
        raise ValueError("unknown profile %r (one of %s)" % (profile,
                                                           ", ".join(profiles.PROFILES)))
    if not profiles.available(profile):
        raise ValueError("profile %s: %s" % (profile, profiles.awaiting(profile)))
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-romfs-") as tmp:
        for m in profiles.PROFILES[profile]:
            mpy.compile_one(profiles.PACKAGE_DIR / (m + ".py"),
                            Path(tmp) / "frugalmqtt" / (m + ".mpy"))
        return tree_image(tmp)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile", choices=sorted(profiles.PROFILES))
    ap.add_argument("--out", help="default: build/romfs/PROFILE.romfs")
    a = ap.parse_args(argv)
    out = Path(a.out) if a.out else DEFAULT_DIR / (a.profile + ".romfs")
    try:
        data = profile_image(a.profile)
    except ValueError as e:
        print("make romfs: %s" % e, file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print("romfs: %s, %d bytes (profile %s: %s)" % (
        out, len(data), a.profile, ", ".join(profiles.PROFILES[a.profile])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
