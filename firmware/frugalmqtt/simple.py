# A facade with micropython-lib's umqtt.simple API over the blocking client:
# an umqtt program switches by changing its import line
#     from umqtt.simple import MQTTClient   ->   from frugalmqtt.simple import MQTTClient
# MQTT 3.1.1 by default, like umqtt (version=5 is accepted as an extra keyword).
#
# Where it differs from umqtt.simple, on purpose:
# - QoS 2 works both ways (umqtt asserts); publish() at QoS 1/2 returns once
#   the flow is complete (PUBACK / PUBCOMP).
# - Keep-alive runs itself: with keepalive > 0, check_msg()/wait_msg() send
#   PINGREQ when due and raise OSError when the server stops answering.
# - Received messages are acknowledged by the session before the callback
#   runs; the callback runs outside the packet handling, so it may publish
#   (at any QoS) or subscribe.
# - Errors: a closed or broken connection raises OSError (OSError(-1) when the
#   server closed it, as umqtt); a refused CONNECT or SUBSCRIBE and a protocol
#   violation by the server raise MQTTException(code).
# Topic and message in the callback are bytes copies (this API allocates per
# message; client.MQTTClient does not).
import sys

from .client import MQTTClient as _Client
from .core import MQTTError, ServerError

_PUBLISH = 3
_PINGRESP = 13
_PINGREQ = b"\xc0\x00"


class MQTTException(Exception):
    """umqtt.simple's exception: args[0] is the MQTT return/reason code."""


class _LegacySSL:
    """ssl=True with ssl_params (older umqtt.simple): wrap like ssl.wrap_socket."""

    def __init__(self, params):
        self.params = params

    def wrap_socket(self, sock, server_hostname=None):
        import ssl
        p = dict(self.params)
        if sys.implementation.name == "micropython":
            p.setdefault("server_hostname", server_hostname)
            return ssl.wrap_socket(sock, **p)
        # CPython has no ssl.wrap_socket: an equivalent client context
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        req = p.get("cert_reqs", ssl.CERT_NONE)
        ctx.check_hostname = req == ssl.CERT_REQUIRED
        ctx.verify_mode = req
        ca = p.get("cadata")
        if ca or p.get("ca_certs"):
            ctx.load_verify_locations(cafile=p.get("ca_certs"), cadata=ca)
        if p.get("cert") or p.get("certfile"):
            ctx.load_cert_chain(p.get("certfile"), p.get("keyfile"))
        return ctx.wrap_socket(sock, server_hostname=p.get("server_hostname", server_hostname))


class MQTTClient:
    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0,
                 ssl=None, ssl_params={}, version=4, **sizes):
        if ssl and not hasattr(ssl, "wrap_socket"):
            ssl = _LegacySSL(ssl_params)
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
        self._q = []  # (topic, msg) received, for the callback
        self._done = {}  # packet id -> reason of QoS 1/2 flows ended

    @property
    def sock(self):
        """The connection's socket (close() drops it without DISCONNECT), None
        before connect()."""
        return self._c.sock if self._c else None

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
            c = self._c = _Client(self.client_id, self.server, self.port, self.version, self.user,
                                  self.pswd, self.keepalive, self.ssl, clean_session,
                                  will=will, reconnect=False, **self.sizes)
            c.on_message = self._on_message
            c.on_done = self._on_done
            self._made = made
        if timeout is not None:
            c.timeout = int(timeout * 1000)
        self._q = []
        self._done = {}
        return 1 if self._call(c.connect, clean_session) else 0

    def disconnect(self):
        if self._c:
            self._c.disconnect()

    def ping(self):
        """Send PINGREQ; wait_msg()/check_msg() take the PINGRESP."""
        self._live()
        self._c._send(_PINGREQ, 0, 2)

    def publish(self, topic, msg, retain=False, qos=0):
        self._live()
        c = self._c
        if type(msg) is str:
            msg = msg.encode()
        pid = self._call(c.publish, topic, msg, qos, retain)
        if not c.connected:  # the write failed
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
        """Wait for one packet from the server and handle it; messages go to
        the callback. Returns its type as umqtt does (0x30 for PUBLISH, 0x90
        SUBACK, ...), None for PINGRESP."""
        while True:
            t = self._step(-1)
            if t:
                return None if t == _PINGRESP else t << 4

    def check_msg(self):
        """wait_msg() without waiting: None when nothing has arrived."""
        t = self._step(0)
        return None if not t or t == _PINGRESP else t << 4

    # ---- internals ---------------------------------------------------------------

    def _on_message(self, msg):
        self._q.append((bytes(msg.topic), bytes(msg.payload)))

    def _on_done(self, pid, reason):
        self._done[pid] = reason

    def _live(self):
        if not self._c or not self._c.connected:
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
        that came with CONNACK or SUBACK), then the callbacks."""
        self._live()
        q = self._q
        queued = len(q)
        t = self._call(self._c.poll, 0 if queued else timeout_ms)
        if queued and not t:
            t = _PUBLISH
        while q:
            topic, msg = q.pop(0)
            if self.cb:
                self.cb(topic, msg)
        return t
