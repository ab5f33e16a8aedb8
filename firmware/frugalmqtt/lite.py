# frugalmqtt.lite: the publish-only profile. One module (plus err.py) for
# telemetry devices that never subscribe: MQTT 3.1.1 and 5.0, QoS 0/1/2,
# retain, PUBLISH properties (built once with props()), TLS, will, keep-alive,
# Receive Maximum, the CONNACK limits, and a fixed in-flight table that
# survives reconnects: unacknowledged messages are resent with DUP=1 (or
# PUBREL), in their original order. What it leaves out: subscriptions and
# message delivery, topic aliases, per-message expiry countdown, enhanced auth.
# publish() and the ack path allocate nothing on MicroPython.
#
# Written for RAM: on the device every function, name and string constant
# of this module is held in the heap, so helpers are few and the errors the
# server causes carry only their reason code (MQTTError.reason; the spec id
# beside each check says which rule) and the network ones an errno.
import socket
import select
import errno
from sys import implementation
from .err import MQTTError, ServerError

try:
    from micropython import const
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython
    from ._cpython import const, ticks_ms, ticks_diff

_HEAD = const(5)  # bytes kept free before each image for its fixed header
# slot states
_FREE = const(0)
_ACK = const(1)  # QoS 1 PUBLISH sent, waiting for PUBACK
_REC = const(2)  # QoS 2 PUBLISH sent, waiting for PUBREC
_COMP = const(3)  # PUBREL sent, waiting for PUBCOMP
_HOLD = const(4)  # not sent on this connection yet (over the server's quota)
SESSION_LOST = const(-3)  # on_done reason: server lost a QoS 2 flow past PUBREC
# The size of each CONNACK property's value, by id from 0x11 to 0x2A: a 1, 2
# or 4 byte integer, 5 a string or binary data, 6 a string pair, 0 none.
_KINDS = b"45205500050500502201164111"


def _field(b, pid, s):
    """Append property id pid (unless < 0) and s as a two-byte-length string."""
    if pid >= 0:
        b.append(pid)
    if isinstance(s, str):
        s = s.encode()
    if len(s) > 65535:
        raise ValueError("string over 65535 bytes")  # [MQTT-1.5.4-1]
    b += len(s).to_bytes(2, "big") + s


