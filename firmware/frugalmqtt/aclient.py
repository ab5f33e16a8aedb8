# The asyncio client: the core (lite.core) with receiving (recv.Receiver) and
# outbound aliases (alias.Aliases), driven by two tasks per connection (a
# reader and a keep-alive pinger) under MicroPython's `asyncio` or CPython's
# asyncio; the same code runs on both. Reconnects with bounded exponential
# backoff and subscribes again when the server kept no session. The
# application sees the connection through up_event/down_event and
# on_connect/on_disconnect; messages() yields copies (Message).
#
# Reading. The socket is non-blocking; the reader waits until it is readable,
# then frames packets straight into the core's data with what the socket has:
# a packet split across TCP segments is finished at the next wake-up (the
# framing state stays in the client), never by blocking the loop. Waiting:
# - MicroPython: `yield asyncio.core._io_queue.queue_read(sock)`, the idiom of
#   asyncio's own Stream.read: the task sleeps in the event loop's poll().
# - CPython: loop.add_reader(fd) resolving a future (selector event loops,
#   the default on Linux and macOS).
# While idle the reader sleeps in poll() and the pinger until the keep-alive
# deadline (the core's tick()): no wake-ups, no allocations. On MicroPython each
# wait for readability allocates a generator (_readable) and IOQueue's entry
# for the socket (a 3-item list in its map): 192 B a wait on the 64-bit unix
# port (tests/test_aclient_mosquitto.py measures it); the packets read at a wake-up
# are framed and dispatched without allocating (a packet split across reads
# takes one memoryview for its rest).
#
# Blocking parts: opening a connection (DNS, TCP connect, TLS handshake)
# blocks the loop for up to timeout_ms; a write blocks only while the
# socket's send buffer is full (up to timeout_ms).
import select
import errno
import asyncio
from .lite import core, MQTTError, ServerError, ticks_ms, ticks_diff
from .recv import Receiver, FULL
from .alias import Aliases
from .propview import Props

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

# lite.py's state[...] indices
_N = const(0)
_QUOTA = const(1)  # 0 until the server accepted this connection (CONNACK)
_KA = const(3)
_V = const(10)
_CLEAN = const(11)
_TMO = const(12)
_T = const(14)
_SP = const(15)
_STRIDE = const(16)
_OB = const(19)

# (sys itself not a global: room in this module's dict, tests/test_dict_room.py)
_MP = __import__("sys").implementation.name == "micropython"

if _MP:
    from asyncio import core as _core

    def _readable(link):
        # Looked up on each call: asyncio.new_event_loop() replaces _io_queue.
        yield _core._io_queue.queue_read(link.sock)

    _sleep_ms = asyncio.sleep_ms
    _wait_for_ms = asyncio.wait_for_ms
else:
    from .time import Stream

    async def _readable(link):
        loop = asyncio.get_running_loop()
        f = loop.create_future()
        loop.add_reader(link.fd, _resolve, f)
        try:
            await f
        finally:  # also for a closed socket: the selector forgets its fd
            loop.remove_reader(link.fd)

    def _resolve(f):
        if not f.done():
            f.set_result(None)

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)

    def _wait_for_ms(aw, ms):
        return asyncio.wait_for(aw, ms / 1000)


def _again(e):
    """The socket would block: EAGAIN (Linux, lwIP), EWOULDBLOCK (BSD),
    EINPROGRESS (lwIP); CPython TLS: SSLWantReadError/SSLWantWriteError."""
    return e.args and e.args[0] in (11, 35, 115) or type(e).__name__.startswith("SSLWant")


