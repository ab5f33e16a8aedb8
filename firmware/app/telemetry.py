# The telemetry firmware: reads the board's sensors every period_ms and
# publishes each reading as host_sim/schema.py's payload (compact JSON,
# {"dev","seq","ts","sensor","value"}) with MQTT 5 properties (content type,
# message expiry, the unit as a user property); every status_every samples
# it publishes its own heap and uptime. Between samples it idles in
# client.poll() (keep-alive and acks go on) or deep-sleeps (sleep: "deep";
# the sequence number survives in the board's state store).
#
# Battery mode ("wake" in the config: period_ms, readings, deadline_ms,
# store_size): each wake takes `readings` samples of every sensor, publishes
# them in one frugalmqtt.wake cycle (CONNECT and the readings in one write,
# the acks collected until the deadline), and deep-sleeps for period_ms; what
# was not acknowledged, the packet ids, the server's limits and the sequence
# number wait in the board's wake store (board.WAKE_STORE: None for RTC
# memory, else a file) for the next wake.
#
# The client is the telemetry profile, frugalmqtt.telem.Telemetry
# (publish-only, with outbound topic aliases and, with "outbox" in the
# config, frugalmqtt.outbox.Outbox: readings survive a reset and wait in a
# file beyond the slots). Offline: the link is tried once per sample; while
# it is down QoS 1/2 readings wait in the slots (and the outbox's file),
# resent after reconnect, and QoS 0 readings are dropped and counted; so is
# a reading that finds no room.
#
# The same code runs on ESP32, Pico W and the unix port: everything
# board-specific is in the `board` module (boards/<name>/board.py).
import gc
import json
import sys
from errno import ETIMEDOUT

try:
    from time import ticks_ms, ticks_diff, sleep_ms, time_ns, gmtime
except ImportError:  # CPython, where only payload() is used (tests)
    pass

CONTENT_TYPE = "application/json"
# time.time_ns() counts from 2000-01-01 on ports with that epoch
_EPOCH_2000_S = 946684800


def payload(dev, seq, ts_ms, sensor, value):
    """The telemetry payload, as host_sim.schema.encode_payload writes it
    (keys in the same order, no spaces); value rounded to 2 decimals."""
    if value != value or value in (float("inf"), float("-inf")):
        v = "null"  # JSON has no NaN / Infinity
    else:
        v = "%.2f" % value
    return ('{"dev":%s,"seq":%d,"ts":%d,"sensor":%s,"value":%s}' % (
        json.dumps(dev), seq, ts_ms, json.dumps(sensor), v)).encode()


def epoch_ms():
    ms = time_ns() // 1000000
    if gmtime(0)[0] == 2000:
        ms += _EPOCH_2000_S * 1000
    return ms


def tls_context(t):
    """An SSLContext from the config's "tls" section ({"ca": DER/PEM file,
    "cert"/"key": client certificate, "verify": true}), or None for TCP."""
    if not t:
        return None
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if t.get("cert"):
        ctx.load_cert_chain(t["cert"], t["key"])
    if t.get("verify", True):
        with open(t["ca"], "rb") as f:
            ctx.load_verify_locations(cadata=f.read())
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.verify_mode = ssl.CERT_NONE  # encrypted but unauthenticated: tests only
    return ctx


SEQ_FILE = "seq.txt"


def load_seq():
    """The next sequence number, kept across resets and deep sleep (a board
    with RTC memory has its own load_seq/save_seq)."""
    try:
        with open(SEQ_FILE) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def save_seq(seq):
    with open(SEQ_FILE, "w") as f:
        f.write(str(seq))


def load_config(path="config.json"):
    with open(path) as f:
        return json.load(f)


