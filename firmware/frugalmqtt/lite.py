# frugalmqtt.lite: the publish-only profile, a blocking driver over the core
# (core.py) for telemetry devices that never subscribe: MQTT 3.1.1 and 5.0,
# QoS 0/1/2, retain, PUBLISH properties (built once with liteprops.props()),
# TLS, will, keep-alive, Receive Maximum, the CONNACK limits, and a fixed
# in-flight table that survives reconnects: unacknowledged messages are
# resent with DUP=1 (or PUBREL), in their original order. What it leaves
# out: subscriptions and message delivery, topic aliases, per-message expiry
# countdown, enhanced auth. publish() and the ack path allocate nothing on
# MicroPython. This module adds the waiting and the framing; the socket is
# opened by conn.py, loaded for each connect.
import errno
from .core import Core, SESSION_LOST, ticks_ms, ticks_diff
# (8 globals: a dict so small is scanned in a few probes even when full,
# tests/test_dict_room.py)


class Publisher(Core):
    """A publish-only MQTT client. slots: QoS 1/2 messages in flight (each
    keeps its encoded PUBLISH, max_packet bytes, for a resend); rx_size: the
    largest packet accepted from the server (advertised on 5.0)."""

    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 max_packet=256, slots=4, rx_size=64, timeout_ms=10000, tx_size=0, props=b"",
                 clock=ticks_ms):
        Core.__init__(self, client_id, version, user, password, keepalive, clean, session_expiry,
                      will, max_packet, slots, rx_size, clock, tx_size, props)
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        if ssl is True or type(ssl) is dict:  # umqtt's ssl_params: frugalmqtt.tls verifies
            from .tls import context
            ssl = context(ssl)
        self.ssl = ssl
        self.timeout = timeout_ms
        self.poller = None

    def connect(self, clean=None, sock=None, timeout_ms=0):
        """Open the connection, then resend the table: returns session present.
        Raises ServerError when refused, OSError on network trouble. sock: an
        open stream to use instead of a new TCP/TLS socket (a test peer).
        timeout_ms: this attempt's bound, connect to CONNACK (0: the client's)."""
        from . import conn  # dropped again at the CONNACK
        return conn.connect(self, clean, sock, timeout_ms)

    # ---- publish ------------------------------------------------------------

    _room = True  # publish() waits in room() when every slot is taken

    def room(self, timeout_ms):
        """publish() found every slot taken: wait up to timeout_ms (-1:
        forever) for an ack; OSError(ETIMEDOUT) if none came."""
        if not self.poll(timeout_ms) and timeout_ms >= 0:
            raise OSError(errno.ETIMEDOUT)  # in-flight window full
        return True

    def flush(self, timeout_ms=-1):
        """Wait until every QoS 1/2 flow is acknowledged; False on timeout."""
        t0 = ticks_ms()
        while self.n:
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if timeout_ms >= 0 and left <= 0:
                return False
            self.poll(left)
        return True

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
            if not got:  # (draining what came, t 0: keep-alive waits for the next call)
                w = Core.tick(self)
                if w >= 0 and (t < 0 or w < t):
                    t = w
            if not self._wait(t):
                if t == timeout_ms:
                    return got
                if timeout_ms > 0:
                    timeout_ms -= t
                continue
            self.packet(self._read())
            got = True
            timeout_ms = 0

    def _wait(self, ms):
        """True when the server sent something within ms (-1: no limit)."""
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
        """Frame one packet: first byte in self.first, body in rx; returns its length."""
        r = self.rx
        Publisher._fill(self, 0, 2)
        self.first = r[0]
        rl = 0
        s = 0
        while r[1] & 0x80:
            rl |= (r[1] & 0x7F) << s
            s += 7
            if s == 28:
                raise self._fail(0x81)  # a Variable Byte Integer has 4 bytes at most
            Publisher._fill(self, 1, 2)
        rl |= r[1] << s
        if rl + 2 + s // 7 > len(r):
            return self.oversize(rl)
        Publisher._fill(self, 0, rl)
        return rl

    def oversize(self, rl):
        """A packet of rl body bytes, over rx, its fixed header read: returns
        the length to hand packet() (the full client drains it, the umqtt
        facade reads it into a buffer of its own). Here: over our Maximum
        Packet Size (all of it counts, the fixed header too), refused before
        any of it is read [MQTT-3.1.2-24] (5.0: 0x95)."""
        raise self._fail(0x95)
