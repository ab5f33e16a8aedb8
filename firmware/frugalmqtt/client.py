# The blocking client: the core (lite.core) with receiving (recv.Receiver)
# and outbound aliases (alias.Aliases in state[_AL]), over lite's blocking
# driver (framing, waiting: lite.Publisher.poll()), plus reconnect with
# bounded exponential backoff, subscriptions
# made again after a reconnect that found no session, and helpers that wait
# (each wait bounded by its timeout_ms). A reconnect inside poll() and
# ensure_connected() is a connect attempt that resumes across calls
# (dial.py, imported at the first one).
from .lite import core, Publisher, MQTTError, ServerError, ticks_ms, ticks_diff, why as _why
from .recv import Receiver
from .alias import Aliases

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

# (errnos as consts: the globals dict keeps room, tests/test_dict_room.py)
_ENOTCONN = const(107)
_ETIMEDOUT = const(110)
_ECONNRESET = const(104)
# lite.py's state[...] indices
_QUOTA = const(1)
_V = const(10)
_CLEAN = const(11)
_TMO = const(12)
_PORT = const(13)
_T = const(14)
_SP = const(15)
_OB = const(19)
_OVER = const(25)
_SERVER = const(29)
_SSL = const(30)


try:
    from time import sleep_ms
except ImportError:  # CPython
    from time import sleep as _sleep

    def sleep_ms(ms):
        _sleep(ms / 1000)

WINDOW_FULL = const(-1)  # publish(): no slot freed in time (lite's FULL)


def Will(topic, payload, qos=0, retain=False, props=None):
    """The will message for will=: props from props.build(..., props.WILL)."""
    return (topic, payload, qos, retain, props)


def _fill(c, r, k, n):
    """Read r[k:n] from c's stream (blocking, up to the socket's timeout)."""
    while k < n:
        # a memoryview only for a packet split across reads
        got = c.sock.readinto(memoryview(r)[k:n] if k else r, n - k)
        if not got:
            c.close()
            raise OSError(_ECONNRESET)  # the server closed the connection
        k += got


def _refuse(c, reason):
    """A packet the framing refuses: DISCONNECT with the reason on 5.0
    [U-4.13.1-a], close (3.1.1 just closes [MQTT-4.8.0-1]); MQTTError."""
    if c.state[_V] == 5:
        core.disconnect(c, reason)
    else:
        core.close(c)
    e = MQTTError(reason)
    e.reason = reason
    raise e


def _over(c, rl):
    """state[_OVER]: a packet over max_packet, for lite's framing."""
    return c.oversize(rl)