class Telemetry:
    def __init__(self, cfg, board, log=print):
        self.cfg = cfg
        self.board = board
        self.log = log
        self.dev = cfg["client_id"]
        self.qos = cfg.get("qos", 1)
        self.period = cfg.get("period_ms", 10000)
        self.status_every = cfg.get("status_every", 6)
        self.samples = cfg.get("samples", 0)  # 0: forever
        self.deep = cfg.get("sleep", "idle") == "deep"
        self.version = cfg.get("broker", {}).get("version", 5)
        self.load_seq = getattr(board, "load_seq", load_seq)
        self.save_seq = getattr(board, "save_seq", save_seq)
        self.seq = self.load_seq()
        self.dropped = 0  # readings that found no room (QoS 0 offline, slots full)
        self.connects = 0
        self.boot = ticks_ms()
        import sensors
        self.sensors = sensors.make(cfg.get("sensors") or board.SENSORS)
        topics = cfg.get("topics", {})
        tmpl = topics.get("telemetry", "sensors/{dev}/{sensor}")
        self.topics = [tmpl.format(dev=self.dev, sensor=s.name).encode() for s in self.sensors]
        self.status_topic = topics.get("status", "sensors/{dev}/status").format(
            dev=self.dev).encode()
        self.props = [self._props(s.unit) for s in self.sensors]  # built once, reused
        self.status_props = self._props(None)
        self.client = self._client()

    def _props(self, unit):
        if self.version < 5:
            return None
        from frugalmqtt.liteprops import props
        return props(content_type=CONTENT_TYPE, expiry=self.cfg.get("expiry_s") or None,
                     user=(("unit", unit),) if unit else ())

    def _client(self):
        from frugalmqtt.telem import Telemetry
        b = self.cfg["broker"]
        s = dict(self.board.SESSION)  # slots, slot_size, ... sized for the board
        s.update(self.cfg.get("session", {}))
        # a publisher receives only acks: the receiving sizes (max_packet,
        # inbound, aliases_in) of the full client do not apply
        kw = {"slots": s.get("slots", 4), "max_packet": s.get("slot_size", 256),
              "tx_size": s.get("tx_size", 0), "rx_size": s.get("rx_size", 64),
              "aliases_out": s.get("aliases_out", 4)}
        w = self.cfg.get("wake")
        o = self.cfg.get("outbox")
        cls = Telemetry
        if w:
            from frugalmqtt.wake import Wake, Store
            cls = Wake
            kw["store"] = Store(w.get("store_size", 2048), getattr(self.board, "WAKE_STORE",
                                                                    None))
        elif o:
            from frugalmqtt.outbox import Outbox
            kw["outbox"] = Outbox(o["path"], o["size"])
        return cls(self.dev, b["host"], b.get("port", 0), self.version,
                         user=b.get("user"), password=b.get("password"),
                         keepalive=b.get("keepalive", 60), ssl=tls_context(self.cfg.get("tls")),
                         clean=b.get("clean", False), timeout_ms=b.get("timeout_ms", 5000), **kw)

    # ---- the link ---------------------------------------------------------

    def link(self):
        """Connect when not connected (one attempt); True when connected."""
        c = self.client
        if c.connected:
            return True
        try:
            present = c.connect()
            self.connects += 1
            self.log("mqtt: connected to %s:%d (session present: %s)" % (
                c.server, c.port, present))
            return True
        except Exception as e:  # OSError, refused (ServerError), protocol errors
            c.close()
            self.log("mqtt: connect failed: %r" % (e,))
            return False

    def _guard(self, fn, *a):
        """Run a client call; a broken link closes the client (reconnect later)."""
        try:
            return fn(*a)
        except Exception as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            self.log("mqtt: link lost: %r" % (e,))
            self.client.close()
            return None

    # ---- one sample -------------------------------------------------------

    def publish(self, topic, data, props):
        c = self.client
        if self.qos == 0 and not c.connected:
            self.dropped += 1
            return
        try:
            c.publish(topic, data, self.qos, False, props, 0)  # a packet id, or outbox.STORED
        except Exception as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            self.dropped += 1  # not stored
            if c.connected and isinstance(e, OSError) and e.errno == ETIMEDOUT:
                return  # no room: every slot (and the outbox's file) is full
            self.log("mqtt: link lost: %r" % (e,))
            c.close()

    def sample(self, batch=None):
        """Read every sensor once and publish each reading, or (battery mode)
        add it to `batch` for the wake's cycle."""
        ts = epoch_ms()
        for i, s in enumerate(self.sensors):
            try:
                v = s.read()
            except Exception as e:
                self.log("sensor %s: %r" % (s.name, e))
                continue
            data = payload(self.dev, self.seq, ts, s.name, v)
            if batch is None:
                self.publish(self.topics[i], data, self.props[i])
            else:
                batch.append((self.topics[i], data, self.qos, False, self.props[i]))
        self.seq += 1

    def status(self):
        gc.collect()
        up = ticks_diff(ticks_ms(), self.boot) // 1000
        text = ('{"dev":%s,"seq":%d,"ts":%d,"uptime_s":%d,"heap_free":%d,"heap_used":%d,'
                '"connects":%d,"dropped":%d,"board":%s}' % (
                    json.dumps(self.dev), self.seq, epoch_ms(), up, gc.mem_free(),
                    gc.mem_alloc(), self.connects, self.dropped,
                    json.dumps(self.board.NAME)))
        self.log("status: " + text)
        self.publish(self.status_topic, text.encode(), self.status_props)

    def wait(self, until):
        """Idle until ticks `until`: poll the client (acks, keep-alive) or sleep."""
        while True:
            left = ticks_diff(until, ticks_ms())
            if left <= 0:
                return
            if self.client.connected:
                self._guard(self.client.poll, min(left, 1000))
            else:
                sleep_ms(min(left, 1000))

    def run(self):
        if self.cfg.get("wake"):
            return self.wake()
        n = 0
        due = ticks_ms()
        while not self.samples or n < self.samples:
            self.link()
            self.sample()
            n += 1
            if self.status_every and n % self.status_every == 0:
                self.status()
            if self.deep:
                self.sleep_deep()
            due += self.period
            if not self.samples or n < self.samples:
                self.wait(due)
        self.stop()

    def wake(self):
        """One wake of the battery mode: sample, one publish cycle, deep sleep."""
        w = self.cfg["wake"]
        c = self.client
        self.seq = c.user  # the sequence number kept with the session's state
        msgs = []
        for _ in range(w.get("readings", 1)):
            self.sample(msgs)
        c.user = self.seq
        ended = c.cycle(msgs, w.get("deadline_ms", 5000))
        self.log("wake: %d readings, %d acknowledged, %d waiting" % (
            len(msgs), len(ended), c.pending()))
        period = w.get("period_ms", self.period)
        self.log("sleep: deep for %d ms" % period)
        self.board.deep_sleep(period)

    def sleep_deep(self):
        c = self.client
        if c.connected:
            self._guard(c.flush, self.cfg.get("flush_ms", 5000))
            self._guard(c.disconnect)
        self.save_seq(self.seq)
        self.log("sleep: deep for %d ms" % self.period)
        self.board.deep_sleep(self.period)  # a device wakes through a reset

    def stop(self):
        c = self.client
        if c.connected:
            self._guard(c.flush, self.cfg.get("flush_ms", 5000))
            self._guard(c.disconnect)
        self.save_seq(self.seq)
        self.log("telemetry: done, %d samples up to seq %d, %d dropped" % (
            self.samples, self.seq, self.dropped))


def main(config_path="config.json"):
    """The firmware: Wi-Fi, clock, then samples until cfg["samples"] (or
    forever). Returns the Telemetry object when it stops."""
    import board
    cfg = load_config(config_path)
    if cfg.get("wifi"):
        import wifi
        try:
            wifi.connect(cfg["wifi"])
        except OSError as e:
            print(e)
            board.deep_sleep(cfg.get("period_ms", 10000))  # try again after a reset
            return
    if board.TLS.get("ntp") and cfg.get("tls"):
        board.set_clock()  # certificate validity needs the time
    t = Telemetry(cfg, board)
    t.run()
    return t


if __name__ == "__main__" and sys.implementation.name == "micropython":
    main(*sys.argv[1:2])
