# Adapters that let the client benchmarks (bench/mp/*.py, via bcommon) drive
# the other MicroPython MQTT clients for `make compare`: each wraps one
# library behind the calls the benchmarks make on frugalmqtt's MQTTClient:
#   publish(topic, payload, qos, retain, props) (props ignored: MQTT 3.1.1),
#   publish_many(topic, payload, qos, props, n), flush(timeout_ms),
#   disconnect(), and the two figures the scripts print: quota (QoS 1
#   messages in flight at once) and amax (topic aliases: none).
# A library's modules are imported inside connect(), so a script can count
# the heap the library itself takes. Nothing here is timed or counted as the
# library's: each method is one call into it.


# sync_publish: the library's own blocking publish(topic, msg, retain, qos),
# which bench/mp/alloc.py calls directly (so no adapter code is counted);
# None for an asyncio library.


class Umqtt:
    """umqtt.simple / umqtt.robust: QoS 1 publish() blocks until its PUBACK."""

    def __init__(self, mod, cid, host, port):
        self.c = mod.MQTTClient(cid, host, port, keepalive=60)
        self.c.connect()
        self.quota = 1  # one QoS 1 message in flight: publish waits for its PUBACK
        self.amax = 0
        self.sync_publish = self.c.publish

    def publish(self, topic, payload, qos=0, retain=False, props=None):
        self.c.publish(topic, payload, retain, qos)

    def publish_many(self, topic, payload, qos, props, n):
        pub = self.c.publish
        i = 0
        while i < n:
            pub(topic, payload, False, qos)
            i += 1

    def flush(self, timeout_ms=-1):
        return True  # every QoS 1 publish already waited for its PUBACK

    def disconnect(self):
        self.c.disconnect()


class Simple2(Umqtt):
    """umqtt.simple2: QoS 1 publish() returns at once and check_msg() handles
    the PUBACKs (rcv_pids holds the ones still due; after message_timeout
    10 s a pid is dropped and reported lost through cbstat). Used here with
    at most WINDOW in flight, as frugalmqtt's 8 slots."""

    WINDOW = 8

    def __init__(self, mod, cid, host, port):
        Umqtt.__init__(self, mod, cid, host, port)
        self.quota = self.WINDOW
        self.lost = 0
        self.c.cbstat = self._status

    def _status(self, pid, status):
        if status == 0:  # no PUBACK within message_timeout
            self.lost += 1

    def publish_many(self, topic, payload, qos, props, n):
        c = self.c
        pub = c.publish
        i = 0
        while i < n:
            while qos and len(c.rcv_pids) >= self.WINDOW:
                c.check_msg()
            pub(topic, payload, False, qos)
            i += 1

    def flush(self, timeout_ms=-1):
        from time import ticks_ms, ticks_diff
        t0 = ticks_ms()
        c = self.c
        while c.rcv_pids:
            if timeout_ms >= 0 and ticks_diff(ticks_ms(), t0) > timeout_ms:
                return False
            c.check_msg()
        return not self.lost


class MqttAs:
    """mqtt_as as packaged on PyPI (micropython-mqtt 0.7b4, mqtt_async.py),
    on asyncio: each call runs the library's coroutine to completion on the
    one event loop (its reader and keep-alive tasks run meanwhile). A QoS 1
    publish awaits its PUBACK (sync=True, the library's default)."""

    def __init__(self, mod, cid, host, port):
        import asyncio
        self.run = asyncio.run
        cfg = mod.config
        cfg.server = host
        cfg.port = port
        cfg.client_id = cid
        cfg.ssid = "lab"  # joins the unix port's `network` stand-in
        cfg.wifi_pw = "x"
        cfg.clean = True
        self.c = mod.MQTTClient(cfg)
        # The unix port's getaddrinfo() gives a raw sockaddr where a board's
        # gives the (ip, port) tuple mqtt_async unpacks: hand it the tuple.
        self.c._addr = (host, port)
        self.c._dns_lookup = lambda: None
        self.run(self.c.connect())
        self.quota = 1
        self.amax = 0
        self.sync_publish = None

    def publish(self, topic, payload, qos=0, retain=False, props=None):
        self.run(self.c.publish(topic, payload, retain, qos))

    async def _many(self, topic, payload, qos, n):
        pub = self.c.publish
        i = 0
        while i < n:
            await pub(topic, payload, False, qos)
            i += 1

    def publish_many(self, topic, payload, qos, props, n):
        self.run(self._many(topic, payload, qos, n))

    def flush(self, timeout_ms=-1):
        return True

    def disconnect(self):
        self.run(self.c.disconnect())


def connect(lib, cid, host, port):
    """A connected adapter for `lib` (MQTT 3.1.1: these libraries have no 5.0).
    "frugalmqtt" is its own MQTTClient, 3.1.1, sized as heap.py's publish-only
    run (the `make compare` heap-after-connect row). The client id gets the
    library's name, so runs of several libraries never take over each
    other's connection on the shared broker."""
    cid = "%s-%s" % (cid, lib)
    if lib == "frugalmqtt":
        from frugalmqtt.client import MQTTClient
        c = MQTTClient(cid, host, port, 4, reconnect=False, timeout_ms=5000, slots=8,
                       slot_size=128, max_packet=256, tx_size=256, inbound=1, aliases_in=0)
        c.connect()
        return c
    if lib == "frugalmqtt.lite":  # sized as heap_lite.py's run
        from frugalmqtt.lite import Publisher
        c = Publisher(cid, host, port, 4, timeout_ms=5000, slots=8, max_packet=128, rx_size=64)
        c.connect()
        return c
    if lib == "frugalmqtt.telem":
        return telemetry(cid, host, port, 4)
    if lib == "umqtt.simple":
        from umqtt import simple
        return Umqtt(simple, cid, host, port)
    if lib == "umqtt.robust":
        from umqtt import robust
        return Umqtt(robust, cid, host, port)
    if lib == "umqtt.simple2":
        from umqtt import simple2
        return Simple2(simple2, cid, host, port)
    if lib == "mqtt_as":
        import mqtt_async
        return MqttAs(mqtt_async, cid, host, port)
    raise ValueError("unknown library " + lib)


def telemetry(cid, host, port, version):
    """The telemetry profile: telem.Telemetry with an outbox (a fresh 8 KB
    file), sized as lite's runs (heap_telem.py's run), connected."""
    import os
    from frugalmqtt.telem import Telemetry
    from frugalmqtt.outbox import Outbox
    # under $TMPDIR, one file per client id and broker (runs against two
    # brokers go in parallel)
    path = "%s/bench-outbox-%s-%d.bin" % (os.getenv("TMPDIR") or "/tmp", cid, port)
    try:
        os.remove(path)  # a fresh device: nothing to reload
    except OSError:
        pass
    c = Telemetry(cid, host, port, version, timeout_ms=5000, slots=8, max_packet=128,
                  rx_size=64, outbox=Outbox(path, 8192))
    c.connect()
    return c
