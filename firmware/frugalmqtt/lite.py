# frugalmqtt.lite: the publish-only profile. One module (plus err.py) for
# telemetry devices that never subscribe: MQTT 3.1.1 and 5.0, QoS 0/1/2,
# retain, PUBLISH properties (built once with props()), TLS, will, keep-alive,
# Receive Maximum, the CONNACK limits, and a fixed in-flight table that
# survives reconnects: unacknowledged messages are resent with DUP=1 (or
# PUBREL), in their original order. It holds a fraction of the full client's
# RAM; what it leaves out: subscriptions and message delivery, topic aliases,
# per-message expiry countdown, enhanced auth. publish() and the ack path
# allocate nothing on MicroPython.
import socket
import select
import sys
from .err import MQTTError, ServerError

try:
    from micropython import const
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython
    const = lambda x: x
    from time import monotonic

    def ticks_ms():
        return int(monotonic() * 1000)

    def ticks_diff(a, b):
        return a - b

_MP = sys.implementation.name == "micropython"
_HEAD = const(5)  # bytes kept free before each image for its fixed header
# slot states
_FREE = const(0)
_ACK = const(1)  # QoS 1 PUBLISH sent, waiting for PUBACK
_REC = const(2)  # QoS 2 PUBLISH sent, waiting for PUBREC
_COMP = const(3)  # PUBREL sent, waiting for PUBCOMP
_HOLD = const(4)  # not sent on this connection yet (over the server's quota)
SESSION_LOST = const(-3)  # on_done reason: server lost a QoS 2 flow past PUBREC
# allowed reason codes: PUBACK/PUBREC [MQTT-3.4.2-1] [MQTT-3.5.2-1], PUBCOMP [MQTT-3.7.2-1]
_ACK_CODES = b"\x00\x10\x80\x83\x87\x90\x91\x97\x99"
_COMP_CODES = b"\x00\x92"


def props(content_type=None, expiry=None, utf8=False, response_topic=None,
          correlation=None, user=()):
    """MQTT 5 PUBLISH properties for publish(props=...), encoded once.
    user: (name, value) pairs, order kept. Topic Alias and Subscription
    Identifier are not offered: lite sends neither [MQTT-3.3.4-6]."""
    b = bytearray()
    if utf8:
        b += b"\x01\x01"
    if expiry is not None:
        b.append(0x02)
        b += expiry.to_bytes(4, "big")
    if content_type is not None:
        _field(b, 0x03, content_type)
    if response_topic is not None:
        if "+" in response_topic or "#" in response_topic:
            raise ValueError("wildcard in response topic")  # [MQTT-3.3.2-14]
        _field(b, 0x08, response_topic)
    if correlation is not None:
        _field(b, 0x09, correlation)
    for k, v in user:
        _field(b, 0x26, k)
        _field(b, None, v)
    return bytes(b)


def _field(b, pid, s):
    if pid is not None:
        b.append(pid)
    if isinstance(s, str):
        s = s.encode()
    if len(s) > 65535:
        raise ValueError("string longer than 65535 bytes")  # [MQTT-1.5.4-1]
    b += len(s).to_bytes(2, "big")
    b += s


def _has(table, c):
    for x in table:  # `int in bytes` is not supported on MicroPython
        if x == c:
            return True
    return False


