# The asyncio client: the same Session as the blocking client, driven by two
# tasks per connection (a reader and a keep-alive pinger) under MicroPython's
# `asyncio` or CPython's asyncio; the same code runs on both.
#
# Waiting for the socket. The socket stays the non-blocking transport.Transport
# (TCP or TLS); the reader waits for it to become readable and then drains
# every complete packet with Framer.read_packet (no StreamReader, no copies):
# - MicroPython: `yield asyncio.core._io_queue.queue_read(sock)`, the idiom of
#   asyncio's own Stream.read: the task sleeps in the event loop's poll().
# - CPython: loop.add_reader(fd) resolving a future (selector event loops;
#   the default on Linux and macOS).
# While idle the reader sleeps in poll() and the pinger in sleep_ms until the
# keep-alive deadline (session.next_timeout()): no wake-ups, no allocations.
# Per burst of received packets MicroPython's IOQueue allocates a small list
# to register the wait; the session's dispatch itself allocates nothing.
#
# Blocking parts: opening a connection (DNS, TCP connect, TLS handshake) blocks
# the loop for up to timeout_ms, as transport.Transport does; a write blocks
# only while the socket's send buffer is full.
import sys
import asyncio

from .session import ServerError, WINDOW_FULL, OUTBOX_FULL
from .codec import MQTTError
from .base import ClientBase

_MP = sys.implementation.name == "micropython"

if _MP:
    from asyncio import core as _core

    def _readable(t):
        # Looked up on each call: asyncio.new_event_loop() replaces _io_queue.
        yield _core._io_queue.queue_read(t.sock)

    def _unwatch(t):
        pass  # cancelling the waiting task took it off the IOQueue

    _sleep_ms = asyncio.sleep_ms
    _wait_for_ms = asyncio.wait_for_ms
else:
    async def _readable(t):
        try:
            if t.sock.pending():  # TLS: bytes already decrypted
                return
        except AttributeError:
            pass
        loop = asyncio.get_running_loop()
        f = loop.create_future()
        fd = t.sock.fileno()
        loop.add_reader(fd, _resolve, f)
        try:
            await f
        finally:
            if t.sock.fileno() == fd:  # a closed socket was already unwatched
                loop.remove_reader(fd)

    def _resolve(f):
        if not f.done():
            f.set_result(None)

    def _unwatch(t):
        fd = t.sock.fileno()
        if fd >= 0:
            asyncio.get_running_loop().remove_reader(fd)

    def _sleep_ms(ms):
        return asyncio.sleep(ms / 1000)

    def _wait_for_ms(aw, ms):
        return asyncio.wait_for(aw, ms / 1000)

_NET_ERRORS = (OSError, MQTTError, ServerError, EOFError)


