# A facade with micropython-lib's umqtt.simple API over the blocking client:
# an umqtt program switches by changing its import line
#     from umqtt.simple import MQTTClient   ->   from frugalmqtt.simple import MQTTClient
# MQTT 3.1.1 by default, like umqtt (version=5 is accepted as an extra keyword).
#
# What umqtt.simple takes with its defaults, this takes with its defaults:
# - A message too big for the client's buffers (a QoS 0 PUBLISH over tx_size,
#   a QoS 1/2 one over slot_size) is written from the caller's buffer, as
#   umqtt writes it, and publish() waits for its acknowledgement. Such a
#   message is not kept for a resend: when the link fails first, publish()
#   raises OSError (as umqtt does) and the program publishes it again.
# - An inbound PUBLISH bigger than the receive buffer (max_packet) is read
#   into a buffer allocated for it alone (3.1.1; on 5.0 the server is told
#   our Maximum Packet Size and does not send one). Only that case allocates.
# Return values are umqtt's: connect() 0/1 (session present), wait_msg() and
# check_msg() the first byte of the packet handled (0x32 for a QoS 1
# PUBLISH), None for PINGRESP or nothing; publish(), subscribe() None.
# `sock` is the connection's socket (the TLS socket with ssl).
#
# Where it differs from umqtt.simple, on purpose:
# - QoS 2 works both ways (umqtt asserts); publish() at QoS 1/2 returns once
#   the flow is complete (PUBACK / PUBCOMP).
# - Keep-alive runs itself: with keepalive > 0, check_msg()/wait_msg() send
#   PINGREQ when due and raise OSError when the server stops answering.
# - Received messages are acknowledged by the session before the callback
#   runs; the callback runs outside the packet handling, so it may publish
#   (at any QoS) or subscribe.
# - ssl=True verifies the server: ssl_params must hold the CA (cadata, DER or
#   PEM, or cafile); frugalmqtt.tls builds the context (docs/tls.md).
# - Errors: a closed or broken connection raises OSError (OSError(-1) when the
#   server closed it, as umqtt); a refused CONNECT or SUBSCRIBE and a protocol
#   violation by the server raise MQTTException(code).
# Topic and message in the callback are bytes copies (this API allocates per
# message; client.MQTTClient does not).
from .client import MQTTClient as _Client, _fill
from .lite import MQTTError, ServerError, text as utf8, why as _why


try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_PINGRESP = const(0xD0)
_PINGREQ = b"\xc0\x00"
# lite.py's state[...] indices and slot layout (read from state: the
# client's settings attributes are made when read, lite.Publisher.__getattr__)
_QUOTA = const(1)
_RX = const(4)
_SMAX = const(6)
_MQOS = const(7)
_RET = const(8)
_V = const(10)
_TMO = const(12)
_T = const(14)
_STRIDE = const(16)
_TXO = const(17)
_CLOCK = const(28)
_M = const(6)


class MQTTException(Exception):
    """umqtt.simple's exception: args[0] is the MQTT return/reason code."""


class _Link(_Client):
    """The client under the facade, with umqtt's two ways past its buffers:
    an inbound PUBLISH bigger than data gets a buffer of its own, and the acks
    of the message written from the caller's buffer (`own`) end here."""

    own = 0  # packet id of the message written from the caller's buffer
    own_reason = 0  # ... its PUBACK/PUBCOMP (or failed PUBREC) reason, once own is 0
    small = None  # data while a big PUBLISH is in a buffer of its own

    def oversize(self, rl):
        # lite refuses a packet over data; a 3.1.1 PUBLISH is read instead
        # (lite's framing: its first byte still in data[0])
        if self.state[_V] == 5 or self.data[0] >> 4 != 3:
            raise MQTTError(0x95)  # over our Maximum Packet Size [MQTT-3.1.2-24]
        self.small = self.data
        self.data = bytearray(rl)  # the facade's one allocation past its buffers
        _fill(self, self.data, 0, rl)
        return rl

    def input(self, rl):
        try:
            a = self.state
            t = a[_T] >> 4
            r = self.data
            if self.own and a[_QUOTA] and (t == 4 or t == 5 or t == 7) and rl >= 2 and \
                    r[0] << 8 | r[1] == self.own:
                a[_RX] = a[_CLOCK]()
                code = r[2] if rl > 2 else 0
                if t == 5 and code < 0x80:
                    return self.send(0x62, self.own)  # PUBREL [MQTT-4.3.3-4]
                self.own = 0
                self.own_reason = code
                return
            _Client.input(self, rl)
        finally:
            if self.small:
                self.data = self.small
                self.small = None


