# frugalmqtt.core: the sans-I/O protocol engine every profile runs on. It owns
# the outbound flow and the connection: the CONNECT, packet ids, the fixed
# in-flight table and its order, the server's quota (Receive Maximum), resend
# on CONNACK, ack handling, the CONNACK limits, keep-alive deadlines and
# protocol errors, each flow-state transition in one place. What runs once
# per connection (the TCP/TLS stream, the CONNACK and the session's resume)
# is conn.py, loaded for it and dropped again.
#
# I/O and time are injected: `sock` is any stream with write(buf, off, n) -> k
# and close() (a socket, a TLS socket, a test peer), `clock` a millisecond
# tick. The core never reads: a driver frames each packet from the server
# into `rx` (first byte in `first`) and hands it to packet(). Drivers:
# lite.Publisher (blocking, publish-only), client.MQTTClient (blocking, with
# the receiving and alias mixins), aclient.AMQTTClient (asyncio).
#
# What a profile adds plugs in here: inbound() gets every PUBLISH, PUBREL,
# SUBACK and UNSUBACK (recv.Receiver replaces it), alias() gives a topic its
# outbound alias and prepare() readies a stored message that waited before
# it goes (alias.Aliases), `ob` persists the table (outbox.Outbox).
# The core closes a link it gives up on with Core.close(self), not
# self.close(): a driver may give close() and disconnect() other meanings
# (the asyncio client's disconnect() is a coroutine, its close() also stops
# reconnecting).
#
# Written for RAM: on the device every function, name and string constant of
# this module is held in the heap, so helpers are few and the errors the
# server causes carry only their reason code (MQTTError.reason; the spec id
# beside each check says which rule) and the network ones an errno.
# And for speed: no class a client is made of has a property (or any other
# descriptor): one would make MicroPython look every attribute store up
# through all the client's classes first (measured: 0.55 us a store, not 0.03).
# The core calls its own helpers through the class, Core._go(self, i), not
# self._go(i): a method looked up on the instance first misses in the
# instance's attribute map, a scan of a nearly full table (about 1 us of
# the 8 a QoS 1 publish and its PUBACK take). What a mixin, a driver or a
# test rig replaces (packet, inbound, _free, _done, alias, prepare, room,
# oversize, _send, a driver's _read and _wait) is called on self.
import errno

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
FULL = const(-1)  # publish(): every slot of the table is taken
_ARGS = (bytes, bytearray, str, memoryview)  # the types a topic and a payload may have
# The size of each CONNACK property's value, by id from 0x11 to 0x2A: a 1, 2
# or 4 byte integer, 5 a string or binary data, 6 a string pair, 0 none.
_KINDS = b"45205500050500502201164111"
# Room in this module's globals dict: with every slot taken, each lookup of
# a builtin (type, len, ...) from the code below scans the whole dict before
# it reaches the builtins (measured: QoS 0 publish 2.5 us, 1.7 with room).
# tests/test_dict_room.py keeps the hot modules' dicts from filling up. (Two
# names the device holds anyway, the Core class flag's and the driver
# method's: a name of its own would cost a qstr.)
_room = room = None


def _why(key, *a):
    """The words of an error, in why.py, imported only when one is raised or
    printed (the device holds no error text until then): the exception for
    error `key` (naming the argument, and for a size the size and the
    limit); as the __str__ of MQTTError and ServerError (key: the
    exception), its reason code and the code's name. The keys are names
    the device holds anyway (argument and method names): a new name would
    cost it RAM."""
    from . import why
    return why.why(key, a)


class MQTTError(Exception):
    """A packet that breaks the protocol. `reason` (args[0]) is the MQTT 5
    reason code sent in the DISCONNECT (3.1.1 just closes the connection).
    str() gives the code and its name."""
    __str__ = _why


class ServerError(Exception):
    """The server refused the connection (CONNACK reason code >= 0x80, or a
    3.1.1 return code 1 to 5) or ended it (DISCONNECT); args[0] is its
    reason code. str() gives the code and its name."""
    __str__ = _why