class Publisher:
    """A publish-only MQTT client. slots: QoS 1/2 messages in flight (each
    keeps its encoded PUBLISH, max_packet bytes, for a resend); rx_size: the
    largest packet accepted from the server (advertised on 5.0)."""

    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 max_packet=256, slots=4, rx_size=64, timeout_ms=10000):
        if version != 4 and version != 5:
            raise ValueError("version: 4 (3.1.1) or 5")
        if slots < 1 or max_packet < 16 or rx_size < 8:
            raise ValueError("slots >= 1, max_packet >= 16, rx_size >= 8")
        if version == 4 and (not client_id and not clean or password is not None and user is None):
            # [MQTT-3.1.3-7] [MQTT-3.1.2-22]
            raise ValueError("3.1.1: a persistent session needs a client id, a password a user")
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.v = version
        self.keepalive = keepalive
        self.ssl = ssl
        self.clean = clean
        self.timeout = timeout_ms
        # The CONNECT body (variable header and payload), built once; connect()
        # sets the Clean Start bit. 5.0: we take no packet larger than rx
        # [MQTT-3.1.2-24], acks without reason strings [MQTT-3.1.2-29], and a
        # persistent session needs a session expiry [MQTT-3.1.2-23].
        b = bytearray(b"\x00\x04MQTT")
        w = will
        b.append(version)
        b.append((4 | w[2] << 3 | (32 if w[3] else 0) if w else 0) |
                 (128 if user is not None else 0) | (64 if password is not None else 0))
        b += keepalive.to_bytes(2, "big")
        if version == 5:
            if session_expiry is None and not clean:
                session_expiry = 0xFFFFFFFF
            p = b"\x27" + rx_size.to_bytes(4, "big") + b"\x17\x00"
            if session_expiry:
                p += b"\x11" + session_expiry.to_bytes(4, "big")
            b.append(len(p))
            b += p
        _field(b, -1, client_id)
        if w:
            if version == 5:
                b.append(0)  # no will properties
            _field(b, -1, w[0])
            _field(b, -1, w[1])
        for s in (user, password):
            if s is not None:
                _field(b, -1, s)
        if len(b) + _HEAD > max_packet:
            raise ValueError("packet larger than max_packet")
        self.hello = b
        # slot images: img[i] holds slot i's PUBLISH, img[slots] is the buffer
        # for QoS 0, CONNECT and acks
        self.img = []
        for _ in range(slots + 1):
            self.img.append(bytearray(max_packet))
        self.start = bytearray(slots)  # where each image begins (< _HEAD)
        self.size = [0] * slots  # image length
        self.pid = [0] * slots
        self.state = bytearray(slots)
        self.order = bytearray(slots)  # slot numbers, oldest flow first
        self.n = 0  # flows in the table
        self.slots = slots
        self.last_pid = 0
        self.rx = bytearray(rx_size)
        self.sock = None
        self.on_done = None  # on_done(pid, reason) when a QoS 1/2 flow ends
        self.quota = slots  # until a CONNACK says otherwise
        self.server_max = 268435460
        self.max_qos = 2
        self.retain_ok = True
        self.topic = None  # the last topic, validated (str/bytes are immutable)
        self.tn = 0  # its UTF-8 length

    # ---- connection ---------------------------------------------------------

    def connect(self, clean=None, sock=None):
        """Open the connection, then resend the table: returns session present.
        Raises ServerError when refused, OSError on network trouble. sock: an
        open stream to use instead of a new TCP/TLS socket (a test peer)."""
        if clean is None:
            clean = self.clean
        self.close()
        try:
            if sock is None:
                ai = socket.getaddrinfo(self.server, self.port, 0, socket.SOCK_STREAM)[0][-1]
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self.sock = sock  # closed below on failure
                sock.settimeout(self.timeout / 1000)
                sock.connect(ai)
                try:  # every packet leaves in one write: Nagle must not hold it
                    sock.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY (no names on the unix port)
                except OSError:
                    pass  # a port without TCP_NODELAY
                if self.ssl:
                    sock = self.ssl.wrap_socket(sock, server_hostname=self.server)
                self.poller = select.poll()
                self.poller.register(sock, select.POLLIN)
                if implementation.name != "micropython":
                    from ._cpython import Stream
                    sock = self.poller = Stream(sock, self.poller)
            self.sock = sock
            b = self.img[-1]
            n = len(self.hello)
            b[_HEAD:_HEAD + n] = self.hello
            b[_HEAD + 7] = b[_HEAD + 7] & 0xFD | (2 if clean else 0)
            s = self._seal(b, _HEAD + n, 0x10)
            self._send(b, s, _HEAD + n - s)
            # CONNACK
            if not self._wait(self.timeout):
                raise OSError(errno.ETIMEDOUT)
            rl = self._read()
            r = self.rx
            if self.first != 0x20:
                raise self._fail(0x82)  # [MQTT-3.2.0-1]
            if rl < 2 or self.v == 4 and rl != 2 or r[0] & 0xFE:
                raise self._fail(0x81)  # [MQTT-3.2.2-1]
            sp = r[0] & 1
            self.quota = self.slots
            self.server_max = 268435460
            self.max_qos = 2
            self.retain_ok = True
            self.ka_ms = self.keepalive * 1000
            if self.v == 5:
                self._props(2, rl)
            if r[1]:
                raise ServerError(r[1])  # refused: CONNACK reason / return code
            if sp and clean:
                raise self._fail(0x82)  # session present after clean start [MQTT-3.2.2-4]
            self.ping_out = False
            # Resend the table in order [MQTT-4.4.0-1], a PUBLISH sent before
            # with DUP=1 [MQTT-3.3.1-1]. Without a session they go again as new
            # messages, and a QoS 2 flow past PUBREC ends as SESSION_LOST
            # [MQTT-3.2.2-5]. PUBLISHes beyond the server's quota wait [MQTT-4.9.0-2].
            k = 0
            while k < self.n:
                i = self.order[k]
                if self.state[i] == _COMP and not sp:
                    self._free(i, SESSION_LOST)
                    continue
                k += 1
            for k in range(self.n):
                i = self.order[k]
                if self.state[i] == _COMP:
                    self._ack(0x62, self.pid[i])  # PUBREL again
                else:
                    if not sp:
                        self.img[i][self.start[i]] &= 0xF7  # a new message again
                    self.state[i] = _HOLD
                    if k < self.quota:
                        self._go(i)
            return bool(sp)
        except BaseException:
            self.close()
            raise

    def disconnect(self, reason=0):
        """Send DISCONNECT and close; the in-flight table is kept."""
        if self.sock:
            b = self.img[-1]
            b[0] = 0xE0
            b[1] = 1 if self.v == 5 and reason else 0
            b[2] = reason
            try:
                self._send(b, 0, 2 + b[1])
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
            raise OSError(errno.ENOTCONN)
        if qos < 0 or qos > self.max_qos:
            raise ValueError("QoS above the server's maximum")  # [MQTT-3.2.2-11]
        if retain and not self.retain_ok:
            raise ValueError("server has no retain")  # [MQTT-3.2.2-14]
        if topic is not self.topic or type(topic) is bytearray:
            n = 0
            for c in topic:
                if type(c) is str:
                    c = ord(c)
                    n += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
                else:
                    n += 1
                # [MQTT-3.3.2-2] [MQTT-1.5.4-2]
                if c == 0x23 or c == 0x2B or not c:
                    n = 0
                    break
            if not n:  # [MQTT-4.7.3-1]
                raise ValueError("topic: empty, a wildcard or U+0000")
            if type(topic) is not str:
                bytes(topic).decode()  # UnicodeError (a ValueError) unless UTF-8 [MQTT-1.5.4-1]
            self.tn = n
            self.topic = topic
        if qos:
            while self.n >= self.quota or self.n >= self.slots:
                if not self.poll(timeout_ms) and timeout_ms >= 0:
                    raise OSError(errno.ETIMEDOUT)  # in-flight window full
            i = 0
            while self.state[i]:
                i += 1
            b = self.img[i]
        else:
            b = self.img[-1]
        # The body goes after _HEAD spare bytes; _seal puts the fixed header
        # right before it once the length is known.
        n = self.tn
        b[_HEAD] = n >> 8
        b[_HEAD + 1] = n & 0xFF
        try:
            if type(topic) is str:
                o = self._text(b, _HEAD + 2, topic)
            else:  # bytes: copied inline, the common case kept fast
                o = _HEAD + 2 + n
                b[_HEAD + 2:o] = topic
            pid = 0
            if qos:
                # a non-zero id no flow in the table uses [MQTT-2.2.1-3]; ends
                # since the table holds fewer flows than there are ids
                while True:
                    pid = self.last_pid % 65535 + 1
                    self.last_pid = pid
                    for k in range(self.n):
                        if self.pid[self.order[k]] == pid:
                            break
                    else:
                        break
                b[o] = pid >> 8
                b[o + 1] = pid & 0xFF
                o += 2
            if self.v == 5:
                if props:
                    o = self._text(b, o, props)
                else:
                    b[o] = 0
                    o += 1
            if type(payload) is str:
                o = self._text(b, o, payload)
            else:
                n = len(payload)
                if o + n > len(b):
                    raise IndexError
                b[o:o + n] = payload
                o += n
        except IndexError:
            raise ValueError("packet larger than max_packet")
        n = o - _HEAD
        if n < 128:  # the fixed header inline: the common case kept fast
            s = _HEAD - 2
            b[s] = 0x30 | qos << 1 | (1 if retain else 0)
            b[_HEAD - 1] = n
        else:
            s = self._seal(b, o, 0x30 | qos << 1 | (1 if retain else 0))
        if o - s > self.server_max:
            raise ValueError("PUBLISH over the server's Maximum Packet Size")  # [MQTT-3.2.2-15]
        if not qos:
            self._send(b, s, o - s)
            return 0
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

    def _text(self, b, o, s):
        """Copy s to b[o:] and return the end; a str is UTF-8 encoded by hand
        (no allocation). IndexError when it does not fit."""
        if type(s) is not str:
            n = len(s)
            if o + n > len(b):
                raise IndexError
            b[o:o + n] = s
            return o + n
        for ch in s:
            c = ord(ch)
            if c < 0x80:
                b[o] = c
                o += 1
                continue
            k = 1 if c < 0x800 else 2 if c < 0x10000 else 3
            b[o] = (0xF0, 0xC0, 0xE0, 0xF0)[k] | c >> 6 * k
            o += 1
            while k:
                k -= 1
                b[o] = 0x80 | c >> 6 * k & 0x3F
                o += 1
        return o

    def _seal(self, b, end, first):
        """Put the fixed header before the body b[_HEAD:end]; returns where the
        packet starts."""
        n = end - _HEAD
        s = _HEAD - (2 if n < 128 else 3 if n < 16384 else 4)
        b[s] = first
        o = s + 1
        while n > 127:
            b[o] = n & 0x7F | 0x80
            n >>= 7
            o += 1
        b[o] = n
        return s

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
            raise OSError(errno.ENOTCONN)
        got = False
        while True:
            t = timeout_ms
            ka = self.ka_ms
            if ka:
                w = ka - ticks_diff(ticks_ms(), self.ping_t if self.ping_out else self.last_tx)
                if w <= 0:
                    if self.ping_out:
                        self.close()
                        raise OSError(errno.ETIMEDOUT)  # no PINGRESP: a half-open link
                    self._ack(0xC0, 0)  # PINGREQ
                    self.ping_out = True
                    self.ping_t = self.last_tx
                    w = ka
                if t < 0 or w < t:
                    t = w
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
        for _ in self.poller.ipoll(ms):
            return True
        return False

    def _fill(self, k, n):
        """Read rx[k:n] (blocking, up to the socket's timeout)."""
        while k < n:
            # a memoryview only for a packet split across reads
            got = self.sock.readinto(memoryview(self.rx)[k:n] if k else self.rx, n - k)
            if not got:
                self.close()
                raise OSError(errno.ECONNRESET)  # the server closed the connection
            k += got

    def _read(self):
        """One packet: first byte in self.first, body in rx; returns its length."""
        r = self.rx
        self._fill(0, 2)
        self.first = r[0]
        rl = 0
        s = 0
        while r[1] & 0x80:
            rl |= (r[1] & 0x7F) << s
            s += 7
            if s == 28:
                raise self._fail(0x81)  # a Variable Byte Integer has 4 bytes at most
            self._fill(1, 2)
        rl |= r[1] << s
        if rl > len(r):
            # refused before any of it is read [MQTT-3.1.2-24] (5.0: 0x95)
            raise self._fail(0x95)
        self._fill(0, rl)
        return rl

    def _handle(self):
        rl = self._read()
        first = self.first
        r = self.rx
        t = first >> 4
        if t == 3:
            # A PUBLISH from a session that subscribed earlier: lite delivers
            # nothing, but acknowledges it as the flow requires [MQTT-4.5.0-2].
            qos = first >> 1 & 3
            o = 2 + (r[0] << 8 | r[1])
            # [MQTT-3.3.1-4] [MQTT-3.3.1-2]
            if qos == 3 or first & 8 and not qos or o + (2 if qos else 0) > rl:
                raise self._fail(0x81)
            if qos:
                self._ack(0x30 + (qos << 4), r[o] << 8 | r[o + 1])  # PUBACK / PUBREC
            return
        if first & 0x0F != (2 if t == 6 else 0):
            raise self._fail(0x81)  # [MQTT-2.1.3-1]
        if t == 13:  # PINGRESP
            self.ping_out = False
            return
        if t == 14 and self.v == 5:  # server DISCONNECT [MQTT-4.13.2-1]
            self.close()
            raise ServerError(r[0] if rl else 0)
        if t < 4 or t > 7:
            raise self._fail(0x82)  # a packet a publisher never receives
        if rl < 2 or self.v == 4 and rl != 2:
            raise self._fail(0x81)
        p = r[0] << 8 | r[1]
        code = r[2] if rl > 2 else 0
        # PUBACK/PUBREC [MQTT-3.4.2-1] [MQTT-3.5.2-1], PUBREL/PUBCOMP [MQTT-3.7.2-1]
        for c in b"\x00\x92" if t > 5 else b"\x00\x10\x80\x83\x87\x90\x91\x97\x99":
            if c == code:
                break
        else:
            raise self._fail(0x81)
        if rl > 3:
            self._props(3, rl)
        if t == 6:  # PUBREL for a message from an old session: complete it
            return self._ack(0x70, p)  # [MQTT-4.3.3-11]
        for k in range(self.n):
            i = self.order[k]
            if self.pid[i] == p:
                break
        else:
            if t == 5:
                self._ack(0x62, p, 0x92)  # unknown id: PUBREL 0x92
            return
        st = self.state[i]
        if t == 4 and st == _ACK or t == 7 and st == _COMP or t == 5 and st == _REC and code >= 0x80:
            # [MQTT-4.3.2-3] [MQTT-4.3.3-5]; a PUBREC error ends the flow, no resend [MQTT-4.4.0-2]
            self._free(i, code)
            for k in range(self.n):  # a slot of the quota came free: the oldest held PUBLISH goes
                i = self.order[k]
                if self.state[i] == _HOLD:
                    return self._go(i)
        elif t == 5 and _REC <= st <= _COMP:  # PUBREC, maybe repeated
            self.state[i] = _COMP  # never resend the PUBLISH [MQTT-4.3.3-6]
            self._ack(0x62, p)  # [MQTT-4.3.3-4]

    def _props(self, o, rl):
        """Walk the property block at rx[o:rl]. From a CONNACK (o == 2) keep
        the limits that bind us; an ack (o == 3) may carry only a reason
        string and user properties."""
        r = self.rx
        connack = o == 2
        end = 0
        s = 0
        while True:  # the block's length, a Variable Byte Integer
            if o >= rl or s == 28:
                raise self._fail(0x81)
            c = r[o]
            o += 1
            end |= (c & 0x7F) << s
            s += 7
            if c < 128:
                break
        if end + o != rl:
            raise self._fail(0x81)
        while o < rl:
            p = r[o]
            o += 1
            k = _KINDS[p - 0x11] - 48 if 0x11 <= p <= 0x2A else 0
            if not k or not connack and p != 0x1F and p != 0x26:
                raise self._fail(0x81)  # unknown id, or not one for this packet (5.0 2.2.2.2)
            v = 0
            if k < 5:
                if o + k > rl:
                    raise self._fail(0x81)
                while k:
                    v = v << 8 | r[o]
                    o += 1
                    k -= 1
            else:
                for _ in range(k - 4):  # one string, or two
                    if o + 2 > rl:
                        raise self._fail(0x81)
                    o += 2 + (r[o] << 8 | r[o + 1])
                if o > rl:
                    raise self._fail(0x81)
            if p == 0x21:
                if not v:
                    raise self._fail(0x82)  # Receive Maximum 0 (5.0 3.2.2.3.3)
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
        """A two-byte-header packet: PINGREQ, PUBACK/PUBREC/PUBREL/PUBCOMP."""
        b = self.img[-1]
        b[0] = first
        n = 0 if first == 0xC0 else 3 if reason and self.v == 5 else 2
        b[1] = n
        b[2] = pid >> 8
        b[3] = pid & 0xFF
        b[4] = reason
        self._send(b, 0, 2 + n)

    def _send(self, b, o, n):
        s = self.sock
        if s is None:
            raise OSError(errno.ENOTCONN)
        try:
            n += o
            while o < n:
                o += s.write(b, o, n - o)
        except OSError:
            self.close()
            raise
        self.last_tx = ticks_ms()

    def _fail(self, reason):
        """A protocol error from the server: DISCONNECT with the reason on 5.0
        [U-4.13.1-a], close (3.1.1 just closes [MQTT-4.8.0-1]); returns the
        MQTTError to raise."""
        if self.v == 5:
            self.disconnect(reason)
        else:
            self.close()
        return MQTTError(reason)
