# frugalmqtt.wake: the deep-sleep publish cycle of the telemetry profile, for
# battery devices that wake, publish a few readings and sleep again. Opt-in:
# a device that does not import it pays nothing.
#
# One cycle (Wake.cycle()): open the connection, resume the session
# (clean=False), write the CONNECT and, right behind it in the same write, the
# messages stored from earlier wakes and the new ones; collect the acks until
# a deadline, DISCONNECT, return what was acknowledged. A client may send
# packets after CONNECT without waiting for the CONNACK; a server that refuses
# the CONNECT processes none of them [MQTT-3.1.4-5] (5.0 [MQTT-3.1.4-6]), so
# they stay stored and go again next wake. Before the CONNACK the client does
# not know the server's limits: it uses those the last CONNACK gave
# (remembered in the store) and never sends more than they allow; with none
# remembered it waits for the CONNACK. A resumed session costs two round
# trips from socket open: the TCP handshake and CONNECT/CONNACK, the acks
# coming right behind the CONNACK.
#
# State across deep sleep (a reset: the heap is gone): the outbox
# (outbox.Outbox, its record format) keeps every QoS 1/2 message not yet
# acknowledged and how far its flow got; a 16-byte block beside it keeps the
# packet-id counter, the remembered limits and one application counter. Both
# live in a Store: RTC memory where the board has it (ESP32), else a file in
# flash (Pico W; the unix port's stand-in for RTC memory).
import os
from .lite import core, MQTTError, ServerError, ticks_ms, ticks_diff
from .outbox import Outbox
from .telem import Telemetry

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_STATE = const(16)  # bytes of wake state before the outbox's file
_MAGIC = const(0xF7)
# lite.py's state[...] indices and slot states
_N = const(0)
_QUOTA = const(1)
_PID = const(2)
_SMAX = const(6)
_MQOS = const(7)
_RET = const(8)
_TMO = const(12)
_STRIDE = const(16)
_EARLY = const(22)
_AL = const(23)
_ORD = const(26)
_HELLO = const(27)
_ACK = const(1)
_REC = const(2)
_COMP = const(3)  # PUBREL sent, waiting for PUBCOMP


class Store:
    """size bytes kept through deep sleep: the wake state, then the outbox's
    file (size - 16 bytes). In RTC memory (machine.RTC().memory(), ESP32:
    2048 bytes, kept through deep sleep but not a power cycle) or, given
    path, in a file (flash: boards without RTC memory such as the Pico W, and
    the unix port standing in for RTC memory); the file is replaced whole on
    each write (a new file renamed over the old one, so a reset never leaves
    half of it). Seen by the outbox as its file."""

    def __init__(self, size=2048, path=None):
        self.path = path
        self.b = bytearray(size)
        self.pos = 0
        try:
            if path:
                with open(path, "rb") as f:
                    m = f.read()
            else:
                import machine
                m = machine.RTC().memory()
        except OSError:
            m = b""
        if len(m) == size:
            self.b[:] = m

    def flush(self):
        if self.path:
            t = self.path + ".new"
            with open(t, "wb") as f:
                f.write(self.b)
            os.rename(t, self.path)
        else:
            import machine
            machine.RTC().memory(self.b)

    # ---- the file calls outbox.Outbox makes, after the wake state -----------

    def seek(self, off, whence=0):
        self.pos = (len(self.b) - _STATE if whence == 2 else 0) + off
        return self.pos

    def write(self, buf, off=0, n=-1):
        if n < 0:
            n = len(buf)
        o = _STATE + self.pos
        self.b[o:o + n] = buf[off:off + n]
        self.pos += n
        return n

    def readinto(self, buf, n=-1):
        o = _STATE + self.pos
        n = min(len(buf) if n < 0 else n, len(self.b) - o)
        buf[:n] = self.b[o:o + n]
        self.pos += n
        return n

    def close(self):
        pass


class _Burst:
    """The stream the core writes to while a cycle starts: what it writes is
    gathered and leaves in one write."""

    def __init__(self, sock):
        self.sock = sock
        self.b = bytearray()

    def write(self, b, o, n):
        self.b += memoryview(b)[o:o + n]
        return n

    def close(self):
        self.sock.close()

    def send(self):
        b = self.b
        o = 0
        while o < len(b):
            o += self.sock.write(b, o, len(b) - o)