def _drop(m):
    """Forget module m, which ran once (hello.py, replay.py): out of
    sys.modules and its package, its code is left to the collector. Only on
    MicroPython: CPython has the RAM, and its threads (host_sim's devices)
    could import m again while another drops it."""
    import sys
    if sys.implementation.name != "micropython":
        return
    del sys.modules[m.__name__]
    delattr(sys.modules["frugalmqtt"], m.__name__[11:])  # its name after "frugalmqtt."


def utf8(b, i, end):
    """True when b[i:end] is well-formed UTF-8 without U+0000 [MQTT-1.5.4-1]
    [MQTT-1.5.4-2]; U+FEFF is valid and kept [MQTT-1.5.4-3]. No allocation."""
    while i < end:
        c = b[i]
        i += 1
        if c < 0x80:
            if not c:
                return False
            continue
        lo = 0x80
        hi = 0xBF
        if c < 0xC2 or c > 0xF4:
            return False
        n = 1 if c < 0xE0 else 2 if c < 0xF0 else 3
        if c == 0xE0:
            lo = 0xA0  # overlong
        elif c == 0xED:
            hi = 0x9F  # U+D800..U+DFFF, surrogates
        elif c == 0xF0:
            lo = 0x90  # overlong
        elif c == 0xF4:
            hi = 0x8F  # above U+10FFFF
        if i + n > end:
            return False
        while n:
            c = b[i]
            if c < lo or c > hi:
                return False
            lo = 0x80
            hi = 0xBF
            i += 1
            n -= 1
    return True