class MQTTClient(Receiver, Publisher):
    """An MQTT 3.1.1 (version=4) or 5.0 (version=5) client.

    Sizes, all allocated here, once: max_packet, the largest packet we take
    (our Maximum Packet Size); tx_size, the buffer for QoS 0 PUBLISH and
    control packets; slots QoS 1/2 messages in flight of up to slot_size
    bytes each; inbound QoS 2 messages received and not yet released (our
    Receive Maximum); aliases_out topics we may alias; aliases_in aliases
    the server may set (our Topic Alias Maximum) of up to alias_topic_max
    bytes. `ssl`: an SSLContext (MicroPython `ssl`/`tls` or CPython `ssl`)
    set up with the CA to verify against. connect_props: props.build(..., 1)
    bytes (or (id, value) pairs) for the CONNECT; a Receive Maximum,
    Maximum Packet Size, Topic Alias Maximum or Session Expiry Interval
    among them is taken as inbound, max_packet, aliases_in, session_expiry.

    Callbacks: on_message(msg) with a reused recv.Message; on_done(pid,
    reason) when a QoS 1/2 flow ends (reason < 0x80: the server has it);
    on_suback(pid, codes) for each SUBACK/UNSUBACK; on_oversize(topic, size)
    for an inbound PUBLISH over max_packet (see oversize()).
    An exception a callback raises comes out of the call that was waiting
    (poll(), publish(), subscribe() ...) once its packet is handled; with
    callback_errors = "log" its traceback is printed and the client goes on.

    `outbox` (an outbox.Outbox) persists QoS 1/2 messages and QoS 2 state in
    a file: reloaded here, resumed on connect; publish() then stores QoS 1/2
    messages while disconnected without waiting for the link.
    """

    # rarely set: class-level defaults keep the instance map sparse (recv.Receiver)
    last_error = None  # why the last (re)connect attempt failed
    disconnect_reason = None  # the server's last DISCONNECT reason code
    on_oversize = None  # on_oversize(topic, size)
    _dial = None  # the connect attempt under way (dial.Dial): poll() goes on with it


    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 connect_props=None, reconnect=True, backoff_ms=(250, 30000),
                 timeout_ms=10000, clock=ticks_ms, outbox=None, max_packet=1024, tx_size=512,
                 slots=8, slot_size=256, inbound=8, aliases_out=8, aliases_in=4,
                 alias_topic_max=64):
        p = b""
        if version == 5 and connect_props:
            from .cprops import settings
            p, inbound, max_packet, aliases_in, session_expiry = settings(
                connect_props, inbound, max_packet, aliases_in, session_expiry)
        self.rinit(inbound, aliases_in, alias_topic_max)
        if version == 5:
            p = self.rprops() + p
        Publisher.__init__(self, client_id, server, port, version, user, password, keepalive,
                           ssl, clean, session_expiry, will, slot_size, slots, max_packet,
                           timeout_ms, tx_size, p, clock)
        self.rhook()
        if version == 5:
            Aliases(self, aliases_out)  # the core's state[_AL]
        self.state[_OVER] = _over
        self.reconnect = reconnect
        self.backoff_min, self.backoff_max = backoff_ms
        # the Session Expiry Interval the CONNECT carries (5.0 3.1.2.11.2)
        self.session_expiry = session_expiry if session_expiry is not None else (
            0 if clean else 0xFFFFFFFF)
        self.connects = 0  # successful connects so far
        self.attempt_at = 0  # ticks_ms() when the last connect attempt ended ...
        self.retry_ms = 0  # ... and the backoff from then to the next (0: at once)
        self.in_callback = False  # inside on_message: never wait for the network
        self.subscriptions = []  # (filter, options, props) to make again after a reconnect
        if outbox:
            outbox.attach(self)  # reloads what the last run left unacknowledged

    def connect(self, clean=None, timeout_ms=0):
        """Open the connection and wait for CONNACK. Returns session present
        (True when the server resumed our session). Raises ServerError when
        refused, OSError on network trouble or when the TCP connect, TLS
        handshake and CONNACK took more than timeout_ms together (0: the
        constructor's). Blocks for the whole attempt (a connect attempt
        poll() or ensure_connected() had under way is dropped)."""
        if clean is not None:
            self.state[_CLEAN] = clean
        return MQTTClient._up(self, None, timeout_ms)

    def _up(self, d, timeout_ms=0):
        """Connect, blocking (d None), or read the CONNACK attempt d (a
        dial.Dial) brought; keep what the client keeps of it."""
        a = self.state
        try:
            try:
                t0 = ticks_ms()
                if d is None:
                    timeout_ms = timeout_ms or a[_TMO]
                    self.close()
                    s = MQTTClient._open(self, timeout_ms)
                    from . import lconn  # (it drops itself after the CONNACK)
                    lconn.start(self, s, a[_CLEAN])
                else:  # d.step() made its socket the link
                    timeout_ms = a[_TMO]
                for _ in self.poller.ipoll(max(0, timeout_ms - ticks_diff(ticks_ms(), t0))):
                    break
                else:
                    raise OSError(_ETIMEDOUT)  # no CONNACK
                # One packet framed and handed to the core (the CONNACK:
                # lconn.recv); what came after it waits for poll()
                r = self.data
                _fill(self, r, 0, 2)
                f = r[0]
                n = s = 0
                while r[1] & 0x80:
                    n |= (r[1] & 0x7F) << s
                    s += 7
                    if s == 28:
                        _refuse(self, 0x81)  # a Variable Byte Integer has 4 bytes at most
                    _fill(self, r, 1, 2)
                n |= r[1] << s
                if n + 2 + s // 7 > len(r):
                    _refuse(self, 0x95)  # over our Maximum Packet Size [MQTT-3.1.2-24]
                _fill(self, r, 0, n)
                a[_T] = f
                self.input(n)
            except BaseException:
                self.close()
                raise
            sp = bool(a[_SP])
        except ServerError:
            self.connack_props = self.keep(2)  # refused: its reason string is there
            raise
        self.connects += 1
        return sp

    def _open(self, ms):
        """The TCP (TLS) stream to the server (lconn.open()) and its poller."""
        import select
        import sys
        from . import lconn  # (dropped again after the CONNACK)
        s = lconn.open(self, ms)
        r = self.poller = select.poll()
        r.register(s, select.POLLIN)
        if sys.implementation.name != "micropython":
            from .time import Stream
            s = self.poller = Stream(s, r)
        return s

    def ensure_connected(self, timeout_ms=-1):
        """Connect if the link is down, with bounded exponential backoff
        between attempts (reconnect=False: one attempt, its error raised).
        Waits up to timeout_ms (-1: until connected; 0: no wait at all),
        backoff included, and starts no attempt after it. An attempt (TCP
        connect, TLS handshake, CONNECT, CONNACK) runs without blocking and
        carries over from call to call: each call advances it for what it
        has of timeout_ms (0: one step that does not wait), so calls
        shorter than a whole attempt still connect. An attempt fails (as a
        refused connection does at once) when it has taken the
        constructor's timeout_ms; the backoff then runs from its end.
        True when connected, False when the time ran out (the attempt and
        the backoff go on at the next call). Stored QoS 1/2 messages are
        resent by the session. A refusal no retry mends raises at once
        (fatal()). Not bounded: the name lookup of server (an address, or
        a name the resolver has cached, takes none) and one step of a TLS
        handshake's computation (on MicroPython mbedTLS does each in one
        call)."""
        t0 = ticks_ms()
        while not self.state[_QUOTA]:
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if left < 0 <= timeout_ms:
                left = 0
            d = self._dial
            if d is None:
                wait = self.retry_ms - ticks_diff(ticks_ms(), self.attempt_at)
                if wait > 0:  # backing off
                    if 0 <= left < wait:
                        if left:
                            sleep_ms(left)
                        return False
                    sleep_ms(wait)
                    continue
                if timeout_ms > 0 and not left:
                    return False
            try:
                if d is None:
                    self.close()
                    from .dial import Dial  # kept once loaded
                    d = self._dial = Dial(self)
                if not d.step(self, left):
                    return False  # under way: the next call goes on with it
                self._dial = None
                sp = MQTTClient._up(self, d)
            except (OSError, MQTTError, ServerError) as e:
                if e is self._cbe:
                    raise  # a callback's error, not the link's
                self.close()
                self.last_error = e
                if not self.reconnect or self.fatal(e):
                    raise
                self.attempt_at = ticks_ms()
                self.retry_ms = min(self.retry_ms * 2, self.backoff_max) or self.backoff_min
                continue
            except BaseException:
                self.close()
                raise
            self.attempt_at = ticks_ms()
            self.retry_ms = 0
            if not sp:  # no session: subscribe again; the acks come to on_suback
                for f, opts, props in self.subscriptions:
                    self._sub(((f, opts),), props, False)
        return True

    def close(self):
        """Close the link without DISCONNECT (and drop a connect attempt
        under way); the session is kept."""
        d = self._dial
        if d is not None:
            self._dial = None
            d.s.close()
        core.close(self)

    def fatal(self, e):
        """True for a connect error no retry mends: the server refused our
        credentials or client id (CONNACK 0x84-0x87, 0x8C; 3.1.1 return
        codes 1, 2, 4, 5) or the server's certificate did not verify
        (CPython's ssl.SSLCertVerificationError is an OSError)."""
        return _why("fatal", e, self.state[_V])  # asked only when a connect failed

    # ---- the loop -----------------------------------------------------------

    def poll(self, timeout_ms=0):
        """Handle what the server sent (waiting up to timeout_ms, -1: no limit,
        for the first packet) and keep-alive. Returns the type of the last
        packet handled, or 0. A broken link raises unless reconnect=True:
        then it reconnects within what is left of timeout_ms (backoff
        included), the connect attempt carried over from call to call (each
        poll(t) advances it for at most t, poll(0) by one step that does not
        wait: see ensure_connected()), so short polls still reconnect. A
        server DISCONNECT leaves its reason in disconnect_reason, its
        properties in disconnect_props."""
        t0 = ticks_ms()
        try:
            if self.sock is not None or not self.reconnect:
                return self.state[_T] >> 4 if Publisher.poll(self, timeout_ms) else 0
        except (OSError, MQTTError, ServerError) as e:
            if e is self._cbe:
                raise  # a callback's: the link is fine
            if isinstance(e, ServerError):
                self.disconnect_reason = e.args[0]
                self.disconnect_props = self.keep(1)
            self.close()
            if not self.reconnect:
                raise
            self.last_error = e
            # the first attempt goes at once, unless the link lasted less than
            # backoff_max: a server that ends every connection soon after
            # the CONNACK is not reconnected to in a tight loop
            if ticks_diff(ticks_ms(), self.attempt_at) < self.backoff_max:
                self.retry_ms = self.backoff_min
        if timeout_ms > 0:
            timeout_ms -= ticks_diff(ticks_ms(), t0)
            if timeout_ms <= 0:
                return 0
        self.ensure_connected(timeout_ms)
        return 0

    def wait_msg(self, timeout_ms=-1):
        """Block until a packet arrives (or timeout): poll(timeout_ms)."""
        return self.poll(timeout_ms)

    def recv(self, t, n):
        if t == 3:
            self.in_callback = True
        try:
            Receiver.recv(self, t, n)
        finally:
            self.in_callback = False

    def oversize(self, rl):
        """A packet over max_packet (rl body bytes after its fixed header).
        A PUBLISH is reported to on_oversize(topic, size), topic as bytes
        (cut at max_packet), size the whole packet's bytes. On 3.1.1, where
        the server cannot know our limit, it is read through data and dropped
        (no allocation but the topic) and acknowledged at QoS 1/2 as if
        delivered: a retained one cannot make the client reconnect over and
        over. Beyond _DRAIN_MAX bytes (a hostile size, not a message) it
        is closed as lite does. On 5.0 the server broke our Maximum Packet
        Size [MQTT-3.1.2-24]: DISCONNECT 0x95 (5.0 3.1.2.11.4), MQTTError.
        See docs/protocol-decisions.md."""
        from .drain import oversize  # only when such a message comes
        return oversize(self, rl)

    # ---- publishing -----------------------------------------------------------

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """Publish; returns the packet id (0 for QoS 0). When every slot is
        taken, waits for acknowledgements (up to timeout_ms, -1: forever) and
        returns WINDOW_FULL if none came (at once inside on_message, where
        waiting would overwrite the message being handled). props:
        props.build() bytes (or (id, value) pairs, built on each call).
        With reconnect=False and no outbox, publishing while not connected
        raises OSError(ENOTCONN) at any QoS: nothing is stored."""
        if props and type(props) is not bytes:
            from .props import build
            props = build(props)
        a = self.state
        if not a[_QUOTA]:
            if not self.reconnect and self.sock is None and not a[_OB]:
                # nothing would send it: not connected and not reconnecting
                raise OSError(_ENOTCONN)
            if not qos:
                self.ensure_connected()
        t0 = None
        while True:
            pid = core.publish(self, topic, payload, qos, retain, props, None)
            if pid != WINDOW_FULL:
                if qos and not a[_QUOTA] and self.reconnect and not self.in_callback and \
                        not a[_OB]:
                    # stored: it goes after the CONNACK (with an outbox it waits
                    # in the file, and publishing goes on while offline)
                    self.ensure_connected()
                return pid
            if t0 is None:
                t0 = ticks_ms()
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if self.in_callback or timeout_ms >= 0 and left <= 0:
                return pid
            self.poll(left)  # all that is left: a reconnect inside goes on at the next

    # ---- subscriptions --------------------------------------------------------

    def subscribe(self, topic, qos=0, options=0, props=None, timeout_ms=-1, sub_id=0,
                  wait=True):
        """Subscribe to a filter (str or bytes) with qos | options, or to a
        list of filters and (filter, qos | options) pairs in one SUBSCRIBE.
        options (5.0): props.NO_LOCAL, RETAIN_AS_PUBLISHED, RETAIN_IF_NEW or
        RETAIN_NONE. sub_id (5.0): a Subscription Identifier (1..268435455)
        the messages it brings carry. wait=True: waits for the SUBACK (up to
        timeout_ms, -1 forever; OSError(ETIMEDOUT) if none came) and returns
        its reason code (for a list: bytes, a code each), the granted QoS or
        >= 0x80 when refused. wait=False: returns the packet id at once
        (several may be in flight); the codes come to on_suback(pid, codes)
        and suback(pid). Each subscription is made again after a reconnect
        that found no session on the server (a refused one is forgotten)."""
        items = [(topic, qos | options)] if type(topic) is not list else [
            f if type(f) is tuple else (f, qos | options) for f in topic]
        if sub_id and self.state[_V] == 4:
            raise _why("sub_id")
        if sub_id or props and type(props) is not bytes:
            from .cprops import sub_props
            props = sub_props(props, sub_id)
        pid = self._sub(items, props, False)
        for f, opts in items:
            self._forget(f)
            self.subscriptions.append((f, opts, props))
        if not wait:
            return pid
        codes = self._await(pid, items, props, False, timeout_ms)
        for k in range(len(codes)):
            if codes[k] >= 0x80:
                self._forget(items[k][0])
        return codes if type(topic) is list else codes[0]

    def unsubscribe(self, topic, props=None, timeout_ms=-1, wait=True):
        """Unsubscribe from a filter or a list of them; waits for the
        UNSUBACK and returns its reason code (bytes for a list; 0 / b"" on
        3.1.1, whose UNSUBACK has none), or with wait=False the packet id
        (as subscribe())."""
        filters = topic if type(topic) is list else [topic]
        for f in filters:
            self._forget(f)
        if props and type(props) is not bytes:
            from .props import build
            props = build(props, 10)
        pid = self._sub(filters, props, True)
        if not wait:
            return pid
        codes = self._await(pid, filters, props, True, timeout_ms)
        return codes if type(topic) is list else codes[0] if codes else 0

    def _forget(self, topic):
        for i in range(len(self.subscriptions)):
            if self.subscriptions[i][0] == topic:
                del self.subscriptions[i]
                return

    def _sub(self, items, props, unsub):
        """Send the SUBSCRIBE/UNSUBSCRIBE (connecting first if need be, and
        waiting while _SUBS others are in flight); returns its packet id."""
        if not self.state[_QUOTA]:
            self.ensure_connected()
        while True:
            pid = Receiver.subscribe(self, items, props, unsub)
            if pid != WINDOW_FULL:
                return pid
            self.poll(-1)  # until an ack frees a slot

    def _await(self, pid, items, props, unsub, timeout_ms):
        """Wait for the ack of SUBSCRIBE/UNSUBSCRIBE pid; returns its codes.
        Sent again if the link went down before it came."""
        t0 = ticks_ms()
        while True:
            codes = self.suback(pid)
            if codes is not None:
                return codes
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if timeout_ms >= 0 and left <= 0:
                raise OSError(_ETIMEDOUT)  # no SUBACK/UNSUBACK
            if self.state[_QUOTA] and pid not in self.sub_pids:
                pid = self._sub(items, props, unsub)  # lost with the link
            self.poll(left)

    # ---- disconnecting --------------------------------------------------------

    def disconnect(self, reason=0, props=None, session_expiry=None):
        """Send DISCONNECT and close; stored QoS 1/2 messages are kept.
        5.0: reason (0: normal, 0x04: with the will message, ...), props
        (props.build(..., 14) bytes or (id, value) pairs: Reason String, User
        Property) and session_expiry, a new Session Expiry Interval for the
        session the server keeps: not above 0 if the CONNECT's was 0
        [MQTT-3.14.2-2]. Raises ValueError for a bad one, before sending."""
        if self._dial is not None:
            self.close()  # an attempt under way: nothing to say DISCONNECT on
        if self.state[_V] == 4 or props is None and session_expiry is None:
            return core.disconnect(self, reason)
        from .cprops import disconnect
        disconnect(self, reason, props, session_expiry)