class MQTTClient:
    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0,
                 ssl=None, ssl_params={}, version=4, **sizes):
        if ssl is True:  # a context that verifies the server, from ssl_params
            from .tls import context
            ssl = context(ssl_params)
        elif not ssl:
            ssl = None
        self.client_id = client_id
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.user = user
        self.pswd = password
        self.keepalive = keepalive
        self.ssl = ssl
        self.cb = None
        self.lw_topic = None
        self.lw_msg = None
        self.lw_qos = 0
        self.lw_retain = False
        self.version = version
        self.sizes = sizes
        self._c = None  # the client, made by connect() with the settings then
        self._made = None  # ... and those settings
        self._q = []  # (topic, msg, first byte) received, for the callback
        self._done = {}  # packet id -> reason of QoS 1/2 flows ended

    @property
    def sock(self):
        """The connection's socket (close() drops it without DISCONNECT), None
        before connect()."""
        s = self._c.sock if self._c else None
        return getattr(s, "sock", s)  # CPython: the socket inside time.Stream

    def set_callback(self, f):
        self.cb = f

    def set_last_will(self, topic, msg, retain=False, qos=0):
        if not 0 <= qos <= 2:
            raise ValueError("will QoS must be 0, 1 or 2")
        if not topic:
            raise ValueError("will topic must not be empty")
        self.lw_topic = topic
        self.lw_msg = msg
        self.lw_qos = qos
        self.lw_retain = retain

    def connect(self, clean_session=True, timeout=None):
        """Connect; returns 1 when the server resumed the session, else 0."""
        will = None
        if self.lw_topic:
            m = self.lw_msg
            will = (self.lw_topic, m.encode() if type(m) is str else m, self.lw_qos,
                    self.lw_retain)
        # The CONNECT is built with the client: a new one when what it carries
        # changed (a kept session needs an expiry on 5.0 [MQTT-3.1.2-23]).
        made = (self.keepalive, will, self.version == 5 and clean_session)
        c = self._c
        if c is None or made != self._made:
            if c:
                c.close()
            c = self._c = _Link(self.client_id, self.server, self.port, self.version, self.user,
                                self.pswd, self.keepalive, self.ssl, clean_session,
                                will=will, reconnect=False, **self.sizes)
            c.on_message = self._on_message
            c.on_done = self._on_done
            self._made = made
        if timeout is not None:
            c.state[_TMO] = int(timeout * 1000)
        c.own = 0
        self._done = {}
        return 1 if self._call(c.connect, clean_session) else 0

    def disconnect(self):
        if self._c:
            self._c.disconnect()

    def ping(self):
        """Send PINGREQ; wait_msg()/check_msg() take the PINGRESP."""
        self._live()
        self._c.send(0, 2, 0, _PINGREQ)

    def publish(self, topic, msg, retain=False, qos=0):
        self._live()
        c = self._c
        if type(msg) is str:
            msg = msg.encode()
        if type(topic) is str:
            topic = topic.encode()
        # the PUBLISH in the client's buffer: header, topic, packet id, 5.0
        # property length, payload [MQTT-3.3.2-1] [MQTT-3.3.2-2]
        a = c.state
        n = 7 + len(topic) + (2 if qos else 0) + (1 if a[_V] == 5 else 0) + len(msg)
        if n > (a[_STRIDE] if qos else len(c.buf) - a[_TXO]) - _M:  # the slot's, the buffer's
            return self._publish_own(topic, msg, qos, retain)
        pid = self._call(c.publish, topic, msg, qos, retain)
        if c.sock is None:  # the write failed
            c.close()
            raise OSError(-1)
        if qos:
            done = self._done
            while pid not in done:  # (a callback may publish meanwhile)
                self._step(-1)
            reason = done.pop(pid)
            if reason >= 0x80:  # refused (5.0)
                raise MQTTException(reason)

    def subscribe(self, topic, qos=0):
        if self.cb is None:
            raise ValueError("Subscribe callback is not set")
        self._live()
        code = self._call(self._c.subscribe, topic, qos)
        if code >= 0x80:
            raise MQTTException(code)

    def unsubscribe(self, topic):
        self._live()
        self._call(self._c.unsubscribe, topic)

    def wait_msg(self):
        """Wait for a packet from the server and handle it; messages go to
        the callback. Returns its first byte as umqtt does (0x30 | QoS << 1
        | retain for a PUBLISH, 0x90 SUBACK, ...), None for PINGRESP."""
        while True:
            f = self._step(-1)
            if f:
                return None if f == _PINGRESP else f

    def check_msg(self):
        """wait_msg() without waiting: None when nothing has arrived."""
        f = self._step(0)
        return None if f == _PINGRESP else f or None

    # ---- internals ---------------------------------------------------------------

    def _publish_own(self, topic, msg, qos, retain):
        """A PUBLISH too big for the client's buffers, written as umqtt writes
        it: a header made here, then the caller's msg; QoS 1/2 wait for the
        flow's end. Not stored: a broken link raises OSError. The core's
        encoder copies every payload into a slot, for a resend; this one
        writes from the caller's buffer, so it is the facade's own. Its
        checks are the core's, in the core's words (lite.why)."""
        c = self._c
        a = c.state
        if not topic or b"#" in topic or b"+" in topic or not utf8(topic, 0, len(topic)):
            # [MQTT-4.7.3-1] [MQTT-3.3.2-2] [MQTT-1.5.4-1] [MQTT-1.5.4-2]
            raise _why("topic", len(topic))
        if qos < 0 or qos > a[_MQOS]:
            raise _why("qos", qos, a[_MQOS])  # [MQTT-3.2.2-11]
        if retain and not a[_RET]:
            raise _why("retain")  # [MQTT-3.2.2-14]
        n = 2 + len(topic) + (2 if qos else 0) + (1 if a[_V] == 5 else 0) + len(msg)
        h = bytearray()
        h.append(0x30 | qos << 1 | (1 if retain else 0))
        k = n
        while k > 127:  # the remaining length, a Variable Byte Integer
            h.append(k & 0x7F | 0x80)
            k >>= 7
        h.append(k)
        if len(h) + n > a[_SMAX]:
            raise _why("max_packet", len(h) + n, a[_SMAX])  # [MQTT-3.2.2-15]
        h += len(topic).to_bytes(2, "big") + topic
        pid = 0
        if qos:
            pid = c.pid()
            h += pid.to_bytes(2, "big")
        if a[_V] == 5:
            h.append(0)  # no properties
        c.own_reason = 0
        try:
            c.send(0, len(h), 0, h)
            c.own = pid
            c.send(0, len(msg), 0, msg)
        except OSError:
            raise OSError(-1)
        while c.own:  # (a callback may publish meanwhile)
            self._step(-1)
        if pid and c.own_reason >= 0x80:  # refused (5.0)
            raise MQTTException(c.own_reason)

    def _on_message(self, msg):
        self._q.append((bytes(msg.topic), bytes(msg.payload), self._c.state[_T]))

    def _on_done(self, pid, reason):
        self._done[pid] = reason

    def _live(self):
        if not self._c or self._c.sock is None:
            raise OSError(-1)

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except EOFError:
            raise OSError(-1)
        except (ServerError, MQTTError) as e:
            raise MQTTException(e.args[0])

    def _step(self, timeout_ms):
        """One poll (not waiting when messages are already queued, e.g. those
        that came with CONNACK or SUBACK), then the callbacks. Returns the
        first byte of the last message delivered, else of the last packet
        handled (0: none)."""
        self._live()
        q = self._q
        c = self._c
        try:
            f = c.state[_T] if self._call(c.poll, 0 if q else timeout_ms) else 0
        finally:
            # the messages read before a lost link too, then its OSError:
            # acknowledged, they come from nobody again (umqtt.simple hands
            # each message over as it reads it)
            while q:
                topic, msg, f = q.pop(0)
                if self.cb:
                    self.cb(topic, msg)
        return f