class Core:
    """The protocol state of one MQTT session across connections. slots: QoS
    1/2 messages in flight (each keeps its encoded PUBLISH, max_packet bytes,
    for a resend); rx_size: the largest packet accepted from the server
    (advertised on 5.0); tx_size: the buffer for QoS 0 PUBLISH and control
    packets (max_packet when 0). will: (topic, payload, qos, retain[, props]);
    props (and a will's): MQTT 5 properties as built by props.build(), added
    to the CONNECT's."""

    # What only a mixin sets, read here but not on the publish path:
    # class-level defaults, so a publisher's instance holds none of them
    aliases = 0  # outbound topic aliases we keep (alias.Aliases)
    sub_pids = ()  # ids of SUBSCRIBEs/UNSUBSCRIBEs in flight: recv.Receiver sets a table
    # _prep: prepare(i) -> True drops slot i's message before it goes (alias.Aliases)
    # (a flag: reading self.prepare to test it would allocate a bound method)
    _prep = False
    # _room: a driver's room(timeout_ms) waits for an ack when publish()
    # finds every slot taken, True to try again (lite.Publisher); without
    # it publish() returns FULL (a flag, as _prep)
    _room = False
    early = 0  # flows at the front of order sent before the CONNACK (wake.py sets it)
    # on_done(pid, reason) when a QoS 1/2 flow ends: the application's, read
    # once per ack. A class-level default keeps lite's instance at 37
    # attributes: its map then never grows past 37 slots (a 38th takes it
    # to 47, 752 B, and the growth needs both tables at once)
    on_done = None
    callback_errors = "raise"  # or "log": on_done's exception printed (why.on_done)

    def __init__(self, client_id, version=5, user=None, password=None, keepalive=60,
                 clean=True, session_expiry=None, will=None, max_packet=256, slots=4,
                 rx_size=64, clock=ticks_ms, tx_size=0, props=b""):
        if version != 4 and version != 5:
            raise _why("version", version)
        if slots < 1 or max_packet < 16 or rx_size < 8:
            raise _why("slots", slots, max_packet, rx_size)
        if version == 4 and (not client_id and not clean or password is not None and user is None):
            # [MQTT-3.1.3-7] [MQTT-3.1.2-22]
            raise _why("user")
        self.v = version
        self.clean = clean
        self.clock = clock
        # slot images: img[i] holds slot i's PUBLISH, img[slots] is the buffer
        # for QoS 0, CONNECT and acks (a list made at its size: it never grows)
        img = [None] * (slots + 1)
        for i in range(slots):
            img[i] = bytearray(max_packet)
        img[slots] = bytearray(tx_size or max_packet)
        self.img = img
        self.start = bytearray(slots)  # where each image begins (< _HEAD)
        self.size = [0] * slots  # image length
        self.pid = [0] * slots
        self.state = bytearray(slots)
        self.order = bytearray(slots)  # slot numbers, oldest flow first
        self.n = 0  # flows in the table
        self.slots = slots
        self.last_pid = 0
        self.rx = bytearray(rx_size)
        self.first = 0  # the first byte of the packet in rx
        self.sock = None  # the stream of the open connection
        self.connected = False  # sock is open
        self.up = False  # ... and the server accepted our CONNECT
        self.quota = slots  # until a CONNACK says otherwise
        self.server_max = 268435460
        self.max_qos = 2
        self.retain_ok = True
        self.topic = None  # the last topic, validated (str/bytes are immutable)
        self.tn = 0  # its UTF-8 length
        self.ka_ms = 0
        self.sp = 0  # the last CONNACK's session present
        self.ping_t = None  # clock() when the PINGREQ due a PINGRESP went
        self.last_rx = self.last_tx = 0  # clock() of the last packet in, out
        # read on every publish: instance attributes (a class-level default
        # would cost a lookup through every class of the client)
        self.ob = None  # an outbox.Outbox persisting the table
        self.amax = 0  # outbound aliases this connection may use (alias.Aliases)
        # The CONNECT body, built once: hello.py's code is not kept after.
        # Last, after the buffers: loading and dropping it leaves holes the
        # buffers would have had to fit around (0.75 KB of the smallest heap)
        from . import hello
        self.hello = hello.body(client_id, version, user, password, keepalive, clean,
                                session_expiry, will, max_packet, rx_size, props)
        _drop(hello)

    # ---- connection ---------------------------------------------------------

    def begin(self, sock, clean):
        """Start a connection on the open stream sock: send CONNECT. The
        session resumes when the CONNACK arrives (packet())."""
        if self.v == 4 and not clean and not self.hello[10] | self.hello[11]:
            raise _why("user")  # 3.1.1: a persistent session needs one [MQTT-3.1.3-7]
        self.sock = sock
        self.connected = True
        self.up = False
        if self.early:
            self.early = 0
        b = self.img[-1]
        n = len(self.hello)
        b[_HEAD:_HEAD + n] = self.hello
        b[_HEAD + 7] = b[_HEAD + 7] & 0xFD | (2 if clean else 0)
        self.clean = clean
        s = Core._seal(self, b, _HEAD + n, 0x10)
        self._send(b, s, _HEAD + n - s)

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
        Core.close(self)  # [MQTT-3.14.4-1] [MQTT-3.14.4-2]

    def close(self):
        """Close the stream without DISCONNECT; the session is kept."""
        if self.sock:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.connected = self.up = False

    # ---- publish ------------------------------------------------------------

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """Send a PUBLISH; returns the packet id (0 at QoS 0), or FULL when a
        QoS 1/2 message finds no free slot and the driver has no wait for an
        ack (room(timeout_ms)) or it gives up. Beyond the server's Receive
        Maximum a stored message waits in its slot until an ack frees the
        quota. topic: str or bytes; payload: bytes-like or str; props: MQTT 5
        properties as props.build() made them. Once stored,
        a message is never lost: if the link is down (or fails while sending)
        it stays in the table and goes out after the next CONNACK. OSError
        means it was not stored."""
        if not qos and self.sock is None:
            raise OSError(errno.ENOTCONN)
        if qos and (qos < 0 or qos > self.max_qos):
            raise _why("qos", qos, self.max_qos)  # [MQTT-3.2.2-11]
        if retain and not self.retain_ok:
            raise _why("retain")  # [MQTT-3.2.2-14]
        # An alias only for a QoS 1/2 message that goes now: a held one must
        # not lean on an alias sent after it; none with an outbox, whose
        # records must replay after a reboot, without the aliases.
        a = 0
        ob = self.ob
        if qos:
            i = -1
            while self.n >= self.slots and not ob:
                if not self._room or not self.room(timeout_ms):
                    return FULL
            if self.n >= self.slots or ob and ob.backlog:
                b = ob.buf  # no slot (or older ones wait): the outbox's file keeps it
            else:
                i = 0
                while self.state[i]:
                    i += 1
                b = self.img[i]
        else:
            b = self.img[-1]
        if topic is not self.topic or type(topic) is bytearray:
            # a new topic: checked where it is written, without allocating
            if type(topic) not in _ARGS:
                raise _why("publish", topic, payload, props)
            try:
                o = Core._text(self, b, _HEAD + 2, topic)
            except IndexError:
                o = 0
            k = _HEAD + 2
            while k < o and b[k] != 0x23 and b[k] != 0x2B:
                k += 1
            # not empty [MQTT-4.7.3-1], no wildcard [MQTT-3.3.2-2], UTF-8
            # without U+0000 or a surrogate [MQTT-1.5.4-1] [MQTT-1.5.4-2]
            if k < o or o <= _HEAD + 2 or not utf8(b, _HEAD + 2, o):
                raise _why("topic", o - _HEAD - 2)
            self.tn = o - _HEAD - 2
            self.topic = topic
        if props and type(props) is not bytes:
            raise _why("publish", topic, payload, props)
        if self.amax and (not qos or self.up and self.n < self.quota and not ob):
            a = self.alias(topic)
        # The body goes after _HEAD spare bytes; _seal puts the fixed header
        # right before it once the length is known. An alias the server
        # knows (a > 0) replaces the topic; a new one (a < 0) goes with it.
        f = 0x30 | qos << 1 | (1 if retain else 0)
        while True:
            n = self.tn if a <= 0 else 0
            b[_HEAD] = n >> 8
            b[_HEAD + 1] = n & 0xFF
            o = _HEAD + 2 + n
            try:
                if n:
                    if type(topic) is str:
                        o = Core._text(self, b, _HEAD + 2, topic)
                    else:  # bytes: copied inline, the common case kept fast
                        b[_HEAD + 2:o] = topic
                p = o  # the packet id goes here once the packet is known to go
                if qos:
                    o += 2
                if self.v == 5:
                    n = len(props) if props else 0
                    if a:
                        n += 3
                    if n < 128:
                        b[o] = n
                        o += 1
                    else:
                        b[o] = n & 0x7F | 0x80
                        b[o + 1] = n >> 7
                        o += 2
                    if a:  # Topic Alias, never 0 nor above the server's maximum [MQTT-3.3.2-8]
                        n = -a if a < 0 else a
                        b[o] = 0x23
                        b[o + 1] = n >> 8
                        b[o + 2] = n & 0xFF
                        o += 3
                    if props:
                        o = Core._text(self, b, o, props)
                q = o  # the payload starts here
                t = type(payload)
                if t is str:
                    o = Core._text(self, b, o, payload)
                elif t is not bytes and t not in _ARGS:
                    raise _why("publish", topic, payload, props)
                else:
                    n = len(payload)
                    if o + n > len(b):
                        raise IndexError
                    b[o:o + n] = payload
                    o += n
            except IndexError:
                if a < 0:  # plain, without the new alias's 3 bytes, it may fit
                    a = 0
                    continue
                raise _why("size", self, b, payload, props, qos)
            n = o - _HEAD
            if n < 128:  # the fixed header inline: the common case kept fast
                s = _HEAD - 2
                b[s] = f
                b[_HEAD - 1] = n
            else:
                s = Core._seal(self, b, o, f)
            if not a:
                if o - s > self.server_max:
                    raise _why("server_max", o - s, self.server_max)  # [MQTT-3.2.2-15]
                break
            # The limits bound the plain packet: whether a message goes never
            # depends on which aliases the server knows [MQTT-3.2.2-15]
            n += (self.tn if a > 0 else 0) - 3
            k = len(props) if props else 0
            if k < 128 <= k + 3:
                n -= 1  # its property length takes a byte less
            if _HEAD + n > len(b):
                raise _why("size", self, b, payload, props, qos)
            if n + (2 if n < 128 else 3 if n < 16384 else 4) > self.server_max:
                raise _why("server_max", n + (2 if n < 128 else 3 if n < 16384 else 4),
                           self.server_max)  # [MQTT-3.2.2-15]
            if o - s <= self.server_max:
                break
            a = 0  # the new alias's 3 bytes would pass the server's limit: plain this time
        # a payload declared UTF-8 (Payload Format Indicator 1: props.build()
        # and liteprops.props() put it first) must be UTF-8 [U-3.3.2-b]
        if props and self.v == 5 and props[0] == 1 and props[1] and not utf8(b, q, o):
            raise _why("payload_utf8")
        if a < 0:
            self.alias(-a)  # the server learns it with this packet
        if not qos:
            # written here, not by _send(), and without restarting the
            # keep-alive's sending timer: both cost the hot path more than
            # the write; a timer that counts less than was sent can only
            # bring a PINGREQ early (docs/protocol-decisions.md)
            k = self.sock
            try:
                while s < o:
                    s += k.write(b, s, o - s)
            except OSError:
                Core.close(self)
                raise
            return 0
        if i < 0:  # its packet id comes when it takes a slot
            b[p] = b[p + 1] = 0
            return ob.defer(s, o - s)  # outbox.STORED, or FULL: the file has no room
        k = self.last_pid
        pid = Core._pid(self)
        b[p] = pid >> 8
        b[p + 1] = pid & 0xFF
        self.pid[i] = pid
        self.start[i] = s
        self.size[i] = o - s
        if ob and not ob.put(i):  # recorded before it is sent
            self.last_pid = k  # refused: no packet id used
            return FULL  # the file has no room
        if self._prep and self.v == 5:  # alias.Aliases counts its expiry down (prepare())
            self.t0[i] = self.clock()
        self.state[i] = _HOLD  # unacknowledged [MQTT-4.3.2-1] [MQTT-4.3.3-3]
        self.order[self.n] = i
        self.n += 1
        # within the server's quota it goes now; beyond it, it waits in its
        # slot (its flow is the newest) until an ack frees the quota [MQTT-4.9.0-2]
        if self.up and self.n <= self.quota:
            try:
                Core._go(self, i)
            except OSError:
                pass  # link closed; the message waits for the next CONNACK
        return pid

    def _pid(self):
        """A non-zero packet id that neither a flow in the table nor a
        SUBSCRIBE in flight uses [MQTT-2.2.1-3], wrapping at 65535; the scan
        ends since the table holds fewer flows than there are ids."""
        while True:
            pid = self.last_pid % 65535 + 1
            self.last_pid = pid
            if pid in self.sub_pids:
                continue
            for k in range(self.n):
                if self.pid[self.order[k]] == pid:
                    break
            else:
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

    def pending(self):
        """QoS 1/2 messages not yet acknowledged."""
        return self.n

    # ---- time ---------------------------------------------------------------

    def tick(self):
        """Keep the connection alive: send PINGREQ when due; returns the ms
        until tick() has work again (-1: never). A PINGRESP overdue by a
        keep-alive period means a half-open link: closed, OSError."""
        ka = self.ka_ms
        if not ka or not self.up:
            return -1
        now = self.clock()
        # PINGRESP due within half the keep-alive (1 s at least)
        due = ka // 2 if ka > 2000 else 1000
        if self.ping_t is not None:
            w = due - ticks_diff(now, self.ping_t)
            if w <= 0:
                Core.close(self)
                raise OSError(errno.ETIMEDOUT)  # no PINGRESP: a half-open link
            return w
        # PINGREQ after a keep-alive period with nothing sent (QoS 0 PUBLISH
        # aside) [MQTT-3.1.2-20] or nothing received (a client may ping at
        # any time, 3.12.4): a publisher that only sends QoS 0 still notices
        # a half-open link
        w = ka - ticks_diff(now, self.last_tx)
        k = ka - ticks_diff(now, self.last_rx)
        if k < w:
            w = k
        if w <= 0:
            Core._ack(self, 0xC0, 0)  # PINGREQ
            self.ping_t = now
            w = due
        return w

    # ---- receive ------------------------------------------------------------

    def packet(self, rl):
        """Handle the packet in rx: first byte `first`, rl body bytes."""
        first = self.first
        r = self.rx
        t = first >> 4
        if not self.up:  # the CONNACK: conn.py's, loaded for it and dropped again
            from . import conn
            try:
                refused = conn.connack(self, rl, Core)
            finally:
                _drop(conn)
            if refused:
                Core.close(self)
                raise ServerError(refused)  # [MQTT-4.13.2-1]
            return
        self.last_rx = self.clock()
        if first == 0x40 and rl == 2:  # a PUBACK without a reason: the common case
            code = 0
        else:
            if t == 3:
                return self.inbound(3, rl)
            if not t:
                raise self._fail(0x81)  # type 0 is no packet: malformed (5.0 2.1.2)
            if t < 4 or t == 8 or t == 10 or t == 12 or t == 15 or t == 14 and self.v == 4:
                # a packet only a server receives, a second CONNACK [MQTT-3.2.0-1], a
                # 3.1.1 DISCONNECT (only clients send it), AUTH (we never start it)
                raise self._fail(0x82)
            if first & 0x0F != (2 if t == 6 else 0):
                raise self._fail(0x81)  # [MQTT-2.1.3-1]
            if t == 13:  # PINGRESP
                if rl:
                    raise self._fail(0x81)  # a PINGRESP has no body (3.13)
                self.ping_t = None
                return
            if t == 14:  # server DISCONNECT [MQTT-4.13.2-1]
                Core.close(self)
                if rl < 2:
                    r[1] = 0  # no properties: an empty block where recv reads them
                raise ServerError(r[0] if rl else 0)
            if t > 7:
                return self.inbound(t, rl)  # SUBACK, UNSUBACK
            if rl < 2 or self.v == 4 and rl != 2:
                raise self._fail(0x81)
            code = r[2] if rl > 2 else 0
            # PUBACK/PUBREC [MQTT-3.4.2-1] [MQTT-3.5.2-1], PUBREL/PUBCOMP [MQTT-3.7.2-1]
            for c in b"\x00\x92" if t > 5 else b"\x00\x10\x80\x83\x87\x90\x91\x97\x99":
                if c == code:
                    break
            else:
                raise self._fail(0x81)
            if rl > 3:
                Core._props(self, 3, rl)
        p = r[0] << 8 | r[1]
        if not p:
            raise self._fail(0x82)  # packet id 0 [MQTT-2.2.1-3]
        if t == 6:
            return self.inbound(6, p)
        for k in range(self.n):
            i = self.order[k]
            if self.pid[i] == p:
                break
        else:
            if t == 5:
                Core._ack(self, 0x62, p, 0x92)  # unknown id: PUBREL 0x92
            return
        st = self.state[i]
        if t == 4 and st == _ACK or t == 7 and st == _COMP or t == 5 and st == _REC and code >= 0x80:
            # [MQTT-4.3.2-3] [MQTT-4.3.3-5]; a PUBREC error ends the flow, no resend [MQTT-4.4.0-2]
            self._free(i, code)
            k = 0 if self.n >= self.quota else self.n  # fewer flows than the quota: none held
            while k < self.n:  # a slot of the quota came free: the oldest held PUBLISH goes
                i = self.order[k]
                if self.state[i] == _HOLD:
                    if not (self._prep and self.prepare(i)):
                        return Core._go(self, i)
                    continue  # dropped
                k += 1
        elif t == 5 and _REC <= st <= _COMP:  # PUBREC, maybe repeated
            self.state[i] = _COMP  # never resend the PUBLISH [MQTT-4.3.3-6]
            if self.ob:
                self.ob.rec(i)
            Core._ack(self, 0x62, p)  # [MQTT-4.3.3-4]

    def inbound(self, t, n):
        """A PUBLISH (t 3, n body bytes in rx) or a checked PUBREL (t 6, n its
        packet id) from the server; t 2: a CONNACK accepted (n: session
        present). A publisher delivers nothing (a session that subscribed
        earlier may still send), but acknowledges as the flow requires
        [MQTT-4.5.0-2]. A SUBACK/UNSUBACK (t 9/11, n body bytes) is
        a protocol error here. recv.Receiver replaces this."""
        if t == 6:
            # PUBCOMP; we keep no record of inbound QoS 2 ids, so none is
            # found [MQTT-4.3.3-11] [MQTT-3.7.2-1]
            return Core._ack(self, 0x70, n, 0x92)
        if t != 3:
            if t == 2:
                return  # a new connection: no inbound state kept here
            raise self._fail(0x82)  # SUBACK, UNSUBACK: we never subscribed
        first = self.first
        r = self.rx
        qos = first >> 1 & 3
        o = 2 + (r[0] << 8 | r[1])
        # [MQTT-3.3.1-4] [MQTT-3.3.1-2]
        if qos == 3 or first & 8 and not qos or o + (2 if qos else 0) > n or not utf8(r, 2, o):
            raise self._fail(0x81)  # [MQTT-1.5.4-1]
        if qos > self.max_qos:
            # no subscription was granted above the server's Maximum QoS [U-3.3.4-e]
            raise self._fail(0x9B)
        p = r[o] << 8 | r[o + 1] if qos else 1
        k = 2
        while k < o and r[k] != 0x23 and r[k] != 0x2B:
            k += 1
        # no wildcard [MQTT-3.3.2-2], a non-zero id [MQTT-2.2.1-3]; no topic means
        # an alias, and we allow none (5.0 3.3.2.3.4)
        if k < o or o == 2 or not p:
            raise self._fail(0x82)
        if qos:
            Core._ack(self, 0x30 + (qos << 4), p)  # PUBACK / PUBREC

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
        if end + o != rl or not c and s > 7:
            raise self._fail(0x81)  # or not minimally encoded [MQTT-1.5.5-1]
        seen = 0
        while o < rl:
            p = r[o]
            o += 1
            k = _KINDS[p - 0x11] - 48 if 0x11 <= p <= 0x2A else 0
            if not k or not connack and p != 0x1F and p != 0x26:
                raise self._fail(0x81)  # unknown id, or not one for this packet (5.0 2.2.2.2)
            c = 1 << p - 0x11
            # Each property but User Property at most once; Authentication
            # Method/Data only in answer to ours, and we send none (5.0 3.2.2.3)
            if seen & c and p != 0x26 or p == 0x15 or p == 0x16:
                raise self._fail(0x82)
            seen |= c
            v = 0
            if k < 5:
                if o + k > rl:
                    raise self._fail(0x81)
                # a byte property is 0 or 1 (5.0 3.2.2.3.4, 3.2.2.3.5, ..)
                if k == 1 and r[o] > 1:
                    raise self._fail(0x82)
                while k:
                    v = v << 8 | r[o]
                    o += 1
                    k -= 1
                # Receive Maximum, Maximum Packet Size: not 0 (5.0 3.2.2.3.3, 3.2.2.3.6)
                if not v and (p == 0x21 or p == 0x27):
                    raise self._fail(0x82)
            else:
                for _ in range(k - 4):  # one string, or two: UTF-8 [MQTT-1.5.4-1]
                    if o + 2 > rl:
                        raise self._fail(0x81)
                    c = o + 2 + (r[o] << 8 | r[o + 1])
                    if c > rl or not utf8(r, o + 2, c):
                        raise self._fail(0x81)
                    o = c
            if p == 0x21:
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
            elif p == 0x22 and self.aliases:
                self.amax = v if v < self.aliases else self.aliases  # [MQTT-3.2.2-17]

    def _free(self, i, reason):
        """A flow ended: drop it from the table and tell the application."""
        p = self.pid[i]  # the outbox may fill slot i again
        self.state[i] = _FREE
        k = 0
        while self.order[k] != i:
            k += 1
        self.n -= 1
        while k < self.n:
            self.order[k] = self.order[k + 1]
            k += 1
        if self.ob:
            self.ob.done(i)
        if self.on_done:
            self._done(p, reason)

    def _done(self, pid, reason):
        """Call on_done. A driver that holds a callback's exception until its
        packet is handled (recv.Receiver) replaces this; one with waiters of
        its own (the asyncio client) replaces _free()."""
        try:
            self.on_done(pid, reason)
        except Exception as e:
            _why("on_done", e, self)  # raised, or printed: callback_errors

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
            Core.close(self)
            raise
        self.last_tx = self.clock()

    def _fail(self, reason):
        """A protocol error from the server: DISCONNECT with the reason on 5.0
        [U-4.13.1-a], close (3.1.1 just closes [MQTT-4.8.0-1]); returns the
        MQTTError to raise."""
        if self.v == 5:
            Core.disconnect(self, reason)
        else:
            Core.close(self)
        e = MQTTError(reason)
        e.reason = reason
        return e
