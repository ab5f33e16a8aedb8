# The blocking client: the core with receiving (recv.Receiver) and outbound
# aliases (alias.Aliases), over lite's blocking driver (socket, framing,
# waiting), plus reconnect with bounded exponential backoff, subscriptions
# made again after a reconnect that found no session, and helpers that wait.
from .core import Core, FULL, MQTTError, ServerError, ticks_ms, ticks_diff
from .recv import Receiver
from .alias import Aliases
from .lite import Publisher

try:
    from time import sleep_ms
except ImportError:  # CPython
    from time import sleep as _sleep

    def sleep_ms(ms):
        _sleep(ms / 1000)

WINDOW_FULL = FULL  # publish(): no slot freed in time


def Will(topic, payload, qos=0, retain=False, props=None):
    """The will message for will=: props from props.build(..., props.WILL)."""
    return (topic, payload, qos, retain, props)


class MQTTClient(Receiver, Aliases, Publisher):
    """An MQTT 3.1.1 (version=4) or 5.0 (version=5) client.

    Sizes, all allocated here, once: max_packet, the largest packet we take
    (our Maximum Packet Size); tx_size, the buffer for QoS 0 PUBLISH and
    control packets; slots QoS 1/2 messages in flight of up to slot_size
    bytes each; inbound QoS 2 messages received and not yet released (our
    Receive Maximum); aliases_out topics we may alias; aliases_in aliases
    the server may set (our Topic Alias Maximum) of up to alias_topic_max
    bytes. `ssl`: an SSLContext (MicroPython `ssl`/`tls` or CPython `ssl`)
    set up with the CA to verify against. connect_props: props.build(..., 1)
    bytes (or (id, value) pairs) for the CONNECT.

    Callbacks: on_message(msg) with a reused recv.Message; on_done(pid,
    reason) when a QoS 1/2 flow ends (reason < 0x80: the server has it).
    An exception one raises comes out of the call that was waiting
    (poll(), publish(), subscribe() ...) once its packet is handled; with
    callback_errors = "log" its traceback is printed and the client goes on.

    `outbox` (an outbox.Outbox) persists QoS 1/2 messages and QoS 2 state in
    a file: reloaded here, resumed on connect; publish() then stores QoS 1/2
    messages while disconnected without waiting for the link.
    """

    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 connect_props=None, reconnect=True, backoff_ms=(250, 30000),
                 timeout_ms=10000, clock=ticks_ms, outbox=None, max_packet=1024, tx_size=512,
                 slots=8, slot_size=256, inbound=8, aliases_out=8, aliases_in=4,
                 alias_topic_max=64):
        self.rinit(inbound, aliases_in, alias_topic_max)
        p = b""
        if version == 5:
            p = self.rprops()
            if connect_props:
                if type(connect_props) is not bytes:
                    from .props import build
                    connect_props = build(connect_props, 1)
                p += connect_props
        Publisher.__init__(self, client_id, server, port, version, user, password, keepalive,
                           ssl, clean, session_expiry, will, slot_size, slots, max_packet,
                           timeout_ms, tx_size, p, clock)
        if version == 5:
            self.ainit(aliases_out)
        self.reconnect = reconnect
        self.backoff_min, self.backoff_max = backoff_ms
        self.connects = 0  # successful connects so far
        self.last_error = None  # why the last (re)connect attempt failed
        self.in_callback = False  # inside on_message: never wait for the network
        self.subscriptions = []  # (filter, options, props) to make again after a reconnect
        if outbox:
            outbox.attach(self)  # reloads what the last run left unacknowledged

    def connect(self, clean=None):
        """Open the connection and wait for CONNACK. Returns session present
        (True when the server resumed our session). Raises ServerError when
        refused, OSError on network trouble."""
        if clean is not None:
            self.clean = clean
        sp = Publisher.connect(self, clean)
        self.connects += 1
        return sp

    def ensure_connected(self):
        """Reconnect with bounded exponential backoff until connected (when
        reconnect=True). Stored QoS 1/2 messages are resent by the session."""
        delay = self.backoff_min
        err = None  # an exception a callback raised meanwhile: raised once done
        while not self.up:
            try:
                if not self.connect():  # no session: subscribe again
                    for f, opts, props in self.subscriptions:
                        try:
                            self._sub(((f, opts),), props, False, self.timeout)
                        except Exception as e:
                            if e is not self._cbe:
                                raise
                            err = err or e
                break
            except (OSError, MQTTError, ServerError) as e:
                if not self.reconnect or e is self._cbe:
                    raise
                self.last_error = e
            sleep_ms(delay)
            delay = min(delay * 2, self.backoff_max)
        if err:
            raise err

    # ---- the loop -----------------------------------------------------------

    def poll(self, timeout_ms=0):
        """Handle what the server sent (waiting up to timeout_ms for the first
        packet) and keep-alive. Returns the type of the last packet handled, or
        0. A broken link raises unless reconnect=True (then it reconnects)."""
        try:
            return self.first >> 4 if Publisher.poll(self, timeout_ms) else 0
        except (OSError, MQTTError, ServerError) as e:
            if e is self._cbe:
                raise  # a callback's: the link is fine
            self.close()
            if not self.reconnect:
                raise
            self.ensure_connected()
            return 0

    def wait_msg(self, timeout_ms=-1):
        """Block until a packet arrives (or timeout): poll(timeout_ms)."""
        return self.poll(timeout_ms)

    def inbound(self, t, n):
        if t == 3:
            self.in_callback = True
        try:
            Receiver.inbound(self, t, n)
        finally:
            self.in_callback = False

    # ---- publishing -----------------------------------------------------------

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """Publish; returns the packet id (0 for QoS 0). When every slot is
        taken, waits for acknowledgements (up to timeout_ms, -1: forever) and
        returns WINDOW_FULL if none came (at once inside on_message, where
        waiting would overwrite the message being handled). props:
        props.build() bytes (or (id, value) pairs, built on each call)."""
        if props and type(props) is not bytes:
            from .props import build
            props = build(props)
        if not qos and not self.up:
            self.ensure_connected()
        t0 = ticks_ms()
        while True:
            pid = Core.publish(self, topic, payload, qos, retain, props)
            if pid != FULL:
                if qos and not self.up and self.reconnect and not self.in_callback and not self.ob:
                    # stored: it goes after the CONNACK (with an outbox it waits
                    # in the file, and publishing goes on while offline)
                    self.ensure_connected()
                return pid
            if self.in_callback or timeout_ms >= 0 and ticks_diff(ticks_ms(), t0) >= timeout_ms:
                return pid
            self.poll(100)

    def flush(self, timeout_ms=-1):
        """Wait until every stored QoS 1/2 message is acknowledged; True if so."""
        t0 = ticks_ms()
        while self.n:
            if timeout_ms >= 0 and ticks_diff(ticks_ms(), t0) >= timeout_ms:
                return False
            self.poll(100)
        return True

    # ---- subscriptions --------------------------------------------------------

    def subscribe(self, topic, qos=0, options=0, props=None, timeout_ms=-1):
        """Subscribe to one filter and wait for SUBACK; returns its reason code
        (the granted QoS, or >= 0x80 when refused). The subscription is made
        again after a reconnect that found no session on the server."""
        code = self._sub(((topic, qos | options),), props, False, timeout_ms)
        if code < 0x80:
            self._forget(topic)
            self.subscriptions.append((topic, qos | options, props))
        return code

    def unsubscribe(self, topic, props=None, timeout_ms=-1):
        self._forget(topic)
        return self._sub((topic,), props, True, timeout_ms)

    def _forget(self, topic):
        for i in range(len(self.subscriptions)):
            if self.subscriptions[i][0] == topic:
                del self.subscriptions[i]
                return

    def _sub(self, items, props, unsub, timeout_ms):
        if props and type(props) is not bytes:
            from .props import build
            props = build(props, 10 if unsub else 8)
        if not self.up:
            self.ensure_connected()
        while True:
            pid = Receiver.subscribe(self, items, props, unsub)
            if pid != FULL:
                break
            self.poll(100)
        t0 = ticks_ms()
        while self.suback_pid != pid:
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if timeout_ms >= 0 and left <= 0:
                raise OSError("no SUBACK")
            self.poll(left if left >= 0 else 1000)
        return self.suback_code
