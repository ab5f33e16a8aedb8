"""Proves the mosquitto fixtures in conftest.py work, using the Debian CLI clients."""
import shutil
import subprocess
import time

import pytest


def _client(name):
    path = "/usr/bin/" + name
    if not shutil.which(path):
        path = shutil.which(name)
    if path is None:
        pytest.fail("%s not found; run `make setup` (installs mosquitto-clients)" % name)
    return path


def _roundtrip(b, topic, payload):
    before = b.log().count("Received SUBSCRIBE")
    sub = subprocess.Popen(
        [_client("mosquitto_sub"), "-h", b.host, "-p", str(b.port), "-t", topic,
         "-C", "1", "-W", "10", "-q", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # Wait for the subscription to be registered before publishing.
        deadline = time.monotonic() + 10
        while b.log().count("Received SUBSCRIBE") <= before:
            assert time.monotonic() < deadline, "subscriber never subscribed:\n" + b.log()
            time.sleep(0.02)
        subprocess.run(
            [_client("mosquitto_pub"), "-h", b.host, "-p", str(b.port), "-t", topic,
             "-m", payload, "-q", "1"],
            check=True, timeout=10, capture_output=True,
        )
        out, err = sub.communicate(timeout=15)
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
    assert sub.returncode == 0, err
    return out.strip()


def test_publish_subscribe_and_restart(mosquitto):
    b = mosquitto("max_inflight_messages 2")
    assert b.host == "127.0.0.1" and b.port > 0
    assert _roundtrip(b, "frugal/test", "hello") == "hello"
    assert "max_inflight_messages" not in b.log()  # config accepted without complaint
    port = b.port
    b.restart()
    assert b.port == port and b.running
    assert _roundtrip(b, "frugal/again", "world") == "world"
    b.stop()
    assert not b.running


def test_factory_starts_independent_brokers(mosquitto):
    a = mosquitto()
    b = mosquitto("max_packet_size 200")
    assert a.port != b.port
    assert a.running and b.running


def test_module_broker(broker):
    assert broker.running
    assert _roundtrip(broker, "frugal/module", "x") == "x"