class AMQTTClient(ClientBase):
    """An asyncio MQTT 3.1.1 (version=4) or 5.0 (version=5) client.

    Arguments as client.MQTTClient: client_id, server, port, version, user,
    password, keepalive (s), ssl (an SSLContext), clean, session_expiry,
    will (control.Will), connect_props, reconnect, backoff_ms=(min, max),
    timeout_ms (connect and CONNACK), and the Session sizes.

    After a successful connect() a lost connection is re-established in the
    background (reconnect=True) with exponential backoff from backoff_ms[0]
    to backoff_ms[1] before each attempt, resuming the session: stored QoS 1/2
    messages are resent by the session. With reconnect=False the waiting
    methods raise OSError once the connection is gone.

    Callbacks (plain functions, called in the reader task): on_message(msg)
    with the reused session.Message (valid during the call), on_done(pid,
    reason) when a QoS 1/2 flow ends, on_connect(session_present) after each
    successful connect or reconnect. Or iterate: `async for topic, payload,
    retained in client.messages()` (copies; see messages()).
    """

    def __init__(self, *args, **kw):  # the arguments of client.MQTTClient
        ClientBase.__init__(self, *args, **kw)
        self.on_connect = None
        self._evt = asyncio.Event()  # set on every change waiters may look for
        self._rtask = None  # reader of the current connection
        self._ptask = None  # keep-alive pinger of the current connection
        self._rctask = None  # background reconnect loop
        self._closing = False  # the application disconnected: no reconnect
        self._live = None  # the connection that got CONNACK
        self.callback_error = None  # last exception raised by on_connect
        self._q = None  # messages() queue of (topic, payload, retained)
        self._qmax = 0

    # ---- connection -------------------------------------------------------------

    async def connect(self, clean=None):
        """Connect and wait for CONNACK. Returns session present. Raises
        ServerError when refused, OSError on network trouble or when no
        CONNACK came within timeout_ms. One attempt: reconnecting starts when
        a connection that was up is lost."""
        if clean is not None:
            self.clean = clean
        self.close()  # an earlier connection, without reconnecting
        self._closing = False
        await self._up()
        return bool(self.s.session_present)

    async def _up(self):
        self.last_error = None
        self._open()
        t = self.sock
        self._rtask = asyncio.create_task(self._reader(t))
        try:
            await _wait_for_ms(self._until_connack(t), self.timeout_ms)
        except asyncio.TimeoutError:
            self._down(t)
            raise OSError("no CONNACK")
        except BaseException:
            self._down(t)
            raise
        self.connects += 1
        self._live = t
        if self.s.next_timeout() >= 0:
            self._ptask = asyncio.create_task(self._pinger(t))
        self._evt.set()
        if self.on_connect:
            try:
                self.on_connect(self.s.session_present)
            except Exception as e:  # as for on_message: kept, not raised
                self.callback_error = e

    async def _until_connack(self, t):
        while True:
            self._evt.clear()
            if self.s.connected:
                return
            if self.sock is not t:
                raise self.last_error or OSError("connection lost")
            await self._evt.wait()

    def _down(self, t):
        """Connection t ended (or is ended now): close it, stop its tasks, wake
        the waiters and, once connected before, start reconnecting."""
        if t is None or self.sock is not t:
            return  # already handled
        was_up = self._live is t
        self._live = None
        self.s.lost()
        self.sock = None
        cur = asyncio.current_task()
        for task in (self._rtask, self._ptask):
            if task is not None and task is not cur:
                task.cancel()
        self._rtask = self._ptask = None
        _unwatch(t)
        t.close()
        self._evt.set()
        if self.reconnect and was_up and not self._closing and self._rctask is None:
            self._rctask = asyncio.create_task(self._reconnect())

    async def _reconnect(self):
        delay = self.backoff_min
        while True:
            await _sleep_ms(delay)
            try:
                await self._up()
            except Exception as e:  # network, refusal, TLS (ValueError on MicroPython)
                self.last_error = e
                delay = min(delay * 2, self.backoff_max)
                continue
            self._rctask = None  # no await since _up() succeeded
            return

    def _stop_reconnect(self):
        task = self._rctask
        self._rctask = None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def disconnect(self, reason=0):
        """Send DISCONNECT (reason on 5.0) and close; no reconnect after
        [MQTT-3.14.4-1] [MQTT-3.14.4-2]."""
        t = self.sock
        if t is not None:
            self.s.disconnect(reason)
        self.close()

    def close(self):
        """Drop the connection without DISCONNECT (the server then publishes
        the will); the session is kept and nothing reconnects."""
        self._closing = True
        self._stop_reconnect()
        self._down(self.sock)
        self._evt.set()

    # ---- tasks ------------------------------------------------------------------

    async def _reader(self, t):
        s = self.s
        try:
            while self.sock is t:
                await _readable(t)
                while s.link and self._read(t):
                    s.receive()
                    self._evt.set()
                    q = self._q
                    if q is not None:
                        # Hold further packets while the messages() queue is full
                        while len(q) >= self._qmax and self.sock is t:
                            await self._change()
                if not s.link:
                    break
        except _NET_ERRORS as e:
            self.last_error = e
        self._down(t)

    async def _pinger(self, t):
        """Keep-alive: sleep until the session has work (next_timeout), then
        tick(): PINGREQ when the link was quiet, OSError when unanswered."""
        s = self.s
        while self.sock is t:
            ms = s.next_timeout()
            if ms < 0:
                return
            if ms:
                await _sleep_ms(ms)
                continue
            try:
                s.tick()
            except OSError as e:
                self.last_error = e
            if not s.link:
                self._down(t)
                return

    # ---- waiting ----------------------------------------------------------------

    async def _change(self):
        """Wait for the next event (a packet handled, a connection up or down).
        Callers check their condition right before, with no await between."""
        self._evt.clear()
        await self._evt.wait()

    def _check(self):
        """Raise unless connected or going to be (reconnecting)."""
        if not self.s.connected and (self._closing or self._rctask is None):
            raise OSError("not connected")

    async def _connected(self):
        while not self.s.connected:
            self._check()
            await self._change()

    def _after_send(self, t):
        if not self.s.link:
            self._down(t)

    # ---- publishing -------------------------------------------------------------

    async def publish(self, topic, payload, qos=0, retain=False, props=None):
        """Publish; returns the packet id (0 for QoS 0). QoS 0 needs (waits
        for) a connection. A QoS 1/2 message is stored by the session, even
        while disconnected, and sent when the server's Receive Maximum
        allows; when every slot is taken this waits for one."""
        s = self.s
        while True:
            if qos == 0 and not s.connected:
                await self._connected()
            t = self.sock
            pid = s.publish(topic, payload, qos, retain, props)
            if pid != WINDOW_FULL and pid != OUTBOX_FULL:
                self._after_send(t)
                return pid
            self._check()
            await self._change()

    async def flush(self):
        """Wait until every stored QoS 1/2 message is acknowledged."""
        while self.s.pending():
            self._check()
            await self._change()

    # ---- subscriptions ----------------------------------------------------------

    async def subscribe(self, topic, qos=0, options=0, props=None):
        """Subscribe to one filter and wait for SUBACK; returns its reason code
        (the granted QoS, or >= 0x80 when refused)."""
        return await self._sub(True, ((topic, qos | options),), props)

    async def unsubscribe(self, topic, props=None):
        """Unsubscribe and wait for UNSUBACK; returns its reason code (0 on 3.1.1)."""
        return await self._sub(False, (topic,), props)

    async def _sub(self, sub, items, props):
        s = self.s
        while True:
            await self._connected()
            t = self.sock
            pid = s.subscribe(items, props) if sub else s.unsubscribe(items, props)
            if pid != WINDOW_FULL:
                break
            await self._change()
        self._after_send(t)
        while self.suback_pid != pid:
            if self.sock is not t:
                raise OSError("connection lost before SUBACK")  # never resent
            await self._change()
        self.suback_pid = 0
        return self.suback_code

    # ---- receiving --------------------------------------------------------------

    def _on_message(self, msg):
        if self.on_message:
            self.on_message(msg)
        if self._q is not None:
            self._q.append((bytes(msg.topic), bytes(msg.payload), bool(msg.retain)))

    def messages(self, depth=4):
        """An async iterator of (topic, payload, retained), bytes copied from
        each message (allocates; on_message does not). Up to `depth` messages
        wait for the consumer; then the reader stops reading (and acknowledging)
        until it catches up, so consume promptly: a stalled reader also misses
        PINGRESP. Ends after disconnect()/close(), or when the connection is
        lost with reconnect=False."""
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
            if not self.s.connected and (self._closing or self._rctask is None):
                raise StopAsyncIteration
            await self._change()
        m = q.pop(0)
        self._evt.set()  # room for the reader
        return m
