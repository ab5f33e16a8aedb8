"""The link simulator: a TCP proxy between one device and the broker that
frames both directions into MQTT packets (host_sim.wire, the shared codec),
logs every packet and applies faults, deterministically from a script of
rules or a seed.

A rule fires once, on the nth packet (counted over the link's whole life,
across reconnects) that matches its direction, packet type and, optionally,
the payload of the PUBLISH the packet belongs to (acks are matched through
their packet id):

  after     forward the packet, then cut the connection (both sides)
  drop      cut without forwarding it
  mid       forward its first `byte` bytes (default: half), then cut
  blackhole forward nothing from now on in either direction but keep both
            sockets open (a half-open link the device must find by keep-alive)

`Rule(dir, byte=n)` (no type) cuts after byte n of that direction's stream.
Every rule can also refuse reconnects for `refuse_s` seconds after it fired
(connections are accepted and closed at once). Link-wide: `delay_ms` and
`jitter_ms` per packet, `rate_bps` (throttle), `refuse(seconds)`, `cut()`.
`latency_ms` is a fixed one-way latency instead (a pipe: every packet arrives
latency_ms after it left, however many are in flight), and the proxy, which
accepts at once, charges the TCP handshake: the device's first bytes leave
one round trip after it opened the connection. `t_open` (per connection) and
each packet's `due` (when the other end gets it) time a round trip count.

All links share one asyncio loop in a daemon thread, so a fleet of hundreds
costs no threads; the public methods are plain blocking calls.
"""
import asyncio
import random
import threading
import time

from frugalmqtt_host.ref.codec import CONNECT, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP
from . import wire

ACTIONS = ("after", "drop", "mid", "blackhole")


class Rule:
    def __init__(self, dir, type=None, nth=1, action="after", payload=None, byte=None,
                 refuse_s=0.0):
        assert dir in ("c2s", "s2c"), dir
        assert action in ACTIONS, action
        self.dir = dir
        self.type = None if type is None else wire.packet_type(type)
        self.nth = nth
        self.action = action
        self.payload = payload
        self.byte = byte
        self.refuse_s = refuse_s
        self.seen = 0
        self.fired = False

    def __repr__(self):
        what = wire.NAMES.get(self.type, "byte %s" % self.byte)
        return "Rule(%s %s #%d %s%s%s)" % (
            self.dir, what, self.nth, self.action,
            " payload=%r" % self.payload if self.payload is not None else "",
            " fired" if self.fired else "")

    def as_dict(self):
        return {"dir": self.dir, "type": wire.NAMES.get(self.type), "nth": self.nth,
                "action": self.action, "payload": None if self.payload is None
                else self.payload.decode("latin-1"), "byte": self.byte,
                "refuse_s": self.refuse_s, "fired": self.fired}


class _Loop:
    """The one background event loop all links run on."""
    lock = threading.Lock()
    loop = None

    @classmethod
    def get(cls):
        with cls.lock:
            if cls.loop is None or not cls.loop.is_running():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run():
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="host_sim-links", daemon=True).start()
                ready.wait()
                cls.loop = loop
            return cls.loop


def run_in_loop(coro, timeout=10):
    return asyncio.run_coroutine_threadsafe(coro, _Loop.get()).result(timeout)


class _Conn:
    def __init__(self, idx, cr, cw, ur, uw):
        self.idx = idx
        self.reader = {"c2s": cr, "s2c": ur}
        self.writer = {"c2s": uw, "s2c": cw}  # where each direction goes
        self.cut = False
        self.blackholed = False
        self.version = 5


