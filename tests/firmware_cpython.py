"""Run the telemetry firmware (firmware/app/telemetry.py, unchanged) on
CPython with the unix board profile: the MicroPython built-ins it takes from
`time` come from frugalmqtt's CPython stand-ins.

    python tests/firmware_cpython.py config.json   (in the device's folder)
"""
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "firmware"), str(REPO / "firmware" / "app"),
                str(REPO / "boards" / "unix")]

import telemetry  # noqa: E402
from frugalmqtt.client import sleep_ms, ticks_diff, ticks_ms  # noqa: E402

telemetry.ticks_ms, telemetry.ticks_diff, telemetry.sleep_ms = ticks_ms, ticks_diff, sleep_ms
telemetry.time_ns, telemetry.gmtime = time.time_ns, time.gmtime
telemetry.main(*sys.argv[1:2])
