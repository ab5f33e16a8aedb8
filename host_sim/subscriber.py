"""The recording subscriber: an independent paho-mqtt client that turns every
PUBLISH it receives into a `received` row (host_sim/schema.py RECEIVED),
numbered by an arrival counter. Its session survives a broker restart
(clean start off, session expiry on 5.0; mosquitto persistence keeps it)."""
import threading
import time

import paho.mqtt.client as paho
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes

from .schema import decode_payload

WAIT_S = 10.0


def now_ms():
    return time.time_ns() // 1_000_000


class Subscriber:
    def __init__(self, host, port, topic, client_id, run_id="", version=5, qos=2,
                 persistent=True):
        self.run_id = run_id
        self.client_id = client_id
        self.sub_qos = qos
        self.rows = []
        self.lock = threading.Lock()
        self.topic = topic
        self._subscribed = threading.Event()
        self.connects = 0
        proto = paho.MQTTv5 if version == 5 else paho.MQTTv311
        kw = {} if version == 5 else {"clean_session": not persistent}
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id,
                             protocol=proto, **kw)
        self.c.max_inflight_messages_set(100)
        self.c.reconnect_delay_set(0.05, 0.5)
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = lambda *a: self._subscribed.set()
        self.c.on_message = self._on_message
        props = None
        if version == 5:
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = 3600 if persistent else 0
            self.c.connect(host, port, clean_start=not persistent, properties=props)
        else:
            self.c.connect(host, port)
        self.c.loop_start()
        if not self._subscribed.wait(WAIT_S):
            self.stop()
            raise RuntimeError("subscriber %s never got SUBACK" % client_id)

    def _on_connect(self, client, userdata, flags, reason, properties):
        self.connects += 1
        if not flags.session_present:
            client.subscribe(self.topic, self.sub_qos)
        else:
            self._subscribed.set()

    def _on_message(self, client, userdata, m):
        t = now_ms()
        parsed = decode_payload(m.payload)
        dev, seq, ts, sensor, value = parsed if parsed else (None,) * 5
        props = getattr(m, "properties", None)
        expiry = getattr(props, "MessageExpiryInterval", None) if props else None
        with self.lock:
            self.rows.append({
                "run_id": self.run_id, "subscriber": self.client_id, "sub_qos": self.sub_qos,
                "device": dev, "seq": seq, "topic": m.topic, "qos": m.qos, "dup": bool(m.dup),
                "retain": bool(m.retain), "arrival": len(self.rows), "t_device_ms": ts,
                "t_recv_ms": t, "expiry_left_s": expiry, "sensor": sensor,
                "value": None if value is None else float(value),
                "payload_bytes": len(m.payload)})

    def count(self):
        with self.lock:
            return len(self.rows)

    def keys(self):
        with self.lock:
            return [(r["device"], r["seq"]) for r in self.rows]

    def wait_for(self, keys, timeout=WAIT_S):
        """Wait until every (device, seq) in keys has arrived; True if so."""
        want = set(keys)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if want <= set(self.keys()):
                return True
            time.sleep(0.02)
        return want <= set(self.keys())

    def quiet(self, ms=300, timeout=WAIT_S):
        """Wait until nothing arrived for `ms` (late duplicates land first)."""
        end = time.monotonic() + timeout
        last, t = self.count(), time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.02)
            n = self.count()
            if n != last:
                last, t = n, time.monotonic()
            elif time.monotonic() - t >= ms / 1000:
                return

    def stop(self):
        self.c.disconnect()
        self.c.loop_stop()