class Wake(Telemetry):
    """telem.Telemetry's arguments (the session resumes: clean=False; 5.0
    sessions get a session expiry) plus store, a Store: its outbox keeps
    the messages until acknowledged, its state the packet-id counter and the
    remembered limits. `user`: an int of the application's kept with them
    (a reading's sequence number, say). `known`: limits are remembered (the
    server's Maximum QoS, Retain Available, Maximum Packet Size go in the
    core's state; its Receive Maximum, capped at the slots, in `rq`: the
    core's quota is 0 until a CONNACK)."""

    def __init__(self, *a, store=None, **kw):
        kw.setdefault("clean", False)
        if store is None:
            store = Store()
        self.store = store
        kw["outbox"] = Outbox(store, len(store.b) - _STATE)
        Telemetry.__init__(self, *a, **kw)
        a = self.state
        self.went = bytearray(len(a[_ORD]))  # 1: the slot's flow went before the CONNACK
        self.parked = 0  # flows refused for a quota we overran: they go next connection
        s = store.b
        self.known = False
        self.user = 0
        self.rq = 0
        if s[0] == _MAGIC and s[15] == sum(s[:15]) & 0xFF:
            self.known = bool(s[1] & 1)
            a[_MQOS] = s[1] >> 2 & 3
            a[_RET] = 1 if s[1] & 2 else 0
            self.rq = min(len(a[_ORD]), s[2] << 8 | s[3])
            a[_PID] = s[4] << 8 | s[5]
            a[_SMAX] = int.from_bytes(s[6:10], "big")
            self.user = int.from_bytes(s[10:14], "big")

    def save(self):
        """Keep the packet-id counter, the limits (once a CONNACK gave them)
        and `user` in the store."""
        s = self.store.b
        a = self.state
        s[0] = _MAGIC
        s[1] = (1 if self.known else 0) | (2 if a[_RET] else 0) | a[_MQOS] << 2
        s[2] = self.rq >> 8
        s[3] = self.rq & 0xFF
        s[4] = a[_PID] >> 8
        s[5] = a[_PID] & 0xFF
        s[6:10] = a[_SMAX].to_bytes(4, "big")
        s[10:14] = (self.user & 0xFFFFFFFF).to_bytes(4, "big")
        s[14] = 0
        s[15] = sum(s[:15]) & 0xFF
        self.store.flush()

    def cycle(self, msgs=(), deadline_ms=5000):
        """One wake: msgs are (topic, payload, qos[, retain[, props]]) tuples
        (QoS 1/2 ones are stored first, so nothing is lost if the cycle is
        cut). Returns [(packet id, reason)] for each flow that ended (reason
        0 or a 5.0 success code: delivered; >= 0x80 refused by the server;
        lite.SESSION_LOST). What was not acknowledged by the deadline stays
        stored for the next wake. `ids`: the new messages' packet ids
        (outbox.STORED when one waits in the outbox for a slot)."""
        t0 = ticks_ms()
        ended = []
        self.on_done = lambda p, r: ended.append((p, r))
        self.ids = []
        q0 = []
        for m in msgs:
            if m[2]:
                self.ids.append(core.publish(self, *m))
            else:
                q0.append(m)
        a = self.state
        a[_TMO] = deadline_ms
        try:
            self.connect(False)  # CONNECT and (limits known) the table; the CONNACK
            self.known = True
            self.rq = a[_QUOTA]
            self.save()  # the limits it gave
            for m in q0:  # QoS 0: no ack to wait for, they go once the CONNACK came
                core.publish(self, *m)
            while a[_N] > self.parked:
                left = deadline_ms - ticks_diff(ticks_ms(), t0)
                if left <= 0:
                    break
                self.poll(left)
            self.disconnect()
        except (OSError, ServerError, MQTTError):
            self.close()  # a retry next wake; nothing stored is lost
        self.save()
        return ended

    def send(self, t, n, reason=0, buf=None):
        """The core's send(); the CONNECT (lconn.start() sends it) goes with,
        when limits are remembered, the stored and new QoS 1/2 messages right
        behind it, in one write."""
        a = self.state
        if buf is not a[_HELLO]:
            return core.send(self, t, n, reason, buf)
        s = self.sock
        w = self.sock = _Burst(s)  # (gathers: its write never fails)
        core.send(self, t, n, reason, buf)
        self.parked = 0
        for i in range(len(self.went)):
            self.went[i] = 0
        if self.known:
            a[_EARLY] = self._early()
        self.sock = s
        w.send()

    def _early(self):
        """Send the table in order (PUBREL for QoS 2 flows past PUBREC,
        PUBLISH with DUP=1 for those sent before) within the remembered
        limits: Receive Maximum [MQTT-4.9.0-2], Maximum QoS [MQTT-3.2.2-11],
        Retain Available [MQTT-3.2.2-14], Maximum Packet Size
        [MQTT-3.2.2-15]; the first that does not fit waits for the CONNACK,
        and so does every later one (order [MQTT-4.6.0-2]). Returns how many
        flows went."""
        a = self.state
        b = self.buf
        d = a[_ORD]
        k = 0
        while k < a[_N]:
            i = d[k]
            s = i * a[_STRIDE]  # the slot: state, image start, size (2), packet id (2)
            if b[s] == _COMP:
                core.send(self, 0x62, b[s + 4] << 8 | b[s + 5])  # PUBREL
            else:
                o = s + b[s + 1]
                f = b[o]
                if (k >= self.rq or f >> 1 & 3 > a[_MQOS] or f & 1 and not a[_RET]
                        or (b[s + 2] << 8 | b[s + 3]) > a[_SMAX]):
                    break
                if a[_AL] and a[_AL].update(i):
                    continue  # dropped (expired): the next one moved up
                o = s + b[s + 1]  # (update() may have rewritten the image)
                b[s] = _REC if b[o] & 4 else _ACK
                try:
                    core.send(self, o, b[s + 2] << 8 | b[s + 3], 0, b)
                finally:
                    b[o] |= 8  # any later sending is a resend [MQTT-3.3.1-1]
                self.went[i] = 1
            k += 1
        return k

    def done(self, i, reason):
        """A flow ended (lite.core.done), except one that went before the
        CONNACK and was refused for the server's quota (0x97: its Receive
        Maximum dropped below the one remembered): that one stays stored
        and goes again on the next connection, as the server did not take
        it. It stays off this connection (no resend before a reconnect
        [MQTT-4.4.0-1])."""
        if reason == 0x97 and self.went[i]:
            self.went[i] = 0
            self.parked += 1
            return
        core.done(self, i, reason)
