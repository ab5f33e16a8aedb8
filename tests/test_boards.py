"""Board profiles, freeze manifests and sample configs (boards/), and the
hardware sensors' conversions."""
import ast
import json
import os
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "firmware" / "app"))
import profiles  # noqa: E402
import sensors  # noqa: E402

INTERFACE = {"NAME", "PINS", "HEAP_BUDGET", "SENSORS", "SESSION", "TLS", "WAKE_STORE",
             "set_clock", "deep_sleep", "reset"}
SESSION_KEYS = {"max_packet", "tx_size", "slots", "slot_size", "inbound", "aliases_out",
                "aliases_in", "alias_topic_max"}


class Manifest:
    """Runs a MicroPython manifest.py the way MicroPython's manifest tool
    documents it: each file executes in its own directory; include() takes
    options; package(path, files, base_path) and module(path, base_path)
    freeze files under their target path. Collects {target: source}."""

    def __init__(self, path_vars):
        self.vars = path_vars
        self.frozen = {}

    def _path(self, p):
        for k, v in self.vars.items():
            p = p.replace("$(%s)" % k, v)
        return os.path.abspath(p)

    def include(self, path, **options):
        path = self._path(path)
        if os.path.isdir(path):
            path = os.path.join(path, "manifest.py")
        opts = types.SimpleNamespace(**options)
        opts.defaults = lambda **d: [setattr(opts, k, v) for k, v in d.items()
                                     if not hasattr(opts, k)]
        g = {"include": self.include, "package": self.package, "module": self.module,
             "require": lambda *a, **k: None, "options": opts}
        cwd = os.getcwd()
        os.chdir(os.path.dirname(path))
        try:
            exec(Path(path).read_text(), g)
        finally:
            os.chdir(cwd)

    def package(self, package_path, files=None, base_path="."):
        for f in files:
            target = os.path.join(package_path, f)
            self.frozen[target] = os.path.join(self._path(base_path), target)

    def module(self, module_path, base_path="."):
        self.frozen[module_path] = os.path.join(self._path(base_path), module_path)


@pytest.fixture
def port_dirs(tmp_path):
    """Stand-ins for the port's and the board's own manifests."""
    for d in ("port/boards", "board"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "manifest.py").write_text("module_from_port = True\n")
    return {"PORT_DIR": str(tmp_path / "port"), "BOARD_DIR": str(tmp_path / "board"),
            "MPY_DIR": str(tmp_path)}


@pytest.mark.parametrize("board", ["esp32", "rp2040"])
def test_manifest_freezes_the_telemetry_profile_app_and_board(board, port_dirs):
    m = Manifest(port_dirs)
    m.include(str(REPO / "boards" / board / "manifest.py"))
    expected = {"frugalmqtt/%s.py" % x for x in profiles.PROFILES["telemetry"]}
    expected |= {"%s.py" % x for x in profiles.APP} | {"board.py"}
    assert set(m.frozen) == expected
    for target, source in m.frozen.items():
        assert os.path.isfile(source), source
    assert m.frozen["board.py"] == str(REPO / "boards" / board / "board.py")


def test_common_manifest_takes_a_profile(port_dirs):
    m = Manifest(port_dirs)
    m.include(str(REPO / "boards" / "common" / "manifest.py"), profile="lite", app=False)
    assert set(m.frozen) == {"frugalmqtt/%s.py" % x for x in profiles.PROFILES["lite"]}


@pytest.mark.parametrize("board", profiles.BOARDS)
def test_board_profile_has_the_interface(board):
    tree = ast.parse((REPO / "boards" / board / "board.py").read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    values = {}
    for n in tree.body:
        if isinstance(n, ast.Assign):
            for t in n.targets:
                names.add(t.id)
                try:  # constants and arithmetic on them (64 * 1024)
                    values[t.id] = eval(compile(ast.Expression(n.value), "board", "eval"),
                                        {"__builtins__": {}})
                except (NameError, TypeError, AttributeError):
                    pass
    assert INTERFACE <= names
    assert values["NAME"] == board
    assert set(values["SESSION"]) <= SESSION_KEYS
    assert all(s in sensors.KINDS for s in values["SENSORS"])
    assert 16 * 1024 <= values["HEAP_BUDGET"] <= 256 * 1024
    # a board keeping the sequence number itself provides both halves
    assert ("load_seq" in names) == ("save_seq" in names)


@pytest.mark.parametrize("board", profiles.BOARDS)
def test_sample_config_is_complete_and_keeps_secrets_out(board):
    cfg = json.loads((REPO / "boards" / board / "config.sample.json").read_text())
    assert {"client_id", "wifi", "broker", "topics", "qos", "period_ms"} <= set(cfg)
    assert cfg["qos"] in (0, 1, 2) and cfg["period_ms"] > 0
    assert all(s in sensors.KINDS for s in cfg["sensors"])
    assert "{dev}" in cfg["topics"]["telemetry"] and "{sensor}" in cfg["topics"]["telemetry"]
    if board != "unix":
        assert cfg["wifi"]["password"].startswith("$")  # filled from the environment
        assert cfg["broker"]["password"].startswith("$")
        assert cfg["tls"]["verify"] is True and cfg["broker"]["port"] == 8883


def test_config_json_is_git_ignored():
    ignored = (REPO / ".gitignore").read_text().split()
    assert "boards/*/config.json" in ignored


def test_rp2040_temperature_conversion(monkeypatch):
    readings = []

    class ADC:
        def __init__(self, ch):
            assert ch == 4  # the on-die sensor's ADC input
            self.volts = 0.706

        def read_u16(self):
            readings.append(1)
            return int(self.volts / 3.3 * 65535)

    monkeypatch.setitem(sys.modules, "machine", types.SimpleNamespace(ADC=ADC))
    s = sensors.make(["rp2040_temp"])[0]
    assert s.read() == pytest.approx(27.0, abs=0.05)  # 0.706 V is 27 C
    s.adc.volts = 0.706 - 0.001721 * 10
    assert s.read() == pytest.approx(37.0, abs=0.05)  # -1.721 mV per degree
    assert (s.name, s.unit) == ("temp", "C") and len(readings) == 2


def test_esp32_temperature_either_api(monkeypatch):
    monkeypatch.setitem(sys.modules, "esp32", types.SimpleNamespace(raw_temperature=lambda: 122))
    assert sensors.make(["esp32_temp"])[0].read() == pytest.approx(50.0)  # Fahrenheit
    monkeypatch.setitem(sys.modules, "esp32", types.SimpleNamespace(mcu_temperature=lambda: 41))
    assert sensors.make(["esp32_temp"])[0].read() == 41.0


def test_unknown_sensor_kind_is_refused():
    with pytest.raises(ValueError):
        sensors.make(["thermocouple"])
