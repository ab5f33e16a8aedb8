"""Host-side test helpers (CPython + pytest only), shared by the broker tests:
a free loopback port, the venv's micropython binary, and an independent
paho-mqtt subscriber that records what mosquitto delivers."""
import os
import sys
import threading
from collections import namedtuple
from pathlib import Path

import pytest

import paho.mqtt.client as paho

from host_sim.broker import free_port  # noqa: F401  (re-exported for the tests)

WAIT_S = 10.0

# One message the paho subscriber received; index access works as (topic, payload, qos, retain)
Received = namedtuple("Received", "topic payload qos retain properties")


def micropython_binary():
    """The unix port installed by `make setup` (a missing one fails, never skips)."""
    path = Path(sys.executable).parent / "micropython"
    if not os.access(path, os.X_OK):
        pytest.fail("micropython not found at %s; run `make setup`" % path, pytrace=False)
    return str(path)


class PahoSubscriber:
    """An independent paho-mqtt subscriber on `topic` that records every
    message in `msgs` (Received tuples, in arrival order). `persistent`
    (MQTT 5): clean_start=False with a session expiry."""

    def __init__(self, broker, topic, version=5, qos=2, persistent=False):
        self.msgs = []
        self.cond = threading.Condition()
        subscribed = threading.Event()
        proto = paho.MQTTv5 if version == 5 else paho.MQTTv311
        name = topic.replace("/", "-").replace("#", "all").replace("+", "any")
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2,
                             client_id="paho-%s-%d" % (name, version), protocol=proto)

        def on_connect(client, userdata, flags, reason, properties):
            client.subscribe(topic, qos)

        def on_subscribe(client, userdata, mid, reasons, properties):
            subscribed.set()

        self.c.on_connect = on_connect
        self.c.on_subscribe = on_subscribe
        self.c.on_message = self._on_message
        if persistent:  # the broker keeps the session (and queues for it) while we are away
            from paho.mqtt.properties import Properties
            from paho.mqtt.packettypes import PacketTypes
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 3600
            self.c.connect(broker.host, broker.port, clean_start=False, properties=props)
        else:
            self.c.connect(broker.host, broker.port)
        self.c.loop_start()
        if not subscribed.wait(WAIT_S):
            self.stop()
            pytest.fail("paho subscriber never got SUBACK", pytrace=False)

    def _on_message(self, client, userdata, m):
        with self.cond:
            self.msgs.append(Received(m.topic, m.payload, m.qos, bool(m.retain),
                                      getattr(m, "properties", None)))
            self.cond.notify_all()

    def wait(self, pred, what):
        """Wait (up to WAIT_S) until pred(msgs); returns a copy of msgs."""
        with self.cond:
            ok = self.cond.wait_for(lambda: pred(self.msgs), WAIT_S)
            assert ok, "paho: %s never happened; got %r" % (what, self.msgs)
            return list(self.msgs)

    def wait_for(self, payload):
        self.wait(lambda ms: any(m.payload == payload for m in ms), "payload %r" % payload)

    def has(self, topic, payload):
        return self.wait(lambda ms: any(m.topic == topic and m.payload == payload for m in ms),
                         "%s %r" % (topic, payload))

    def payloads(self):
        with self.cond:
            return [m.payload for m in self.msgs]

    def publish(self, topic, payload, qos=1, retain=False):
        info = self.c.publish(topic, payload, qos, retain)
        info.wait_for_publish(WAIT_S)
        assert info.is_published(), "paho could not publish %s" % topic

    def stop(self):
        self.c.disconnect()
        self.c.loop_stop()
