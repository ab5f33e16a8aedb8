"""Shared pytest fixtures: real mosquitto brokers, MicroPython test collection."""
from pathlib import Path

import pytest

from host_sim.broker import Mosquitto, find_mosquitto


# --- MicroPython device-test collection -------------------------------------

@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    # tests/test_micropython.py exposes this factory; it yields one collector per
    # tests/device module so node ids read test_micropython.py::test_x.py::test_y.
    if name == "_micropython_device_collectors" and callable(obj):
        return obj(collector)
    return None


# --- mosquitto ---------------------------------------------------------------

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
    """One local SparkSession for the Spark tests of a worker process
    (starting one costs ~15 s; each pytest-xdist worker that runs one starts
    its own). It maps the class archive when there is one but never writes
    it: pytest-xdist stops a worker before its JVM has written 200 MB."""
    from pipeline.spark import session
    s = session("local[2]", app="frugalmqtt-tests", small=True, write_archive=False)
    yield s
    s.stop()


@pytest.fixture
def cleanup():
    """A list of close functions, called in reverse order after the test."""
    items = []
    yield items
    for close in reversed(items):
        close()
