"""Blocking client behaviour around reconnects and callbacks, against a real
mosquitto (CPython): subscriptions come back after a reconnect that found no
session, and publishing from inside on_message never re-enters the network."""
import time

import pytest

from frugalmqtt.client import MQTTClient
from frugalmqtt_host.ref.session import WINDOW_FULL


def _poll_until(clients, cond, seconds=10):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for c in clients:
            c.poll(20)
        if cond():
            return True
    return False


@pytest.mark.parametrize("version", [4, 5])
def test_clean_client_resubscribes_after_broker_restart(version, mosquitto):
    broker = mosquitto()
    got = []
    sub = MQTTClient("resub-%d" % version, broker.host, broker.port, version=version,
                     keepalive=5, backoff_ms=(50, 200))
    sub.on_message = lambda m: got.append(bytes(m.payload))
    assert sub.connect() is False
    assert sub.subscribe(b"r/t", 1) == 1
    broker.restart()  # no persistence: the server forgets the subscription
    # the subscriber notices the dropped link, reconnects with clean start and
    # subscribes again on its own
    assert _poll_until([sub], lambda: sub.connected and sub.connects == 2)
    pub = MQTTClient("resub-pub-%d" % version, broker.host, broker.port, version=version)
    pub.connect()
    pub.publish(b"r/t", b"after-restart", 1)
    assert _poll_until([sub, pub], lambda: got == [b"after-restart"])
    assert sub.subscriptions == [(b"r/t", 1, None)]
    pub.disconnect()
    sub.disconnect()


def test_publish_inside_on_message_with_full_window(mosquitto):
    broker = mosquitto()
    c = MQTTClient("reentry", broker.host, broker.port, slots=1)
    results = []
    c.connect()
    assert c.subscribe(b"in/#", 1) == 1
    first = c.publish(b"out/x", b"held", 1)
    assert first > 0
    # hold our own publish in its slot so the window stays full: slot 0 back
    # to lite's _HOLD (4), its PUBACK then ends nothing
    c.buf[0] = 4

    def on_message(msg):
        results.append(c.publish(b"out/y", b"from-callback", 1))

    c.on_message = on_message
    feeder = MQTTClient("reentry-feed", broker.host, broker.port)
    feeder.connect()
    feeder.publish(b"in/a", b"x", 1)
    assert _poll_until([c, feeder], lambda: results)
    assert results == [WINDOW_FULL]  # returned at once: no poll inside receive()
    assert c.connected  # the PUBACK for the message being handled went out intact
    feeder.disconnect()
    c.disconnect()
