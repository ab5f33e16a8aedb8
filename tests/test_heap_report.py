"""tools/heap_report.py's pieces: the board layout per install profile and
one firmware run at a given heap size, against a real mosquitto."""
import sys
from pathlib import Path

import pytest

from hostkit import micropython_binary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import heap_report  # noqa: E402
import mpy  # noqa: E402
import profiles  # noqa: E402


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("mpy")
    mpy.build(out, log=lambda m: None)
    return out


def test_firmware_runs_with_enough_heap_and_fails_below(tmp_path, build, mosquitto):
    broker = mosquitto()
    dest = tmp_path / "board"
    heap_report.layout(dest, build, "telemetry", heap_report.config(broker.port, 30))
    assert sorted(p.name for p in (dest / "lib" / "frugalmqtt").iterdir()) == sorted(
        m + ".mpy" for m in profiles.PROFILES["telemetry"])
    ok, why, lines = heap_report.run_at(micropython_binary(), dest, "telemetry", 512 * 1024)
    assert ok, why
    assert ["ok", "30"] in lines  # 30 readings, all acknowledged
    ok, why, _ = heap_report.run_at(micropython_binary(), dest, "telemetry", 24 * 1024)
    assert not ok and "MemoryError" in why


def test_budget_is_read_from_the_board_profile():
    assert heap_report.board_budget("esp32") == 64 * 1024
