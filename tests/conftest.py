"""Shared pytest fixtures: real mosquitto brokers, MicroPython test collection."""
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from hostkit import free_port

MOSQUITTO_START_TIMEOUT_S = 10.0


# --- MicroPython device-test collection -------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    # tests/test_micropython.py exposes this factory; it yields one collector per
    # tests/device module so node ids read test_micropython.py::test_x.py::test_y.
    if name == "_micropython_device_collectors" and callable(obj):
        return obj(collector)
    return None


# --- mosquitto ---------------------------------------------------------------

def find_mosquitto():
    if os.access("/usr/sbin/mosquitto", os.X_OK):
        return "/usr/sbin/mosquitto"
    return shutil.which("mosquitto")


def _port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


class Mosquitto:
    """One mosquitto process on 127.0.0.1 with a generated config.

    ``extra_config`` lines (e.g. ``"max_inflight_messages 2"``,
    ``"persistence true"``) are appended after the defaults and override them.
    """

    host = "127.0.0.1"

    def __init__(self, binary, workdir, extra_config=(), port=None):
        self.binary = binary
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port(self.host)
        self.extra_config = list(extra_config)
        self.config_path = self.workdir / "mosquitto.conf"
        self.log_path = self.workdir / "mosquitto.log"
        self.proc = None
        self._write_config()

    def _write_config(self):
        lines = [
            "listener %d %s" % (self.port, self.host),
            "allow_anonymous true",
            "log_dest stderr",
            "log_type all",
            "connection_messages true",
            "log_timestamp true",
            # Used when persistence is switched on by extra_config.
            "persistence_location %s/" % self.workdir,
            "autosave_interval 1",
        ]
        if os.geteuid() == 0:
            lines.append("user root")  # otherwise it drops to `mosquitto` and can't write workdir
        has_persistence = any(l.split()[:1] == ["persistence"] for l in self.extra_config)
        if not has_persistence:
            lines.append("persistence false")
        lines.extend(self.extra_config)
        self.config_path.write_text("\n".join(lines) + "\n")

    @property
    def url(self):
        return "mqtt://%s:%d" % (self.host, self.port)

    def start(self):
        if self.proc is not None and self.proc.poll() is None:
            return self
        # Append, so restart() keeps the earlier log text.
        self._log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(self.config_path)],
            stdout=self._log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + MOSQUITTO_START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            if _port_open(self.host, self.port):
                return self
            time.sleep(0.02)
        exited = self.proc.poll()
        self.stop()
        why = ("exited with code %s" % exited if exited is not None
               else "not accepting connections after %.0fs" % MOSQUITTO_START_TIMEOUT_S)
        raise RuntimeError(
            "mosquitto did not start on %s:%d (%s)\nconfig:\n%s\nlog:\n%s"
            % (self.host, self.port, why, self.config_path.read_text(), self.log())
        )

    def stop(self):
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self.proc = proc  # keep returncode visible; running is checked via poll()
        if getattr(self, "_log_file", None) is not None:
            self._log_file.close()
            self._log_file = None

    def restart(self):
        """Stop and start again on the same port with the same config."""
        self.stop()
        # The listening socket may linger briefly; mosquitto sets SO_REUSEADDR,
        # so rebinding the same port right away is fine.
        self.proc = None
        return self.start()

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __repr__(self):
        return "<Mosquitto %s:%d %s>" % (self.host, self.port,
                                          "running" if self.running else "stopped")


def _require_mosquitto():
    binary = find_mosquitto()
    if binary is None:
        pytest.fail(
            "mosquitto not found (/usr/sbin/mosquitto or on PATH). Run `make setup` "
            "or: sudo apt-get update && sudo apt-get install -y mosquitto mosquitto-clients",
            pytrace=False,
        )
    return binary


def _make_factory(binary, base_dir, started):
    counter = [0]

    def start(*extra_config):
        """start("max_inflight_messages 2", ...) -> a running Mosquitto.

        Also accepts a single list/tuple of config lines.
        """
        if len(extra_config) == 1 and isinstance(extra_config[0], (list, tuple)):
            extra_config = tuple(extra_config[0])
        counter[0] += 1
        broker = Mosquitto(binary, Path(base_dir) / ("broker%d" % counter[0]), extra_config)
        started.append(broker)
        try:
            return broker.start()
        except RuntimeError as e:
            message = str(e)
        pytest.fail(message, pytrace=False)

    return start


@pytest.fixture
def mosquitto(tmp_path):
    """Factory: ``broker = mosquitto("max_packet_size 200")`` starts a fresh broker.

    Every broker started through it is stopped when the test ends.
    """
    binary = _require_mosquitto()
    started = []
    try:
        yield _make_factory(binary, tmp_path / "mosquitto", started)
    finally:
        for b in started:
            b.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One default broker shared by all tests in a module."""
    binary = _require_mosquitto()
    started = []
    start = _make_factory(binary, tmp_path_factory.mktemp("broker"), started)
    try:
        yield start()
    finally:
        for b in started:
            b.stop()


# --- Spark --------------------------------------------------------------------

@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for every Spark test (starting one costs ~15 s)."""
    from pipeline.spark import session
    s = session("local[2]", app="frugalmqtt-tests", small=True)
    yield s
    s.stop()