class _Link:
    """One connection's non-blocking socket, as the core writes to it
    (write(buf, off, n) -> bytes taken, waiting while the send buffer is
    full) and the reader reads it (None: nothing now). Closing it, whoever
    does (the core on a failed write or a protocol error, the application),
    ends the connection in the client first."""

    def __init__(self, client, sock, ms):
        self.c = client
        self.sock = sock  # what the event loop waits on
        self.st = sock if _MP else Stream(sock, None)  # readinto/write/close
        self.fd = -1 if _MP else sock.fileno()
        self.ms = ms
        self.wp = select.poll()
        self.wp.register(sock, select.POLLOUT)

    def write(self, b, o, n):
        try:
            while True:
                try:
                    k = self.st.write(b, o, n)
                except OSError as e:
                    if not _again(e):
                        raise
                    k = None
                if k:
                    return k
                if k == 0:
                    raise OSError(errno.ECONNRESET)
                if _MP:  # the send buffer is full: wait for room
                    for _ in self.wp.ipoll(self.ms):
                        break
                    else:
                        raise OSError(errno.ETIMEDOUT)
                elif not self.wp.poll(self.ms):
                    raise OSError(errno.ETIMEDOUT)
        except OSError as e:  # the core closes the link next: on_disconnect tells why
            if self.c:
                self.c.last_error = e
            raise

    def read(self, b, n):
        try:
            k = self.st.readinto(b, n)
        except OSError as e:
            if _again(e):
                return None
            raise
        if k == 0:
            raise OSError(errno.ECONNRESET)  # the server closed the connection
        return k

    def close(self):
        c = self.c
        if c:
            self.c = None
            c._down(self)
            self.st.close()


class Message:
    """A message as messages() yields it: a copy the application may keep.
    The fields of recv.Message: topic, payload (bytes), qos, retain, dup
    (bool), pid (for ack() with manual_ack) and props: on 5.0 a props.Props
    over a copy of the message's properties, None when it has none."""

    def __init__(self, m, v5):
        self.topic = bytes(m.topic)
        self.payload = bytes(m.payload)
        self.qos = m.qos
        self.retain = bool(m.retain)
        self.dup = bool(m.dup)
        self.pid = m.pid
        self.props = None
        p = m.props
        if v5 and p.end > p.off:  # parsed for this message (recv.Receiver.inbound)
            q = self.props = Props()
            q.buf = bytes(memoryview(p.buf)[p.off:p.end])
            q.end = p.end - p.off
            for i in range(len(q.at)):
                if p.at[i] >= 0:
                    q.at[i] = p.at[i] - p.off


