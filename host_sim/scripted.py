"""The scripted broker peer: a small TCP server that plays a scenario's exact
packets to a device and records what the device sends, for the cases a real
broker never produces (withheld acks, a repeated QoS 2 PUBLISH, PUBREC 0x80,
an unknown topic alias, QoS 3, wrong reserved flags, an oversize remaining
length, a session-present mismatch). Everything a real broker can do runs
against mosquitto instead.

Packets are built with frugalmqtt_host.packets (the codec's encoders); raw
bytes can be sent as they are for malformed cases.

A script is a function `script(peer)` run in its own thread for one accepted
connection: `scripts[i]` for the i-th connection, the last one for any later
connection. The Peer blocks with timeouts; a script that fails records its
error in `broker.errors`.
"""
import socket
import threading
import time

from frugalmqtt.codec import (CONNECT, DISCONNECT, PINGREQ, PINGRESP, PUBLISH, PUBREL,
                              SUBSCRIBE)
from frugalmqtt_host import packets
from . import wire

WAIT_S = 5.0


class Peer:
    """One connection from the device, seen from the broker side."""

    def __init__(self, broker, sock, idx):
        self.broker = broker
        self.sock = sock
        self.idx = idx
        self.version = 5
        self.got = []          # described packets from the device, in order
        self.closed = False    # the device closed the connection
        self.closed_at = None
        self.sent = []         # raw packets we sent
        self.cond = threading.Condition()
        self.auto_ping = True  # answer PINGREQ with PINGRESP
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        split = wire.Splitter()
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    break
                for raw in split.feed(data):
                    if raw[0] >> 4 == CONNECT:
                        self.version = wire.connect_version(raw)
                    e = wire.describe(raw, self.version)
                    e["conn"] = self.idx
                    e["raw"] = raw
                    e["t"] = time.monotonic()
                    if e["type"] == PINGREQ and self.auto_ping:
                        self._send(bytes((PINGRESP << 4, 0)))
                    with self.cond:
                        self.got.append(e)
                        self.cond.notify_all()
        except OSError:
            pass
        with self.cond:
            self.closed = True
            self.closed_at = time.monotonic()
            self.cond.notify_all()

    # ---- what a script does ------------------------------------------------

    def _send(self, raw):
        try:
            self.sock.sendall(raw)
        except OSError:
            return False
        self.sent.append(raw)
        return True

    def send(self, *raws):
        for raw in raws:
            self._send(raw)

    def expect(self, ptype, timeout=WAIT_S, **match):
        """Wait for the next packet of ptype from the device (skipping
        others, which stay in `got`) whose fields equal `match`; returns it
        or raises AssertionError."""
        t = wire.packet_type(ptype)
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                for e in self.got:
                    if (not e.get("taken") and e["type"] == t
                            and all(e.get(k) == v for k, v in match.items())):
                        e["taken"] = True
                        return e
                left = end - time.monotonic()
                if left <= 0 or self.closed:
                    raise AssertionError("conn %d: no %s %s from the device; got %s" % (
                        self.idx, wire.NAMES[t], match, self.names()))
                self.cond.wait(left)

    def wait_closed(self, timeout=WAIT_S):
        """True when the device closed the connection within timeout."""
        with self.cond:
            return self.cond.wait_for(lambda: self.closed, timeout)

    def accept(self, sp=False, props=None):
        """Wait for CONNECT, answer CONNACK; returns the CONNECT."""
        c = self.expect(CONNECT)
        self.send(packets.connack(self.version, sp, 0, props))
        return c

    def publish(self, topic, payload, qos=0, pid=0, dup=False, retain=False, props=None,
                alias=0):
        self.send(packets.publish(self.version, topic, payload, qos, pid, retain, dup, props,
                                  alias))

    def ack(self, ptype, pid, reason=0):
        self.send(packets.ack(self.version, wire.packet_type(ptype), pid, reason))

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def names(self):
        return [e["name"] for e in self.got]

    def disconnects(self):
        return [e for e in self.got if e["type"] == DISCONNECT]


class ScriptedBroker:
    def __init__(self, scripts):
        self.scripts = list(scripts)
        self.peers = []
        self.errors = []
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.ls.settimeout(0.1)
        self.host = "127.0.0.1"
        self.port = self.ls.getsockname()[1]
        self.stopping = False
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self):
        while not self.stopping:
            try:
                s, _ = self.ls.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            peer = Peer(self, s, len(self.peers))
            self.peers.append(peer)
            script = self.scripts[min(peer.idx, len(self.scripts) - 1)]
            t = threading.Thread(target=self._run, args=(script, peer), daemon=True)
            t.start()
            self.threads.append(t)

    def _run(self, script, peer):
        try:
            script(peer)
        except Exception as e:  # reported by the test through `errors`
            self.errors.append("conn %d: %r" % (peer.idx, e))

    def wait_peers(self, n, timeout=WAIT_S):
        end = time.monotonic() + timeout
        while len(self.peers) < n:
            if time.monotonic() > end:
                return False
            time.sleep(0.01)
        return True

    def close(self):
        self.stopping = True
        self.ls.close()
        for p in self.peers:
            p.close()
        for t in self.threads:
            t.join(2)


def serve_forever(peer):
    """A script for 'every later connection': accept, then ack whatever comes
    like a well-behaved broker (PUBACK / PUBREC / PUBCOMP / SUBACK), until the
    device closes."""
    c = peer.expect(CONNECT)
    peer.send(packets.connack(peer.version, not c["clean"]))
    seen = 0
    while not peer.closed:
        with peer.cond:
            peer.cond.wait_for(lambda: len(peer.got) > seen or peer.closed, 0.2)
            new = peer.got[seen:]
        seen += len(new)
        for e in new:
            if e["type"] == PUBLISH and e.get("qos") == 1:
                peer.ack("PUBACK", e["pid"])
            elif e["type"] == PUBLISH and e.get("qos") == 2:
                peer.ack("PUBREC", e["pid"])
            elif e["type"] == PUBREL:
                peer.ack("PUBCOMP", e["pid"])
            elif e["type"] == SUBSCRIBE:
                peer.send(packets.suback(peer.version, e["pid"], [o & 3 for _, o in e["subs"]]))
