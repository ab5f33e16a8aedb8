#!/usr/bin/env python3
"""Put the telemetry firmware on a board and watch it start.

    python tools/deploy.py --port /dev/ttyUSB0 --board esp32 [--profile base]
                           [--config boards/esp32/config.json] [--until REGEX] [--tail S]
    make deploy PORT=/dev/ttyUSB0 BOARD=esp32 [PROFILE=base]

1. compiles the device code to .mpy (tools/mpy.py; the board's architecture),
2. copies with mpremote: the install profile's modules to /lib/frugalmqtt/,
   the firmware's modules, the board profile (/board.mpy), /main.py, the
   config (/config.json, "$NAME" values filled from the environment) and the
   CA file it names,
3. soft-resets the board (Ctrl-D at the REPL: a board then runs main.py) or
   with --hard-reset calls machine.reset(),
4. tails the output with tools/monitor.py (until --until matches, or --tail
   seconds pass, or Ctrl-C).

--frozen: the firmware was built with boards/<board>/manifest.py; only
main.py, the config and the CA go.

Every board takes the same path, mpremote's own: connect, Ctrl-C (stops a
running main.py), raw REPL with a soft reset, copy. tools/ptyboard.py (the
unix port as a board) behaves as a board does there, so it needs nothing
special. A port that is not there is reported with the ports that are.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import monitor  # noqa: E402
import mpy  # noqa: E402
import profiles  # noqa: E402
import serialports  # noqa: E402

REPO = profiles.REPO
ARCH = {"esp32": "xtensawin", "rp2040": "armv6m", "unix": "xtensawin"}


class DeployError(Exception):
    pass


def expand(value, env):
    """Fill "$NAME" strings (whole values) from env, recursively."""
    if isinstance(value, dict):
        return {k: expand(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, env) for v in value]
    if isinstance(value, str) and re.fullmatch(r"\$[A-Za-z_][A-Za-z0-9_]*", value):
        name = value[1:]
        if name not in env:
            raise DeployError("the config needs $%s: set it in the environment" % name)
        return env[name]
    return value


def config_path(board, given=None):
    p = Path(given) if given else REPO / "boards" / board / "config.json"
    if not p.is_file():
        raise DeployError("no config at %s: copy boards/%s/config.sample.json there and "
                          "edit it" % (p, board))
    return p


def stage(board, profile, cfg_file, out, build, frozen=False, env=os.environ):
    """Lay out the device's files under `out` (device path -> file)."""
    arch = ARCH[board]
    files = {}
    if not frozen:
        if not profiles.available(profile):
            raise DeployError("profile %s: %s" % (profile, profiles.AWAITING.get(
                profile, "modules missing")))
        for m in profiles.PROFILES[profile]:
            files["lib/frugalmqtt/%s.mpy" % m] = build / arch / "frugalmqtt" / (m + ".mpy")
        for m in profiles.APP:
            files[m + ".mpy"] = build / arch / (m + ".mpy")
        files["board.mpy"] = build / arch / "boards" / board / "board.mpy"
        for m in profiles.BOARD_EXTRAS.get(board, ()):
            files[m + ".mpy"] = build / arch / "boards" / board / (m + ".mpy")
    files["main.py"] = profiles.APP_DIR / "main.py"
    cfg = expand(json.loads(Path(cfg_file).read_text()), env)
    tls = cfg.get("tls") or {}
    for key in ("ca", "cert", "key"):
        if tls.get(key):
            src = Path(cfg_file).parent / tls[key]
            if not src.is_file():
                raise DeployError("tls.%s: %s not found" % (key, src))
            files[tls[key]] = src
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg))
    files["config.json"] = out / "config.json"
    for dev, src in files.items():
        if not Path(src).is_file():
            raise DeployError("missing %s (for %s)" % (src, dev))
    return files


def mpremote_args(port, files):
    """One mpremote run: make the directories, drop .py files that would
    shadow the .mpy ones, copy every file."""
    dirs = sorted({str(Path(d).parent) for d in files if "/" in d})
    stale = [d[:-4] + ".py" for d in files if d.endswith(".mpy")]
    prep = ("import os\n"
            "for d in %r:\n"
            "    try:\n        os.mkdir(d)\n    except OSError:\n        pass\n"
            "for f in %r:\n"
            "    try:\n        os.remove(f)\n    except OSError:\n        pass\n"
            % (_parents(dirs), stale))
    args = ["connect", port, "exec", prep]
    for dev, src in sorted(files.items()):
        args += ["+", "fs", "cp", str(src), ":" + dev]
    return args


def _parents(dirs):
    out = []
    for d in dirs:
        parts = d.split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in out:
                out.append(p)
    return out


def mpremote():
    p = Path(sys.executable).parent / "mpremote"
    return str(p) if p.exists() else "mpremote"


def reset_and_tail(port, baud, hard, until, tail, color):
    s = monitor.open_port(port, baud)
    s.write(b"\r\x03\x03")  # stop whatever runs
    time.sleep(0.2)
    s.write(b"\x02")  # leave the raw REPL if mpremote left it there
    time.sleep(0.2)
    s.reset_input_buffer()
    if hard:
        s.write(b"import machine; machine.reset()\r\n")
    else:
        s.write(b"\x04")  # soft reset: boot.py, then main.py
    return monitor.monitor(port, baud, color=color, exit_on=until, timeout=tail, conn=s)


def deploy(port, board, profile="base", config=None, frozen=False, hard=False,
           until=None, tail=None, baud=115200, color=False, log=print):
    cfg_file = config_path(board, config)
    gone = serialports.missing(port)
    if gone:
        raise DeployError(gone)
    build = REPO / "build" / "mpy"
    if not frozen:
        mpy.build(build, log=log)
    with tempfile.TemporaryDirectory(prefix="frugalmqtt-deploy-") as tmp:
        files = stage(board, profile, cfg_file, Path(tmp), build, frozen)
        log("deploy: %d files to %s (%s, profile %s%s)" % (
            len(files), port, board, profile, ", frozen firmware" if frozen else ""))
        r = subprocess.run([mpremote()] + mpremote_args(port, files),
                           capture_output=True, text=True, timeout=300)
        if r.returncode:
            raise DeployError("mpremote failed (exit %d):\n%s" % (r.returncode,
                                                                  (r.stdout + r.stderr)[-2000:]))
    log("deploy: copied; %s reset, tailing %s" % ("hard" if hard else "soft", port))
    return reset_and_tail(port, baud, hard, until, tail, color)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", required=True)
    ap.add_argument("--board", required=True, choices=profiles.BOARDS)
    ap.add_argument("--profile", default="base", choices=sorted(profiles.PROFILES))
    ap.add_argument("--config", help="default: boards/<board>/config.json")
    ap.add_argument("--frozen", action="store_true", help="firmware has the modules frozen")
    ap.add_argument("--hard-reset", action="store_true")
    ap.add_argument("--until", help="stop tailing at a line matching this regex")
    ap.add_argument("--tail", type=float, help="stop tailing after this many seconds")
    ap.add_argument("--baud", type=int, default=115200)
    a = ap.parse_args(argv)
    try:
        return deploy(a.port, a.board, a.profile, a.config, a.frozen, a.hard_reset,
                      a.until, a.tail, a.baud, color=sys.stdout.isatty(),
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    except DeployError as e:
        print("deploy: %s" % e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