class AMQTTClient(Receiver, core):
    """An asyncio MQTT 3.1.1 (version=4) or 5.0 (version=5) client.

    Arguments and sizes as client.MQTTClient: client_id, server, port,
    version, user, password, keepalive (s), ssl (an SSLContext), clean,
    session_expiry, will ((topic, payload, qos, retain[, props]), e.g.
    client.Will()), connect_props, reconnect, backoff_ms=(min, max),
    timeout_ms (connect, CONNACK, a full send buffer), clock, outbox,
    max_packet, tx_size, slots, slot_size, inbound, aliases_out, aliases_in,
    alias_topic_max.

    `async with AMQTTClient(...) as c:` connects on entry and disconnects on
    exit. After a successful connect a lost connection is re-established in
    the background (reconnect=True) with exponential backoff from
    backoff_ms[0] to backoff_ms[1] before each attempt: stored QoS 1/2
    messages are resent by the core, and the subscriptions are made again
    whenever a connection starts without the server's session. With
    reconnect=False the waiting methods raise OSError once the connection is
    gone.

    State: isconnected(); up_event (asyncio.Event) is set while connected
    (after the subscriptions are made again), down_event while not; the
    client sets each on a change only, so an application may clear one to
    wait for the next change (mqtt_as style).

    Callbacks (plain functions, called in the client's tasks):
    on_message(msg) with the reused recv.Message (valid during the call),
    on_done(pid, reason) when a QoS 1/2 flow ends, on_connect(session_present)
    after each successful connect or reconnect, on_disconnect(reason, props)
    when a connection that was up ends. Or iterate: `async for msg in
    client.messages()` (Message copies). An exception a callback raises
    stops the client (callback_errors "raise", the default: the connection
    closes without DISCONNECT, nothing reconnects, the exception leaves the
    client's task and every wait of the application raises it), or is
    printed with its traceback (callback_errors = "log").
    """

    def __init__(self, client_id, server, port=0, version=5, user=None, password=None,
                 keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
                 connect_props=None, reconnect=True, backoff_ms=(250, 30000),
                 timeout_ms=10000, clock=ticks_ms, outbox=None, max_packet=1024, tx_size=512,
                 slots=8, slot_size=256, inbound=8, aliases_out=8, aliases_in=4,
                 alias_topic_max=64):
        self._cb = None  # the application's on_message (see the property)
        self._q = None  # messages() queue of Message
        self._qmax = 0
        self._deliver = self._queue  # bound once: the reader allocates nothing per message
        self._waits = None  # publish(wait=True): {pid: final reason, None until it comes}
        p = b""
        if version == 5 and connect_props:
            from .cprops import settings
            p, inbound, max_packet, aliases_in, session_expiry = settings(
                connect_props, inbound, max_packet, aliases_in, session_expiry)
        self.rinit(inbound, aliases_in, alias_topic_max)
        if version == 5:
            p = self.rprops() + p
        # (the settings, server, port, ssl, timeout_ms, clean..., are kept
        # in the core's state: lhello.py)
        core.__init__(self, client_id, server, port, version, user, password, keepalive, ssl,
                      clean, session_expiry, will, slot_size, slots, max_packet, timeout_ms,
                      tx_size, p, clock)
        self.rhook()
        if version == 5:
            Aliases(self, aliases_out)  # the core's state[_AL]
        self.reconnect = reconnect
        self.backoff_min, self.backoff_max = backoff_ms
        self.connects = 0  # successful connects so far
        self.last_error = None  # why the last connection ended or (re)connect attempt failed
        self.subscriptions = []  # (filter, options, props) to make again without a session
        self.on_connect = None  # on_connect(session_present)
        self.on_disconnect = None  # on_disconnect(reason, props)
        self.up_event = asyncio.Event()  # set while connected
        self.down_event = asyncio.Event()  # set while not
        self.down_event.set()
        self._evt = asyncio.Event()  # set on every change waiters may look for
        self._link = None  # the open connection (_Link)
        self._live = None  # ... once its CONNACK came
        self._rtask = None  # its reader
        self._ptask = None  # its keep-alive pinger
        self._rctask = None  # the background reconnect loop
        self._closing = False  # the application closed: no reconnect
        self._fatal = None  # the exception of a callback that stopped the client
        self._gone = False  # a connection that was up ended: on_disconnect is due
        self._dprops = False  # the server's DISCONNECT left its properties in self.props
        # framing the packet being read: header bytes seen (0: none), its
        # remaining length so far and the shift of its next byte, body bytes
        # wanted (-1: in the header) and read
        self._hn = 0
        self._rl = 0
        self._sh = 0
        self._need = -1
        self._got = 0
        self._b1 = bytearray(1)  # a length byte after the first two
        if outbox:
            outbox.attach(self)  # reloads what the last run left unacknowledged

    # Receiver calls self.on_message for each message; with messages() in use
    # that is _queue, which also calls the application's.
    def _get_cb(self):
        return self._cb if self._q is None else self._deliver

    def _set_cb(self, f):
        self._cb = f

    on_message = property(_get_cb, _set_cb)

    def done(self, i, reason):
        """lite.core.done(): a flow ended, for a publish(wait=True) waiting too."""
        w = self._waits
        if w:
            s = i * self.state[_STRIDE]  # slot i's packet id: meta bytes 4 and 5
            p = self.buf[s + 4] << 8 | self.buf[s + 5]
            if p in w:
                w[p] = reason
        core.done(self, i, reason)

    def isconnected(self):
        """The server accepted our CONNECT on the open connection (mqtt_as's name)."""
        return self.state[_QUOTA] != 0

    # ---- connection -------------------------------------------------------------

    async def connect(self, clean=None):
        """Connect and wait for CONNACK (then make the subscriptions again if
        the server kept no session). Returns session present. Raises
        ServerError when refused, OSError on network trouble or when the TCP
        connect, TLS handshake and CONNACK took more than timeout_ms
        together. One attempt: reconnecting starts when
        a connection that was up is lost."""
        if clean is not None:
            self.state[_CLEAN] = clean
        self.close()  # an earlier connection, without reconnecting
        self._closing = False
        self._fatal = self._cbe = None
        await self._up()
        return bool(self.state[_SP])

    async def __aenter__(self):
        await self.connect()
        return self

    async def __aexit__(self, et, ev, tb):
        """Disconnect (or stop reconnecting). The exception of a callback that
        stopped the client is raised here unless another is on its way."""
        if self.state[_QUOTA]:
            await self.disconnect()
        else:
            self.close()
        if et is None and self._fatal is not None:
            raise self._fatal

    def _open(self):
        """Open the socket (blocking up to timeout_ms), make it non-blocking
        and send CONNECT."""
        a = self.state
        from . import lconn  # it drops itself after the CONNACK
        s = lconn.open(self, a[_TMO])
        s.setblocking(False)
        link = self._link = _Link(self, s, a[_TMO])
        self._hn = 0
        self._need = -1
        self._dprops = False
        a[_QUOTA] = 0  # not up until the CONNACK
        lconn.start(self, link, a[_CLEAN])  # CONNECT (a failed write closes the link)
        return link

    async def _up(self):
        self.last_error = None
        t0 = ticks_ms()
        link = self._open()
        self._rtask = asyncio.create_task(self._reader(link))
        try:  # the CONNACK within what opening the link left of timeout_ms
            await _wait_for_ms(self._until_connack(link),
                               max(1, self.state[_TMO] - ticks_diff(ticks_ms(), t0)))
        except asyncio.TimeoutError:
            self._drop(link)
            raise OSError(errno.ETIMEDOUT)  # no CONNACK
        except BaseException:
            self._drop(link)
            raise
        if self._link is not link:
            # It ended right after its CONNACK, before this task resumed:
            # _down() did not take it for up, so nothing would reconnect it.
            raise self.last_error or OSError(errno.ECONNRESET)
        self.connects += 1
        self._live = link
        if self.state[_KA]:
            self._ptask = asyncio.create_task(self._pinger(link))
        if not self.state[_SP]:  # no session on the server: subscribe again
            for f, opts, props in self.subscriptions:
                await self._sub(((f, opts),), props, False)
        self.up_event.set()
        self.down_event.clear()
        if self.on_connect:
            self._user(self.on_connect, self.state[_SP])

    async def _until_connack(self, link):
        while True:
            self._evt.clear()
            if self.state[_QUOTA]:
                return
            if self._link is not link:
                raise self.last_error or OSError(errno.ECONNRESET)
            await self._evt.wait()

    def _drop(self, link):
        """Close link if it is still the core's (the core may have closed it)."""
        if self.sock is link:
            core.close(self)

    def _down(self, link):
        """Connection link ends (_Link.close, inside core.close()): stop its
        tasks, wake the waiters and, if it was up, tell the application and
        start reconnecting."""
        if self._link is not link:
            return
        was_up = self._live is link
        self._live = self._link = None
        cur = asyncio.current_task()
        for t in (self._rtask, self._ptask):
            if t is not None and t is not cur:
                t.cancel()  # MicroPython: also takes the reader off the IOQueue
        self._rtask = self._ptask = None
        self._evt.set()
        if not was_up:
            return
        self.up_event.clear()
        self.down_event.set()
        if self._closing:
            self._gone = True  # _end() calls on_disconnect, once the core closed
            return
        # The reader or pinger notes why (last_error) after the core closed:
        # on_disconnect runs in a task of its own, next.
        asyncio.create_task(self._lost())
        if self.reconnect and self._rctask is None:
            self._rctask = asyncio.create_task(self._reconnect())

    async def _lost(self):
        e = self.last_error
        props = self.props if self._dprops else None
        if self.on_disconnect:
            # the server's DISCONNECT reason, the reason of ours after a
            # protocol error, else Unspecified error (the network, TLS)
            self._user(self.on_disconnect,
                       e.args[0] if isinstance(e, (ServerError, MQTTError)) else 0x80, props)

    def _user(self, f, *a):
        """Call on_connect or on_disconnect: an exception it raises stops the
        client and goes on up (callback_errors "raise"), or is printed."""
        try:
            f(*a)
        except Exception as e:
            if not self._cb_failed(e):
                self._stop(e)
                raise

    def _stop(self, e):
        """A callback raised e (callback_errors "raise"): the client stops as
        a failed program would. The link closes without DISCONNECT (the
        server publishes the will), nothing reconnects, and every wait of
        the application raises e."""
        self.last_error = self._fatal = e
        self._end(0x80)

    async def _reconnect(self):
        delay = self.backoff_min
        while True:
            await _sleep_ms(delay)
            try:
                await self._up()
            except Exception as e:  # network, refusal, TLS (ValueError on MicroPython)
                if self._fatal is not None:
                    raise  # a callback's: the client stopped
                self.last_error = e
                delay = min(delay * 2, self.backoff_max)
                continue
            self._rctask = None  # no await since it succeeded
            return

    async def disconnect(self, reason=0):
        """Send DISCONNECT (reason on 5.0) and close; no reconnect after
        [MQTT-3.14.4-1] [MQTT-3.14.4-2]."""
        self._closing = True  # before the link closes: _down must not reconnect
        core.disconnect(self, reason)
        self._end(reason)

    def close(self):
        """Drop the connection without DISCONNECT (the server then publishes
        the will); the session is kept and nothing reconnects."""
        self._end(0)

    def _end(self, reason):
        """The application ends the connection (reason: what on_disconnect gets)."""
        self._closing = True
        t = self._rctask
        self._rctask = None
        if t is not None and t is not asyncio.current_task():
            t.cancel()
        core.close(self)
        self._evt.set()
        if self._gone:
            self._gone = False
            if self.on_disconnect:
                self._user(self.on_disconnect, reason, None)

    # ---- tasks ------------------------------------------------------------------

    async def _reader(self, link):
        rl = 0
        try:
            while self._link is link:
                await _readable(link)
                while self._link is link:
                    rl = self._frame(link)
                    if rl < 0:
                        break
                    self.input(rl)
                    self._evt.set()
                    q = self._q
                    if q is not None:
                        # Hold further packets while the messages() queue is full
                        while len(q) >= self._qmax and self._link is link:
                            await self._change()
        except Exception as e:  # OSError, MQTTError, ServerError; TLS: ValueError on MicroPython
            if e is self._cbe:  # an application callback's, raised after its packet
                self._stop(e)
                raise
            self.last_error = e
            a = self.state
            if type(e) is ServerError and a[_T] == 0xE0 and a[_V] == 5 and rl > 1:
                # the server's DISCONNECT: its properties, for on_disconnect
                self._dprops = self.props.parse(self.data, 1, rl, 14) > 0
            self._drop(link)

    def _frame(self, link):
        """Read what the socket has of the next packet into data (first byte
        in state[_T]); its body length once it is whole, else -1 (the state
        is kept for the next wake-up). A packet larger than data is refused
        before its body is read [MQTT-3.1.2-24] (5.0: 0x95)."""
        r = self.data
        while self._need < 0:  # the fixed header
            if self._hn:
                k = link.read(self._b1, 1)
                if k is None:
                    return -1
                c = self._b1[0]
            else:
                k = link.read(r, 2)
                if k is None:
                    return -1
                self.state[_T] = r[0]
                self._rl = 0
                self._sh = 0
                self._hn = 1
                if k == 1:
                    continue
                c = r[1]
            self._rl |= (c & 0x7F) << self._sh
            self._sh += 7
            if c < 128:
                if self._rl > len(r):
                    raise self._fail(0x95)
                self._need = self._rl
                self._got = 0
            elif self._sh == 28:
                raise self._fail(0x81)  # a Variable Byte Integer has 4 bytes at most
        n = self._need
        while self._got < n:
            k = self._got
            # a memoryview only for a body split across reads
            k = link.read(memoryview(r)[k:n] if k else r, n - k)
            if k is None:
                return -1
            self._got += k
        self._need = -1
        self._hn = 0
        return n

    def _fail(self, reason):
        """The server broke the protocol while framing: DISCONNECT with the
        reason on 5.0 [U-4.13.1-a], close (3.1.1 just closes
        [MQTT-4.8.0-1]); returns the MQTTError to raise (as the core's
        input() does)."""
        if self.state[_V] == 5:
            core.disconnect(self, reason)
        else:
            core.close(self)
        e = MQTTError(reason)
        e.reason = reason
        return e

    async def _pinger(self, link):
        """Keep-alive: core.tick() sends PINGREQ when due and says how long to
        sleep; an unanswered one closes the link (OSError)."""
        try:
            while self._link is link:
                ms = self.tick()
                if ms < 0:
                    return
                await _sleep_ms(ms)
        except OSError as e:
            self.last_error = e
            self._drop(link)

    # ---- waiting ----------------------------------------------------------------

    async def _change(self):
        """Wait for the next event (a packet handled, a connection up or down).
        Callers check their condition right before, with no await between."""
        self._evt.clear()
        await self._evt.wait()

    def _check(self):
        """Raise unless connected or going to be (reconnecting, in another
        task); the exception of a callback that stopped the client."""
        if self._fatal is not None:
            raise self._fatal
        t = self._rctask
        if not self.state[_QUOTA] and (self._closing or t is None or t is asyncio.current_task()):
            raise OSError(errno.ENOTCONN)

    async def _connected(self):
        while not self.state[_QUOTA]:
            self._check()
            await self._change()

    # ---- publishing -------------------------------------------------------------

    async def publish(self, topic, payload, qos=0, retain=False, props=None, wait=False):
        """Publish; returns the packet id (0 for QoS 0). QoS 0 needs (waits
        for) a connection. A QoS 1/2 message is stored, even while
        disconnected, and sent when the server's Receive Maximum allows; when
        every slot is taken this waits for one. props: props.build() bytes
        (or (id, value) pairs, built on each call).

        wait=True: return the flow's final reason code instead, once it ends
        (QoS 0: 0 once sent): < 0x80 the server has the message (0x10: no
        subscriber matched), >= 0x80 refused (5.0), core.SESSION_LOST,
        alias.EXPIRED. It waits across reconnects; OSError if the client
        closes meanwhile (the message stays stored)."""
        if self._fatal is not None:
            raise self._fatal  # a callback stopped the client
        if not self.reconnect and self._link is None and not self.state[_OB]:
            raise OSError(errno.ENOTCONN)  # nothing would ever send it
        if props and type(props) is not bytes:
            from .props import build
            props = build(props)
        while True:
            if not qos and not self.state[_QUOTA]:
                await self._connected()
            pid = core.publish(self, topic, payload, qos, retain, props, None)
            if pid != FULL:
                break
            self._check()
            await self._change()
        if not wait or pid <= 0:  # QoS 0, or waiting in an outbox's file
            return pid
        w = self._waits
        if w is None:
            w = self._waits = {}
        w[pid] = None
        try:
            while w[pid] is None:
                self._check()
                await self._change()
            return w[pid]
        finally:
            del w[pid]

    async def flush(self):
        """Wait until every stored QoS 1/2 message is acknowledged."""
        while self.state[_N]:
            self._check()
            await self._change()

    # ---- subscriptions ----------------------------------------------------------

    async def subscribe(self, topic, qos=0, options=0, props=None):
        """Subscribe to one filter and wait for SUBACK; returns its reason code
        (the granted QoS, or >= 0x80 when refused). The client keeps it (until
        unsubscribe()) and makes it again on every connection that starts
        without the server's session."""
        code = await self._sub(((topic, qos | options),), props, False)
        if code < 0x80:
            self._forget(topic)
            self.subscriptions.append((topic, qos | options, props))
        return code

    async def unsubscribe(self, topic, props=None):
        """Unsubscribe and wait for UNSUBACK; returns its reason code (0 on 3.1.1)."""
        self._forget(topic)
        return await self._sub((topic,), props, True)

    def _forget(self, topic):
        for i in range(len(self.subscriptions)):
            if self.subscriptions[i][0] == topic:
                del self.subscriptions[i]
                return

    async def _sub(self, items, props, unsub):
        if props and type(props) is not bytes:
            from .props import build
            props = build(props, 10 if unsub else 8)
        while True:
            await self._connected()
            link = self._link
            pid = Receiver.subscribe(self, items, props, unsub)
            if pid != FULL:
                break
            await self._change()
        while True:  # its answer, kept for it even when others came first
            codes = self.suback(pid)
            if codes is not None:
                return codes[0] if codes else 0
            if self._link is not link:
                raise self._fatal or OSError(errno.ECONNRESET)  # never resent
            await self._change()

    # ---- receiving --------------------------------------------------------------

    def _queue(self, msg):
        self._q.append(Message(msg, self.state[_V] == 5))
        if self._cb:
            self._cb(msg)

    def messages(self, depth=4):
        """An async iterator of Message copies of the messages that arrive
        from the first call on (allocates; on_message does not). Up to `depth` messages wait for the consumer; then the reader
        stops reading (and acknowledging) until it catches up, so consume
        promptly: a stalled reader also misses PINGRESP. Ends after
        disconnect()/close(), or when the connection is lost with
        reconnect=False; raises the exception of a callback that stopped the
        client."""
        if self._q is None:
            self._q = []
        self._qmax = depth
        return self

    def __aiter__(self):
        if self._q is None:
            self.messages()
        return self

    async def __anext__(self):
        q = self._q
        while not q:
            if not self.state[_QUOTA] and (self._closing or self._rctask is None):
                if self._fatal is not None:
                    raise self._fatal
                raise StopAsyncIteration
            await self._change()
        m = q.pop(0)
        self._evt.set()  # room for the reader
        return m
