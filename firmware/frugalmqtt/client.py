# The blocking client: a Session over a TCP/TLS Transport, with connect,
# reconnect (bounded exponential backoff, session resume), keep-alive and
# helpers that wait. poll() never blocks; the helpers block with timeouts.

try:
    from micropython import const
    from time import ticks_ms, ticks_diff, sleep_ms
except ImportError:  # CPython
    const = int
    from time import sleep as _sleep
    from .session import ticks_ms, ticks_diff

    def sleep_ms(ms):
        _sleep(ms / 1000)

from .session import ServerError
from .codec import MQTTError
from .base import ClientBase

_WINDOW_FULL = const(-1)  # session.WINDOW_FULL, OUTBOX_FULL
_OUTBOX_FULL = const(-4)


class MQTTClient(ClientBase):
    """An MQTT 3.1.1 (version=4) or 5.0 (version=5) client.

    Session sizing keywords (max_packet, tx_size, slots, slot_size, inbound,
    aliases_out, aliases_in, alias_topic_max) are passed to Session; all
    memory is allocated here, once. `ssl` is an SSLContext (MicroPython
    `ssl`/`tls` or CPython `ssl`) set up with the CA to verify against.

    Callbacks: on_message(msg) with a reused session.Message; on_done(pid,
    reason) when a QoS 1/2 flow ends (reason < 0x80: the server has it).

    `outbox` (an outbox.Outbox) persists QoS 1/2 messages and QoS 2 state in
    a file: reloaded here, resumed on connect; publish() then stores QoS 1/2
    messages while disconnected without waiting for the link.
    """

    def connect(self, clean=None):
        """Open the connection and wait for CONNACK. Returns session present
        (True when the server resumed our session). Raises ServerError when
        refused, OSError on network trouble."""
        if clean is not None:
            self.clean = clean
        self.close()
        self._open()
        start = ticks_ms()
        try:
            while not self.s.connected:  # connected, even when packets right behind
                # the CONNACK (resent acks, queued messages) came in the same poll
                left = self.timeout_ms - ticks_diff(ticks_ms(), start)
                if left <= 0:
                    raise OSError("no CONNACK")
                self._poll(left)
                if not self.s.link:
                    raise OSError("connection lost")
        except Exception:
            self.close()
            raise
        self.connects += 1
        return bool(self.s.session_present)

    def disconnect(self, reason=0):
        """Send DISCONNECT and close [MQTT-3.14.4-1] [MQTT-3.14.4-2]."""
        if self.sock:
            self.s.disconnect(reason)
        self.close()

    def ensure_connected(self):
        """Reconnect with bounded exponential backoff until connected (when
        reconnect=True). Stored QoS 1/2 messages are resent by the session."""
        delay = self.backoff_min
        while not self.s.connected:
            try:
                if not self.connect():  # no session: subscribe again
                    for topic, opts, props in self.subscriptions:
                        self._sub(self.s.subscribe, ((topic, opts),), props, self.timeout_ms)
                return
            except (OSError, MQTTError, ServerError, EOFError) as e:  # EOF: closed in connect()
                if not self.reconnect:
                    raise
                self.last_error = e
            sleep_ms(delay)
            delay = min(delay * 2, self.backoff_max)

    # ---- the loop -----------------------------------------------------------

    def poll(self, timeout_ms=0):
        """Handle what the server sent (waiting up to timeout_ms for the first
        byte) and keep-alive. Returns the type of the last packet handled, or 0.
        A broken link raises OSError unless reconnect=True (then it reconnects)."""
        try:
            t = self._poll(timeout_ms)
        except (OSError, MQTTError, ServerError, EOFError):
            self.close()
            if not self.reconnect:
                raise
            self.ensure_connected()
            return 0
        if not self.s.link:
            self.close()
            if self.reconnect:
                self.ensure_connected()
        return t

    def _poll(self, timeout_ms):
        s = self.s
        if self.sock is None:
            raise OSError("not connected")
        t = 0
        wait = s.next_timeout()
        if timeout_ms >= 0 and (wait < 0 or timeout_ms < wait):
            wait = timeout_ms
        if wait and not self.sock.wait_readable(wait):
            s.tick()
            return 0
        while s.link and self._read(self.sock):
            t = s.receive()
        s.tick()
        return t

    def wait_msg(self, timeout_ms=-1):
        """Block until one packet arrives (or timeout); returns its type or 0."""
        return self.poll(timeout_ms)

    # ---- publishing -----------------------------------------------------------

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """Publish; returns the packet id (0 for QoS 0). When every slot is
        taken, waits for acknowledgements (up to timeout_ms, -1: forever) and
        returns WINDOW_FULL if none came. With an outbox: STORED when the
        message waits in its file for a slot, OUTBOX_FULL (after the same
        wait) when the file has no room."""
        s = self.s
        if not qos and not s.connected:
            self.ensure_connected()
        pid = s.publish(topic, payload, qos, retain, props)
        if pid >= 0 and s.link:
            return pid  # sent or stored: the usual case
        start = ticks_ms()
        while True:
            if pid < 0 and self.in_callback:
                return pid  # polling here would reuse the packet being handled
            if pid != _WINDOW_FULL and pid != _OUTBOX_FULL:
                if not s.link and self.reconnect and not s.ob:
                    self.close()
                    self.ensure_connected()
                return pid
            if timeout_ms >= 0 and ticks_diff(ticks_ms(), start) >= timeout_ms:
                return pid
            self.poll(100)
            pid = s.publish(topic, payload, qos, retain, props)

    def flush(self, timeout_ms=-1):
        """Wait until every stored QoS 1/2 message is acknowledged; True if so."""
        start = ticks_ms()
        while self.s.pending():
            if timeout_ms >= 0 and ticks_diff(ticks_ms(), start) >= timeout_ms:
                return False
            self.poll(100)
        return True

    # ---- subscriptions --------------------------------------------------------

    def subscribe(self, topic, qos=0, options=0, props=None, timeout_ms=-1):
        """Subscribe to one filter and wait for SUBACK; returns its reason code
        (the granted QoS, or >= 0x80 when refused). The subscription is made
        again after a reconnect that found no session on the server."""
        code = self._sub(self.s.subscribe, ((topic, qos | options),), props, timeout_ms)
        if code < 0x80:
            self._forget(topic)
            self.subscriptions.append((topic, qos | options, props))
        return code

    def unsubscribe(self, topic, props=None, timeout_ms=-1):
        self._forget(topic)
        return self._sub(self.s.unsubscribe, (topic,), props, timeout_ms)

    def _forget(self, topic):
        for i in range(len(self.subscriptions)):
            if self.subscriptions[i][0] == topic:
                del self.subscriptions[i]
                return

    def _sub(self, fn, items, props, timeout_ms):
        if not self.s.connected:
            self.ensure_connected()
        while True:
            pid = fn(items, props)
            if pid != _WINDOW_FULL:
                break
            self.poll(100)
        start = ticks_ms()
        while self.suback_pid != pid:
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), start)
            if timeout_ms >= 0 and left <= 0:
                raise OSError("no SUBACK")
            self.poll(left if left >= 0 else 1000)
        return self.suback_code