class Link:
    """Listens on 127.0.0.1:port (free) and proxies to upstream (host, port)."""

    def __init__(self, upstream, rules=(), delay_ms=0, jitter_ms=0, rate_bps=0, seed=0,
                 name="link", latency_ms=0):
        self.upstream = upstream
        self.rules = list(rules)
        self.latency_ms = latency_ms
        self.t_open = []  # when each connection was accepted
        self.delay_ms = delay_ms
        self.jitter_ms = jitter_ms
        self.rate_bps = rate_bps
        self.rng = random.Random(seed)
        self.name = name
        self.log = []        # one dict per packet, in arrival order (see wire.describe;
                             # + conn, dir, t, action, unsent)
        self.conns = []
        self.refused = 0     # connection attempts refused
        self.cuts = 0
        self.refuse_until = 0.0
        self.bytes = {"c2s": 0, "s2c": 0}
        self.pids = {"c2s": {}, "s2c": {}}  # PUBLISH direction -> pid -> payload
        # QoS 1/2 PUBLISHes from the device not yet acknowledged to it: +1 as
        # one arrives, -1 as the ack ending its flow is forwarded; and the peak
        self.outstanding = 0
        self.max_outstanding = 0
        self.server = None
        self.port = None

    # ---- control (blocking, from any thread) -------------------------------

    def start(self):
        run_in_loop(self._start())
        return self

    def close(self):
        run_in_loop(self._close())

    def refuse(self, seconds):
        """Refuse new connections for `seconds` from now."""
        self.refuse_until = time.monotonic() + seconds

    def cut(self):
        """Cut every open connection now."""
        _Loop.get().call_soon_threadsafe(self._cut_all)

    def blackhole(self):
        """Stop forwarding on every open connection, keeping the sockets open."""
        def go():
            for c in self.conns:
                c.blackholed = True
        _Loop.get().call_soon_threadsafe(go)

    # ---- reading the log -----------------------------------------------------

    def packets(self, d=None, t=None, conn=None, payload=None):
        t = None if t is None else wire.packet_type(t)
        return [e for e in list(self.log) if (d is None or e["dir"] == d)
                and (t is None or e["type"] == t) and (conn is None or e["conn"] == conn)
                and (payload is None or e.get("payload") == payload)]

    @property
    def errors(self):
        """Packets the codec refused (the device or broker sent them)."""
        return [e for e in list(self.log) if e["error"] is not None]

    def dump(self):
        return "\n".join(
            "%d %s %-10s pid=%s q=%s dup=%s rc=%s %r %s" % (
                e["conn"], e["dir"], e["name"], e["pid"], e.get("qos"), e.get("dup"),
                e["reason"], e.get("payload"), e["action"] or "") for e in list(self.log))

    def wait(self, pred, timeout=10.0):
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    # ---- the proxy ---------------------------------------------------------

    async def _start(self):
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _close(self):
        if self.server:
            self.server.close()
        self._cut_all(hard=True)

    def _cut_all(self, hard=False):
        for c in self.conns:
            self._cut(c, hard)

    def _cut(self, conn, hard=False):
        """End a connection: the broker side closes at once; the device side
        gets everything already forwarded, then EOF, and whatever the device
        still sends is read and dropped until it closes (so a packet
        forwarded before a cut is surely seen by the device)."""
        if conn.cut and not hard:
            return
        conn.cut = True
        conn.writer["c2s"].close()
        cw = conn.writer["s2c"]
        try:
            if hard:
                raise OSError
            cw.write_eof()
        except (OSError, RuntimeError):
            cw.close()

    async def _accept(self, cr, cw):
        t_open = time.monotonic()
        if t_open < self.refuse_until:
            self.refused += 1
            cw.close()
            return
        try:
            ur, uw = await asyncio.open_connection(*self.upstream)
        except OSError:
            self.refused += 1
            cw.close()
            return
        conn = _Conn(len(self.conns), cr, cw, ur, uw)
        conn.t_open = t_open
        self.t_open.append(t_open)
        self.conns.append(conn)
        await asyncio.gather(self._pump(conn, "c2s"), self._pump(conn, "s2c"))

    async def _pump(self, conn, d):
        reader, writer = conn.reader[d], conn.writer[d]
        split = wire.Splitter()
        # with a fixed latency the reading goes on while packets wait to be
        # delivered (a pipe): each is stamped when it arrived
        q = asyncio.Queue() if self.latency_ms else None
        out = asyncio.ensure_future(self._deliver(conn, d, q, writer)) if q else None
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                t_read = time.monotonic()
                if conn.cut and d == "s2c":
                    break
                if conn.cut or conn.blackholed:
                    continue  # dropped: a cut or black-holed link
                for raw in split.feed(data):
                    if conn.cut or conn.blackholed:
                        break
                    if q:
                        q.put_nowait((raw, t_read))
                    else:
                        await self._packet(conn, d, raw, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        if q:
            q.put_nowait(None)
            await out
        if d == "s2c" and conn.blackholed and not conn.cut:
            return  # the broker gave up on a black-holed link: the device must notice
        self._cut(conn, hard=d == "c2s")

    async def _deliver(self, conn, d, q, writer):
        while True:
            item = await q.get()
            if item is None:
                return
            if not (conn.cut or conn.blackholed):
                await self._packet(conn, d, item[0], writer, item[1])

    async def _packet(self, conn, d, raw, writer, t_read=0.0):
        if d == "c2s" and raw[0] >> 4 == CONNECT:
            conn.version = wire.connect_version(raw)
        e = wire.describe(raw, conn.version)
        e["conn"] = conn.idx
        e["dir"] = d
        e["t"] = time.monotonic()
        t = e["type"]
        if t == PUBLISH and e.get("qos"):
            self.pids[d][e["pid"]] = e["payload"]
        elif PUBACK <= t <= PUBCOMP:
            e["payload"] = self.pids[wire.ack_direction(d, t)].get(e["pid"])
        rule = self._match(d, e, len(raw))
        e["action"] = rule.action if rule else None
        e["unsent"] = False  # True when a cut kept it from going out after all
        self.log.append(e)
        self._count(d, e)
        start = self.bytes[d]
        self.bytes[d] += len(raw)
        delay = self.delay_ms + (self.rng.uniform(0, self.jitter_ms) if self.jitter_ms else 0)
        if self.latency_ms:
            lat = self.latency_ms / 1000
            t = max(t_read, conn.t_open + 2 * lat) if d == "c2s" else t_read
            e["due"] = t + lat
            delay = max(0.0, e["due"] - time.monotonic()) * 1000
        if delay:
            await asyncio.sleep(delay / 1000)
            if conn.cut or conn.blackholed:
                e["unsent"] = True  # the link died meanwhile
                return
        send = raw
        if rule is not None:
            if rule.refuse_s:
                self.refuse(rule.refuse_s)
            if rule.action == "drop":
                send = b""
            elif rule.action == "mid":
                if rule.byte is not None and rule.type is None:
                    k = rule.byte - start
                else:
                    k = rule.byte if rule.byte is not None else len(raw) // 2
                send = raw[:max(1, min(k, len(raw) - 1))]
            elif rule.action == "blackhole":
                conn.blackholed = True
                return
        if send:
            try:
                writer.write(send)
                await writer.drain()
            except (OSError, RuntimeError):
                e["unsent"] = True
                self._cut(conn)
                return
            if self.rate_bps:
                await asyncio.sleep(len(send) / self.rate_bps)
        if rule is not None:
            self.cuts += 1
            self._cut(conn)

    def _count(self, d, e):
        t = e["type"]
        if d == "c2s" and t == PUBLISH and e.get("qos"):
            self.outstanding += 1
            self.max_outstanding = max(self.max_outstanding, self.outstanding)
        elif d == "s2c" and (t == PUBACK or t == PUBCOMP
                             or (t == PUBREC and (e["reason"] or 0) >= 0x80)):
            self.outstanding -= 1

    def _match(self, d, e, size):
        for r in self.rules:
            if r.fired or r.dir != d:
                continue
            if r.type is None:  # a byte position in the stream
                if r.byte is not None and self.bytes[d] + size > r.byte:
                    r.fired = True
                    r.action = "mid" if self.bytes[d] < r.byte else "drop"
                    return r
                continue
            if r.type != e["type"] or (r.payload is not None and r.payload != e.get("payload")):
                continue
            r.seen += 1
            if r.seen == r.nth:
                r.fired = True
                return r
        return None


def start_link(upstream, rules=(), **kw):
    return Link(upstream, rules, **kw).start()


# ---- checks on a link log that every scenario makes ---------------------------

def protocol_violations(log):
    """What the device did wrong on the wire, from a link log (a list of
    strings, empty when fine):
    - a PUBLISH of a payload already seen on the link must carry DUP=1 [MQTT-3.3.1-1]
      (a DUP=1 first sighting is fine: the earlier copy went into a cut link);
    - after the device sent PUBREL for a message it never sends its PUBLISH
      again [MQTT-4.3.3-6] (PUBREL, not PUBLISH, is resent after PUBREC);
    - a resent PUBLISH keeps its packet id [MQTT-4.4.0-1]."""
    bad = []
    first = {}
    released = set()
    for e in log:
        if e["dir"] != "c2s":
            continue
        if e["type"] == PUBLISH and e.get("qos"):
            p = e["payload"]
            if p in released:
                bad.append("PUBLISH %r after its PUBREL (conn %d)" % (p, e["conn"]))
            if p in first:
                if not e["dup"]:
                    bad.append("resent PUBLISH %r without DUP=1 (conn %d)" % (p, e["conn"]))
                if e["pid"] != first[p]["pid"] and e["conn"] == first[p]["conn"]:
                    bad.append("PUBLISH %r changed packet id" % (p,))
            else:
                first[p] = e
        elif e["type"] == PUBREL and e.get("payload") is not None:
            released.add(e["payload"])
    return bad


def pubrel_after_pubrec(log):
    """For each payload whose PUBREC reached the device before a cut, the
    first packet the device sent for it on a later connection: "PUBREL" is
    right. Returns {payload: name of that packet}."""
    out = {}
    recd = {}
    for e in log:
        p = e.get("payload")
        if p is None:
            continue
        if (e["dir"] == "s2c" and e["type"] == PUBREC and e["action"] in (None, "after")
                and not e.get("unsent")):
            recd.setdefault(p, e["conn"])
        elif e["dir"] == "c2s" and p in recd and e["conn"] > recd[p] and p not in out:
            out[p] = e["name"]
    return out

