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
from .core import Core, MQTTError, ServerError, ticks_ms, ticks_diff
from .outbox import Outbox
from .telem import Telemetry

try:
    from micropython import const
except ImportError:  # CPython
    from ._cpython import const

_STATE = const(16)  # bytes of wake state before the outbox's file
_MAGIC = const(0xF7)
_COMP = const(3)  # core._COMP: PUBREL sent, waiting for PUBCOMP


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
    (a reading's sequence number, say)."""

    def __init__(self, *a, store=None, **kw):
        kw.setdefault("clean", False)
        if store is None:
            store = Store()
        self.store = store
        kw["outbox"] = Outbox(store, len(store.b) - _STATE)
        Telemetry.__init__(self, *a, **kw)
        self.went = bytearray(self.slots)  # 1: the slot's flow went before the CONNACK
        self.parked = 0  # flows refused for a quota we overran: they go next connection
        s = store.b
        self.known = False
        self.user = 0
        if s[0] == _MAGIC and s[15] == sum(s[:15]) & 0xFF:
            self.known = bool(s[1] & 1)
            self.max_qos = s[1] >> 2 & 3
            self.retain_ok = bool(s[1] & 2)
            self.quota = min(self.slots, s[2] << 8 | s[3])
            self.last_pid = s[4] << 8 | s[5]
            self.server_max = int.from_bytes(s[6:10], "big")
            self.user = int.from_bytes(s[10:14], "big")

    def save(self):
        """Keep the packet-id counter, the limits (once a CONNACK gave them)
        and `user` in the store."""
        s = self.store.b
        s[0] = _MAGIC
        s[1] = (1 if self.known else 0) | (2 if self.retain_ok else 0) | self.max_qos << 2
        s[2] = self.quota >> 8
        s[3] = self.quota & 0xFF
        s[4] = self.last_pid >> 8
        s[5] = self.last_pid & 0xFF
        s[6:10] = self.server_max.to_bytes(4, "big")
        s[10:14] = (self.user & 0xFFFFFFFF).to_bytes(4, "big")
        s[14] = 0
        s[15] = sum(s[:15]) & 0xFF
        self.store.flush()

    def cycle(self, msgs=(), deadline_ms=5000):
        """One wake: msgs are (topic, payload, qos[, retain[, props]]) tuples
        (QoS 1/2 ones are stored first, so nothing is lost if the cycle is
        cut). Returns [(packet id, reason)] for each flow that ended (reason
        0 or a 5.0 success code: delivered; >= 0x80 refused by the server;
        core.SESSION_LOST). What was not acknowledged by the deadline stays
        stored for the next wake. `ids`: the new messages' packet ids
        (outbox.STORED when one waits in the outbox for a slot)."""
        t0 = ticks_ms()
        ended = []
        self.on_done = lambda p, r: ended.append((p, r))
        self.ids = []
        q0 = []
        for m in msgs:
            if m[2]:
                self.ids.append(Core.publish(self, *m))
            else:
                q0.append(m)
        self.timeout = deadline_ms
        try:
            self.connect(False)  # CONNECT and (limits known) the table; the CONNACK
            self.known = True
            self.save()  # the limits it gave
            for m in q0:  # QoS 0: no ack to wait for, they go once the CONNACK came
                Core.publish(self, *m)
            while self.n > self.parked:
                left = deadline_ms - ticks_diff(ticks_ms(), t0)
                if left <= 0:
                    break
                self.poll(left)
            self.disconnect()
        except (OSError, ServerError, MQTTError):
            self.close()  # a retry next wake; nothing stored is lost
        self.save()
        return ended

    def begin(self, sock, clean):
        """Send CONNECT; with limits remembered, the stored and new QoS 1/2
        messages right behind it, in one write."""
        w = _Burst(sock)
        Core.begin(self, w, clean)
        self.parked = 0
        for i in range(self.slots):
            self.went[i] = 0
        if self.known:
            self.early = self._early()
        w.send()
        self.sock = sock

    def _early(self):
        """Send the table in order (PUBREL for QoS 2 flows past PUBREC,
        PUBLISH with DUP=1 for those sent before) within the remembered
        limits: Receive Maximum [MQTT-4.9.0-2], Maximum QoS [MQTT-3.2.2-11],
        Retain Available [MQTT-3.2.2-14], Maximum Packet Size
        [MQTT-3.2.2-15]; the first that does not fit waits for the CONNACK,
        and so does every later one (order [MQTT-4.6.0-2]). Returns how many
        flows went."""
        k = 0
        while k < self.n:
            i = self.order[k]
            if self.state[i] == _COMP:
                self._ack(0x62, self.pid[i])
            else:
                f = self.img[i][self.start[i]]
                if (k >= self.quota or f >> 1 & 3 > self.max_qos or f & 1 and not self.retain_ok
                        or self.size[i] > self.server_max):
                    break
                if self.prepare(i):
                    continue  # dropped (expired): the next one moved up
                self._go(i)
                self.went[i] = 1
            k += 1
        return k

    def _free(self, i, reason):
        """A flow ended (core.Core._free), except one that went before the
        CONNACK and was refused for the server's quota (0x97: its Receive
        Maximum dropped below the one remembered): that one stays stored
        and goes again on the next connection, as the server did not take
        it. It stays off this connection (no resend before a reconnect
        [MQTT-4.4.0-1])."""
        if reason == 0x97 and self.went[i]:
            self.went[i] = 0
            self.parked += 1
            return
        Core._free(self, i, reason)
