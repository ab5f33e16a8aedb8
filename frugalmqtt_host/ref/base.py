# What the blocking client (client.py) and the asyncio client (aclient.py)
# share: their configuration, the Session with its callbacks, opening a
# network connection with CONNECT, and dropping it. Waiting (blocking or
# async) stays in each client.
from .session import Session
from .transport import Transport
from .codec import MQTTError


class ClientBase:
    """Configuration and Session of one client; see client.MQTTClient for the
    arguments. Session sizing keywords go to Session, which allocates all
    buffers here, once."""

    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 connect_props=None, reconnect=True, backoff_ms=(250, 30000),
                 timeout_ms=10000, clock=None, outbox=None, **sizes):
        self.server = server
        self.port = port or (8883 if ssl else 1883)
        self.user = user
        self.password = password
        self.keepalive = keepalive
        self.ssl = ssl
        self.clean = clean
        # A session that outlives the connection needs a session expiry on 5.0
        # (0 would end it on disconnect) [MQTT-3.1.2-23].
        if session_expiry is None and not clean and version >= 5:
            session_expiry = 0xFFFFFFFF
        self.session_expiry = session_expiry
        self.will = will
        self.connect_props = connect_props
        self.reconnect = reconnect
        self.backoff_min, self.backoff_max = backoff_ms
        self.timeout_ms = timeout_ms
        self.sock = None
        self.connects = 0  # successful connects so far
        self.last_error = None  # why the last (re)connect attempt failed
        if clock is not None:
            sizes["clock"] = clock
        self.s = Session(client_id, self._write, version, **sizes)
        if outbox:
            outbox.attach(self.s)  # reloads what the last run left unacknowledged
        self.on_message = None
        self.on_done = None
        self.in_callback = False  # inside on_message: never wait for the network
        self.subscriptions = []  # (filter, options, props) to restore after a reconnect
        self.s.on_message = self._on_message
        self.s.on_done = self._on_done
        self.s.on_suback = self._on_suback
        self.suback_pid = 0  # last SUBACK/UNSUBACK seen
        self.suback_code = 0

    # ---- callbacks pass through (settable after construction) -------------

    def _on_message(self, msg):
        if self.on_message:
            self.in_callback = True
            try:
                self.on_message(msg)
            finally:
                self.in_callback = False

    def _on_done(self, pid, reason):
        if self.on_done:
            self.on_done(pid, reason)

    def _on_suback(self, pkt):
        self.suback_pid = pkt.pid
        self.suback_code = pkt.buf[pkt.data] if pkt.data_len else 0

    def _write(self, buf, off, n):
        if self.sock is None:
            raise OSError("no connection")
        self.sock.write(buf, off, n)

    def ack(self, pid):
        """With `client.s.manual_ack = True`, QoS 1 messages are acknowledged
        only by this call (e.g. after they are written); see Session.ack."""
        self.s.ack(pid)

    # ---- connection -------------------------------------------------------

    @property
    def connected(self):
        return self.s.connected

    def _open(self):
        """Open a network connection (blocking, up to timeout_ms) and send
        CONNECT with the client's `clean` flag; the caller waits for CONNACK.
        With clean=True a reconnect starts a new session: unacknowledged
        QoS 1/2 messages are then sent again as new messages (none is lost)."""
        self.sock = Transport(self.server, self.port, self.ssl, self.timeout_ms)
        # The session writes to the transport itself, one call less per
        # packet, unless a subclass watches what goes out through _write.
        self.s.write = self.sock.write if type(self)._write is ClientBase._write else self._write
        try:
            self.s.connect(self.keepalive, self.clean, self.connect_props, self.will, self.user,
                           self.password, self.session_expiry)
        except Exception:
            ClientBase.close(self)
            raise

    def _read(self, sock):
        """Read into the session's framer; True when a packet is complete. A
        fixed header the framer refuses (over our Maximum Packet Size, a bad
        remaining length) ends the connection like any protocol error:
        DISCONNECT with its reason code on 5.0, just close on 3.1.1
        [U-4.13.1-a] [MQTT-4.8.0-1]."""
        try:
            return self.s.framer.read_packet(sock)
        except MQTTError as e:
            if self.s.version >= 5:
                self.s.disconnect(e.reason)
            else:
                self.s.lost()
            raise

    def close(self):
        """Close the socket without DISCONNECT (the session is kept)."""
        self.s.lost()
        if self.sock:
            self.sock.close()
            self.sock = None