class Publisher:
    """A publish-only MQTT client. slots: QoS 1/2 messages in flight (each
    keeps its encoded PUBLISH, max_packet bytes, for a resend); rx_size: the
    largest packet accepted from the server (advertised on 5.0)."""

    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 max_packet=256, slots=4, rx_size=64, timeout_ms=10000):
        if version != 4 and version != 5:
            raise ValueError("version must be 4 (3.1.1) or 5")
        if slots < 1 or max_packet < 16 or rx_size < 8:
            raise ValueError("slots >= 1, max_packet >= 16, rx_size >= 8")
        if not client_id and not clean and version == 4:
            raise ValueError("3.1.1 persistent session needs a client id")  # [MQTT-3.1.3-7]
        if password is not None and user is None and version == 4:
            raise ValueError("3.1.1 password needs a user name")  # [MQTT-3.1.2-22]
        self.id = client_id
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.v = version
        self.user = user
        self.password = password
        self.keepalive = keepalive
        self.ssl = ssl
        self.clean = clean
        if session_expiry is None and not clean:
            session_expiry = 0xFFFFFFFF  # keep the session across connections [MQTT-3.1.2-23]
        self.expiry = session_expiry
        self.will = will
        self.timeout = timeout_ms
        self.tx = bytearray(max_packet)
        self.img = [bytearray(max_packet) for _ in range(slots)]
        self.start = bytearray(slots)  # where each image begins (< _HEAD)
        self.size = [0] * slots  # image length
        self.pid = [0] * slots
        self.state = bytearray(slots)
        self.order = bytearray(slots)  # slot numbers, oldest flow first
        self.n = 0  # flows in the table
        self.last_pid = 0
        self.rx = bytearray(rx_size)
        self.rmv = memoryview(self.rx)
        self.sock = None
        self.poller = None
        self.on_done = None  # on_done(pid, reason) when a QoS 1/2 flow ends
        self.quota = slots  # until a CONNACK says otherwise
        self.server_max = 268435460
        self.max_qos = 2
        self.retain_ok = True
        self._topic = None  # the last topic, validated (str/bytes are immutable)
        self._tn = 0

    # ---- connection ---------------------------------------------------------

    def connect(self, clean=None, sock=None):
        """Open the connection and resume: returns session present. Raises
        ServerError when refused, OSError on network trouble. sock: an open
        stream to use instead of a new TCP/TLS socket (a test peer)."""
        if clean is None:
            clean = self.clean
        self.close()
        try:
            if sock is None:
                sock = self._open()
            self.sock = sock
            self._send(self.tx, 0, self._connect_packet(clean))
            return self._connack(clean)
        except BaseException:
            self.close()
            raise

    def _open(self):
        ai = socket.getaddrinfo(self.server, self.port, 0, socket.SOCK_STREAM)[0][-1]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock = s  # closed by connect() on failure
        s.settimeout(self.timeout / 1000)
        s.connect(ai)
        try:  # every packet leaves in one write: Nagle must not hold it
            s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY (no names on the unix port)
        except OSError:
            pass  # a port without TCP_NODELAY
        if self.ssl:
            s = self.ssl.wrap_socket(s, server_hostname=self.server)
        self.poller = select.poll()
        self.poller.register(s, select.POLLIN)
        return s

    def _connect_packet(self, clean):
        v5 = self.v == 5
        w = self.will
        b = bytearray(b"\x00\x04MQTT")
        b.append(self.v)
        f = 2 if clean else 0
        if w:
            f |= 4 | (w[2] << 3) | (32 if w[3] else 0)
        if self.user is not None:
            f |= 128
        if self.password is not None:
            f |= 64
        b.append(f)
        b += self.keepalive.to_bytes(2, "big")
        if v5:
            # Maximum Packet Size: the server sends nothing larger [MQTT-3.1.2-24];
            # Request Problem Information 0 keeps the acks short [MQTT-3.1.2-29]
            p = b"\x27" + len(self.rx).to_bytes(4, "big") + b"\x17\x00"
            if self.expiry:
                p += b"\x11" + self.expiry.to_bytes(4, "big")
            b.append(len(p))
            b += p
        _field(b, None, self.id)
        if w:
            if v5:
                b.append(0)  # no will properties
            _field(b, None, w[0])
            _field(b, None, w[1])
        if self.user is not None:
            _field(b, None, self.user)
        if self.password is not None:
            _field(b, None, self.password)
        return self._frame(0x10, b)

    def _frame(self, first, body):
        """Put first byte, remaining length and body into tx; return the size."""
        t = self.tx
        n = len(body)
        if n + 5 > len(t):
            raise ValueError("CONNECT larger than max_packet")
        t[0] = first
        o = 1
        while True:
            t[o] = (n & 0x7F) | (0x80 if n > 127 else 0)
            o += 1
            n >>= 7
            if not n:
                break
        t[o:o + len(body)] = body
        return o + len(body)

    def _connack(self, clean):
        if not self._wait(self.timeout):
            raise OSError("no CONNACK")
        rl = self._read()
        if self.first != 0x20:
            raise self._fail(0x82, "expected CONNACK")  # [MQTT-3.2.0-1]
        r = self.rx
        if rl < 2 or (self.v == 4 and rl != 2):
            raise self._fail(0x81, "bad CONNACK length")
        if r[0] & 0xFE:
            raise self._fail(0x81, "CONNACK reserved flags")  # [MQTT-3.2.2-1]
        sp = r[0] & 1
        self.quota = len(self.order)
        self.server_max = 268435460
        self.max_qos = 2
        self.retain_ok = True
        self.ka_ms = self.keepalive * 1000
        if self.v == 5:
            self._props(2, rl, True)
        if r[1]:
            self.close()
            raise ServerError(r[1])  # refused: CONNACK reason / return code
        if sp and clean:
            raise self._fail(0x82, "session present after clean start")  # [MQTT-3.2.2-4]
        self.last_tx = ticks_ms()
        self.ping_out = False
        self._resume(sp)
        return bool(sp)

    def _props(self, o, rl, connack):
        """Walk a property block at rx[o:], checking it ends at rl; from a
        CONNACK keep the limits that bind us."""
        r = self.rx
        end = self._vbi(o, rl)
        o = self.vo
        if end != rl:
            raise self._fail(0x81, "bad property length")
        while o < end:
            p = r[o]
            o += 1
            v = 0
            if p in (0x24, 0x25, 0x28, 0x29, 0x2A):  # byte
                k = 1
            elif p in (0x13, 0x21, 0x22):  # two byte integer
                k = 2
            elif p in (0x11, 0x27):  # four byte integer
                k = 4
            elif p in (0x12, 0x15, 0x16, 0x1A, 0x1C, 0x1F, 0x26):  # string / binary / pair
                k = 0
            else:
                raise self._fail(0x81, "property not allowed")  # unknown id (5.0 2.2.2.2)
            if not connack and p != 0x1F and p != 0x26:
                raise self._fail(0x81, "property not allowed")  # acks: reason string, user props
            if k:
                if o + k > end:
                    raise self._fail(0x81, "truncated property")
                while k:
                    v = (v << 8) | r[o]
                    o += 1
                    k -= 1
            else:
                for _ in range(2 if p == 0x26 else 1):
                    if o + 2 > end:
                        raise self._fail(0x81, "truncated property")
                    o += 2 + ((r[o] << 8) | r[o + 1])
                if o > end:
                    raise self._fail(0x81, "truncated property")
            if p == 0x21:
                if not v:
                    raise self._fail(0x82, "Receive Maximum 0")  # a Protocol Error (5.0 3.2.2.3.3)
                if v < self.quota:
                    self.quota = v  # [MQTT-3.3.4-7] [MQTT-4.9.0-1]
            elif p == 0x27:
                self.server_max = v  # [MQTT-3.2.2-15]
            elif p == 0x24:
                self.max_qos = v  # [MQTT-3.2.2-11]
            elif p == 0x25:
                self.retain_ok = bool(v)  # [MQTT-3.2.2-14]
            elif p == 0x13:
                self.ka_ms = v * 1000  # Server Keep Alive replaces ours [MQTT-3.2.2-21]

    def _vbi(self, o, end):
        """A Variable Byte Integer at rx[o:end]; sets self.vo past it and
        returns the value plus that offset (a tuple would allocate)."""
        n = 0
        s = 0
        while True:
            if o >= end:
                raise self._fail(0x81, "truncated length")
            c = self.rx[o]
            o += 1
            n |= (c & 0x7F) << s
            if c < 128:
                self.vo = o
                return n + o
            s += 7
            if s == 28:
                raise self._fail(0x81, "length longer than 4 bytes")

    def _resume(self, sp):
        """After CONNACK: resend the table in order [MQTT-4.4.0-1], a PUBLISH
        sent before with DUP=1 [MQTT-3.3.1-1]. Without a session they go again as new
        messages, and a QoS 2 flow past PUBREC ends as SESSION_LOST
        [MQTT-3.2.2-5]. PUBLISHes beyond the server's quota wait [MQTT-4.9.0-2]."""
        k = 0
        while k < self.n:
            i = self.order[k]
            if self.state[i] == _COMP and not sp:
                self._free(i, SESSION_LOST)
            else:
                k += 1
        k = 0
        while k < self.n:
            i = self.order[k]
            if self.state[i] == _COMP:
                self._ack(0x62, self.pid[i])  # PUBREL again
            else:
                if not sp:
                    self.img[i][self.start[i]] &= 0xF7  # a new message again
                self.state[i] = _HOLD
                if k < self.quota:
                    self._go(i)
            k += 1

    def disconnect(self, reason=0):
        """Send DISCONNECT and close; the in-flight table is kept."""
        if self.sock:
            t = self.tx
            t[0] = 0xE0
            t[1] = 1 if self.v == 5 and reason else 0
            t[2] = reason
            try:
                self._send(t, 0, 2 + t[1])
            except OSError:
                pass
        self.close()  # [MQTT-3.14.4-1] [MQTT-3.14.4-2]

    def close(self):
        if self.sock:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None

    @property
    def connected(self):
        return self.sock is not None

    # ---- publish ------------------------------------------------------------

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """Send a PUBLISH; returns the packet id (0 at QoS 0). topic: str or
        bytes; payload: bytes-like or str; props: the bytes props() made (5.0).
        QoS 1/2 wait (up to timeout_ms, -1 forever) for a free slot within
        the server's Receive Maximum; once stored, a message is never lost:
        if the link is down (or fails while sending) it stays in the table
        and goes out after connect(). OSError means it was not stored."""
        if self.sock is None and not qos:
            raise OSError("not connected")
        if qos < 0 or qos > self.max_qos:
            raise ValueError("QoS above the server's maximum")  # [MQTT-3.2.2-11]
        if retain and not self.retain_ok:
            raise ValueError("server has no retain")  # [MQTT-3.2.2-14]
        if topic is not self._topic or type(topic) is bytearray:
            self._tn = self._check_topic(topic)
            self._topic = topic
        if qos:
            while self.n >= self.quota or self.n >= len(self.order):
                if not self.poll(timeout_ms) and timeout_ms >= 0:
                    raise OSError("in-flight window full")
            i = self._slot()
            b = self.img[i]
        else:
            b = self.tx
        # The body goes after _HEAD spare bytes; the fixed header is put
        # right before it once the length is known.
        if _HEAD + 4 + self._tn > len(b):
            raise ValueError("PUBLISH larger than max_packet")
        o = _HEAD + 2
        if type(topic) is str:
            o = self._text(b, o, topic)
        else:
            o += self._tn
            b[_HEAD + 2:o] = topic
        b[_HEAD] = self._tn >> 8
        b[_HEAD + 1] = self._tn & 0xFF
        pid = 0
        if qos:
            pid = self._new_pid()
            b[o] = pid >> 8
            b[o + 1] = pid & 0xFF
            o += 2
        if self.v == 5:
            pn = len(props) if props else 0
            if o + pn + 2 > len(b):
                raise ValueError("PUBLISH larger than max_packet")
            if pn < 128:
                b[o] = pn
                o += 1
            else:
                o = self._vbi_at(b, o, pn)
            if pn:
                b[o:o + pn] = props
                o += pn
        if type(payload) is str:
            o = self._text(b, o, payload)
        else:
            n = len(payload)
            if o + n > len(b):
                raise ValueError("PUBLISH larger than max_packet")
            b[o:o + n] = payload
            o += n
        rl = o - _HEAD
        s = _HEAD - (2 if rl < 128 else 3 if rl < 16384 else 4)
        b[s] = 0x30 | (qos << 1) | (1 if retain else 0)
        if rl < 128:
            b[s + 1] = rl
        else:
            self._vbi_at(b, s + 1, rl)
        if o - s > self.server_max:
            raise ValueError("PUBLISH larger than the server's Maximum Packet Size")  # [MQTT-3.2.2-15]
        if qos:
            self.pid[i] = pid
            self.start[i] = s
            self.size[i] = o - s
            self.state[i] = _HOLD  # unacknowledged [MQTT-4.3.2-1] [MQTT-4.3.3-3]
            self.order[self.n] = i
            self.n += 1
            if self.sock:
                try:
                    self._go(i)
                except OSError:
                    pass  # link closed; the message waits for connect()
            return pid
        self._send(b, s, o - s)
        return 0

    def _check_topic(self, t):
        n = 0
        for c in t:
            if type(c) is str:
                c = ord(c)
                n += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
            else:
                n += 1
            if c == 0x23 or c == 0x2B:
                raise ValueError("wildcard in topic name")  # [MQTT-3.3.2-2]
            if c == 0:
                raise ValueError("U+0000 in topic")  # [MQTT-1.5.4-2]
        if not n:
            raise ValueError("empty topic name")  # [MQTT-4.7.3-1]
        if type(t) is not str:
            bytes(t).decode()  # UnicodeError (a ValueError) unless UTF-8 [MQTT-1.5.4-1]
        return n

    def _text(self, b, o, s):
        """Copy s (str: UTF-8 encoded by hand, no allocation) to b[o:]."""
        if type(s) is not str:
            b[o:o + len(s)] = s
            return o + len(s)
        try:
            for ch in s:
                c = ord(ch)
                if c < 0x80:
                    b[o] = c
                    o += 1
                    continue
                k = 1 if c < 0x800 else 2 if c < 0x10000 else 3
                b[o] = (0xF0, 0xC0, 0xE0, 0xF0)[k] | (c >> (6 * k))
                o += 1
                while k:
                    k -= 1
                    b[o] = 0x80 | ((c >> (6 * k)) & 0x3F)
                    o += 1
        except IndexError:
            raise ValueError("PUBLISH larger than max_packet")
        return o

    def _vbi_at(self, b, o, n):
        while n > 127:
            b[o] = (n & 0x7F) | 0x80
            n >>= 7
            o += 1
        b[o] = n
        return o + 1

    def _slot(self):
        i = 0
        while self.state[i]:
            i += 1
        return i

    def _new_pid(self):
        # a non-zero id no flow in the table uses [MQTT-2.2.1-3]; terminates
        # since the table holds fewer flows than ids
        while True:
            p = self.last_pid % 65535 + 1
            self.last_pid = p
            k = 0
            while k < self.n and self.pid[self.order[k]] != p:
                k += 1
            if k == self.n:
                return p

    def flush(self, timeout_ms=-1):
        """Wait until every QoS 1/2 flow is acknowledged; False on timeout."""
        t0 = ticks_ms()
        while self.n:
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if timeout_ms >= 0 and left <= 0:
                return False
            self.poll(left)
        return True

    def pending(self):
        """QoS 1/2 messages not yet acknowledged."""
        return self.n

    # ---- receive ------------------------------------------------------------

    def poll(self, timeout_ms=0):
        """Handle what the server sent, waiting up to timeout_ms (-1: until a
        packet) for the first packet; send PINGREQ when due. True if a packet
        was handled. Raises OSError when the link is lost (the table is kept)."""
        if self.sock is None:
            raise OSError("not connected")
        got = False
        while True:
            ka = self.ka_ms
            if ka:
                now = ticks_ms()
                if self.ping_out:
                    if ticks_diff(now, self.ping_t) >= ka:
                        self.close()
                        raise OSError("keep-alive timeout")  # half-open link
                elif ticks_diff(now, self.last_tx) >= ka:
                    self._ack(0xC0, -1)  # PINGREQ
                    self.ping_out = True
                    self.ping_t = now
                w = ka - ticks_diff(now, self.ping_t if self.ping_out else self.last_tx)
                if timeout_ms < 0 or w < timeout_ms:
                    t = w
                else:
                    t = timeout_ms
            else:
                t = timeout_ms
            if not self._wait(t):
                if t == timeout_ms:
                    return got
                if timeout_ms > 0:
                    timeout_ms -= t
                continue
            self._handle()
            got = True
            timeout_ms = 0

    def _wait(self, ms):
        s = self.sock
        if not _MP:
            try:
                if s.pending():  # TLS holds decrypted bytes
                    return True
            except AttributeError:
                pass
            return bool(self.poller.poll(ms))
        for _ in self.poller.ipoll(ms):
            return True
        return False

    def _fill(self, n):
        """Read exactly n bytes into rx[0:n] (blocking, up to the timeout)."""
        k = 0
        while k < n:
            if _MP:
                got = self.sock.readinto(self.rmv[k:n] if k else self.rx, n - k)
            else:
                got = self.sock.recv_into(self.rmv[k:n], n - k)
            if not got:
                self.close()
                raise OSError("connection closed")
            k += got

    def _read(self):
        """One packet: first byte in self.first, body in rx; returns its length."""
        self._fill(2)
        self.first = self.rx[0]
        rl = self.rx[1] & 0x7F
        s = 7
        c = self.rx[1]
        while c & 0x80:
            if s == 28:
                raise self._fail(0x81, "length longer than 4 bytes")
            self._fill(1)
            c = self.rx[0]
            rl |= (c & 0x7F) << s
            s += 7
        if rl > len(self.rx):
            # refused before any of it is read [MQTT-3.1.2-24] (5.0: 0x95)
            raise self._fail(0x95, "packet larger than rx_size")
        if rl:
            self._fill(rl)
        return rl

    def _handle(self):
        rl = self._read()
        first = self.first
        r = self.rx
        t = first >> 4
        if t == 3:
            return self._inbound(first, rl)
        if first & 0x0F != (2 if t == 6 else 0):
            raise self._fail(0x81, "reserved flags")  # [MQTT-2.1.3-1]
        if t == 13:  # PINGRESP
            self.ping_out = False
            return
        if t == 14 and self.v == 5:  # server DISCONNECT [MQTT-4.13.2-1]
            self.close()
            raise ServerError(r[0] if rl else 0)
        if t < 4 or t > 7:
            raise self._fail(0x82, "packet a publisher never receives")
        if rl < 2 or (self.v == 4 and rl != 2):
            raise self._fail(0x81, "bad ack length")
        p = (r[0] << 8) | r[1]
        code = r[2] if rl > 2 else 0
        if not _has(_COMP_CODES if t > 5 else _ACK_CODES, code):
            raise self._fail(0x81, "bad reason code")
        if rl > 3:
            self._props(3, rl, False)
        if t == 6:  # PUBREL for a message from an old session: complete it
            return self._ack(0x70, p)  # [MQTT-4.3.3-11]
        k = 0
        while k < self.n:
            i = self.order[k]
            if self.pid[i] == p:
                break
            k += 1
        else:
            if t == 5:
                self._ack(0x62, p, 0x92)  # unknown id: PUBREL 0x92
            return
        st = self.state[i]
        if t == 4 and st == _ACK or t == 7 and st == _COMP:
            self._free(i, code)  # [MQTT-4.3.2-3] [MQTT-4.3.3-5]
            self._pump()
        elif t == 5 and st == _REC:
            if code >= 0x80:
                self._free(i, code)  # ends the flow, no resend [MQTT-4.4.0-2]
                self._pump()
            else:
                self.state[i] = _COMP  # never resend the PUBLISH [MQTT-4.3.3-6]
                self._ack(0x62, p)  # [MQTT-4.3.3-4]
        elif t == 5 and st == _COMP:
            self._ack(0x62, p)  # PUBREC repeated

    def _inbound(self, first, rl):
        """A PUBLISH from a session that subscribed earlier: lite delivers
        nothing, but acknowledges it as the flow requires [MQTT-4.5.0-2]."""
        qos = (first >> 1) & 3
        if qos == 3:
            raise self._fail(0x81, "QoS 3")  # [MQTT-3.3.1-4]
        if first & 8 and not qos:
            raise self._fail(0x81, "DUP on QoS 0")  # [MQTT-3.3.1-2]
        o = 2 + ((self.rx[0] << 8) | self.rx[1])
        if o + (2 if qos else 0) > rl:
            raise self._fail(0x81, "PUBLISH too short")
        if qos:
            self._ack(0x30 + (qos << 4), (self.rx[o] << 8) | self.rx[o + 1])  # PUBACK / PUBREC

    def _free(self, i, reason):
        """A flow ended: drop it from the table and tell the application."""
        self.state[i] = _FREE
        k = 0
        while self.order[k] != i:
            k += 1
        self.n -= 1
        while k < self.n:
            self.order[k] = self.order[k + 1]
            k += 1
        if self.on_done:
            self.on_done(self.pid[i], reason)

    def _pump(self):
        """A slot of the server's quota came free: send the oldest held PUBLISH."""
        k = 0
        while k < self.n:
            i = self.order[k]
            if self.state[i] == _HOLD:
                return self._go(i)
            k += 1

    def _go(self, i):
        """Send slot i's PUBLISH; from then on its image carries DUP=1, as
        any later sending is a resend [MQTT-3.3.1-1]."""
        b = self.img[i]
        o = self.start[i]
        self.state[i] = _REC if b[o] & 4 else _ACK
        try:
            self._send(b, o, self.size[i])
        finally:
            b[o] |= 8  # also when the write failed: part of it may have left

    # ---- send ---------------------------------------------------------------

    def _ack(self, first, pid, reason=0):
        """A two-byte-header packet: PINGREQ (pid -1), PUBACK/PUBREC/PUBREL/PUBCOMP."""
        t = self.tx
        t[0] = first
        if pid < 0:
            t[1] = 0
            return self._send(t, 0, 2)
        n = 3 if reason and self.v == 5 else 2
        t[1] = n
        t[2] = pid >> 8
        t[3] = pid & 0xFF
        t[4] = reason
        self._send(t, 0, 2 + n)

    def _send(self, b, o, n):
        s = self.sock
        if s is None:
            raise OSError("not connected")
        try:
            if _MP:
                end = o + n
                while o < end:
                    o += s.write(b, o, end - o)
            else:
                s.sendall(memoryview(b)[o:o + n])
        except OSError:
            self.close()
            raise
        self.last_tx = ticks_ms()

    def _fail(self, reason, msg):
        """A protocol error from the server: DISCONNECT with the reason on 5.0
        [U-4.13.1-a], close (3.1.1 just closes [MQTT-4.8.0-1]); returns the
        MQTTError to raise."""
        if self.v == 5:
            self.disconnect(reason)
        else:
            self.close()
        return MQTTError(reason, msg)
