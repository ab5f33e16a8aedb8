"""Every program of examples/ runs as a user would start it (`HOST PORT` on
its command line) on CPython and on the MicroPython unix port, against a
mosquitto of this module's, and ends by itself; a paho-mqtt subscriber checks
what the broker saw."""
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import docsnippets as ds
from hostkit import PahoSubscriber

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import certs, tls_listener, free_port  # noqa: E402,F401  (certs: a fixture)

EXAMPLES = ds.REPO / "examples"
LINE_WAIT_S = 20


def run_example(runtime, name, broker, *extra, cwd=None):
    rc, out = ds.run(runtime, EXAMPLES / name, (broker.host, broker.port) + extra, cwd=cwd)
    assert rc == 0, "%s on %s (exit %s):\n%s" % (name, runtime, rc, out[-4000:])
    return out


class Running:
    """An example started in the background; its output read line by line."""

    def __init__(self, runtime, name, broker):
        cmd, env = ds.command(runtime, EXAMPLES / name, (broker.host, broker.port))
        self.proc = subprocess.Popen(cmd, cwd=str(ds.REPO), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, text):
        while True:
            try:
                line = self.lines.get(timeout=LINE_WAIT_S)
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail("never printed %r; printed:\n%s" % (text, "\n".join(self.seen)))
            self.seen.append(line)
            if text in line:
                return line

    def finish(self):
        try:
            rc = self.proc.wait(timeout=LINE_WAIT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        while True:
            line = self.lines.get(timeout=LINE_WAIT_S)
            if line is None:
                break
            self.seen.append(line)
        assert rc == 0, "\n".join(self.seen)
        return "\n".join(self.seen)


@pytest.fixture
def watch(broker):
    """watch(topic) -> a paho subscriber on the module's broker (stopped after)."""
    subs = []

    def start(topic):
        subs.append(PahoSubscriber(broker, topic, 5, qos=1))
        return subs[-1]

    yield start
    for s in subs:
        s.stop()


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_publisher(runtime, broker, watch):
    obs = watch("examples/publisher/#")
    out = run_example(runtime, "publisher.py", broker)
    assert out.count("acknowledged") == 3 and out.rstrip().endswith("done"), out
    msgs = obs.wait(lambda ms: len(ms) >= 3, "3 readings")
    assert [m.payload for m in msgs] == [b'{"n": %d, "value": %.1f}' % (n, 21 + n / 10)
                                         for n in range(3)]
    assert all(m.qos == 1 and m.properties.ContentType == "application/json"
               and m.properties.UserProperty == [("unit", "C")] for m in msgs)


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_subscriber(runtime, broker, watch):
    peer = watch("examples/nothing")
    ex = Running(runtime, "subscriber.py", broker)
    ex.wait_for("subscribed, granted QoS 1")
    peer.publish("examples/subscriber/hello", b"hi", qos=1)
    ex.wait_for("examples/subscriber/hello hi qos=1 retain=0")
    peer.publish("examples/subscriber/x", b"stop", qos=1)
    assert ex.finish().endswith("stopped")


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_async_client(runtime, broker):
    out = run_example(runtime, "async_client.py", broker)
    assert "connected, session present:" in out
    assert [l for l in out.splitlines() if l.startswith("received")] == [
        "received examples/async/temp %d qos 1" % (20 + n) for n in range(3)]
    assert out.count("acknowledged, reason code 0") == 3, out
    assert out.rstrip().endswith("done"), out


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_lite_publisher(runtime, broker, watch):
    obs = watch("examples/lite/#")
    out = run_example(runtime, "lite_publisher.py", broker)
    assert out.count("acknowledged") == 3, out
    msgs = obs.wait(lambda ms: len(ms) >= 3, "3 readings")
    assert [m.payload for m in msgs] == [b'{"n": %d, "value": %d}' % (n, 20 + n)
                                         for n in range(3)]
    assert all(m.properties.UserProperty == [("unit", "C")] for m in msgs)


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_telemetry_outbox(runtime, broker, watch, tmp_path):
    obs = watch("examples/outbox/#")
    out = run_example(runtime, "telemetry_outbox.py", broker, cwd=tmp_path)
    assert "all acknowledged" in out, out
    assert (tmp_path / "outbox.bin").stat().st_size == 16384
    obs.wait(lambda ms: [m.payload for m in ms] == [b"%d" % (20 + n) for n in range(5)],
             "5 readings")


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_tls_publisher(runtime, mosquitto, certs):
    tls_port = free_port()
    b = mosquitto(tls_listener(tls_port, certs))
    obs = PahoSubscriber(b, "examples/tls/#", 5, qos=1)
    try:
        rc, out = ds.run(runtime, EXAMPLES / "tls_publisher.py",
                         ("localhost", tls_port, certs / "ca.der"))
        assert rc == 0 and "connected over TLS" in out, out
        obs.has("examples/tls/hello", b"over TLS")
        # a broker certificate from another CA is refused
        rc, out = ds.run(runtime, EXAMPLES / "tls_publisher.py",
                         ("localhost", tls_port, certs / "other.der"))
        assert rc != 0 and "connected over TLS" not in out, out
    finally:
        obs.stop()


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_request_response(runtime, broker):
    out = run_example(runtime, "request_response.py", broker)
    assert out.splitlines() == ["q1: hello -> HELLO", "q2: mqtt 5 -> MQTT 5"], out


@pytest.mark.parametrize("runtime", ds.RUNTIMES)
def test_umqtt_style_from_the_command_line(runtime, broker, watch):
    peer = watch("demo/status")
    ex = Running(runtime, "umqtt_style.py", broker)
    ex.wait_for("Connected to")
    peer.publish("demo/cmd", b"stop", qos=1)
    assert "Stopped after 0 answers" in ex.finish()
    # published now (a retained one from an earlier run arrives with retain set)
    peer.wait(lambda ms: any(m.payload == b"stopped" and not m.retain for m in ms), "stopped")


def test_every_example_is_tested():
    tested = {n[len("test_"):] for n in globals() if n.startswith("test_")}
    names = {p.stem for p in EXAMPLES.glob("*.py")}
    assert {n for n in names if n not in tested and n + "_from_the_command_line" not in tested} \
        == set()
