# frugalmqtt.lite: the sans-I/O protocol core every profile runs on (the
# class `core`), and the publish-only profile's blocking driver over it
# (`Publisher`): one module, as a second module for the core cost the
# publish-only device about 0.8 KB of heap (its object, globals dict and
# names, and the holes loading another .mpy leaves).
#
# The core owns the outbound flow and the connection: packet ids, the fixed
# in-flight table and its order, the server's quota (Receive Maximum),
# resend on CONNACK, ack handling, the CONNACK limits, keep-alive deadlines,
# protocol errors, each flow-state transition in one place. It writes
# (acks, PINGREQ, PUBLISH) on any stream with write(buf, off, n) -> k and
# close(), but never reads: a driver frames each packet from the server
# into `data` (its first byte in state[_T]) and hands it to input(n). Drivers:
# Publisher here, client.MQTTClient, aclient.AMQTTClient, session.Session (none,
# for a driver of your own). What runs once is in modules loaded for it
# that drop themselves: construction (lhello.py: the arguments, checks and
# the CONNECT built once) and each connection (lconn.py: the stream, the
# CONNECT, the CONNACK and the session's resume).
#
# Written for RAM (docs/internals.md, "Where a profile's heap goes"): on a
# device every function, name and string constant here is held in the
# heap. So the numbers are in one list, state[...] (the _N ... indices
# below; the modules that read them repeat the indices, and
# tests/test_device_imports.py checks every copy), the in-flight table and
# the buffer for QoS 0 and control packets are one bytearray (buf), the
# classes are made by type() from a dict literal (no class body to run, the
# dict made at its size), the hooks the other profiles plug in are state
# slots and methods of names MicroPython has built in (a new name costs a
# qstr, and the publish-only run holds 54 of the 60 its first two qstr pools
# take: the 61st opens a pool of about 1 KB), and errors carry only their
# reason code or an errno (their words are in why.py, loaded to raise).
try:
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython
    from .time import const, ticks_ms, ticks_diff

# state[...]
_N = const(0)  # flows in the table
_QUOTA = const(1)  # the server's Receive Maximum (capped at slots); 0: no CONNACK yet
_PID = const(2)  # the last packet id
_KA = const(3)  # keep-alive, ms
_RX = const(4)  # clock() of the last packet in
_TX = const(5)  # ... and out
_SMAX = const(6)  # the server's Maximum Packet Size
_MQOS = const(7)  # the server's Maximum QoS
_RET = const(8)  # retain available
_PING = const(9)  # clock() when the PINGREQ due a PINGRESP went, -1: none
_V = const(10)  # protocol version, 4 or 5
_CLEAN = const(11)
_TMO = const(12)  # timeout_ms
_PORT = const(13)
_T = const(14)  # the first byte of the packet in data (the driver's framing puts it)
_SP = const(15)  # the last CONNACK's session present
_STRIDE = const(16)  # bytes per slot in buf
_TXO = const(17)  # where the buffer for QoS 0 and control packets starts in buf
_HEAD = const(5)  # spare bytes before each body for its fixed header
_M = const(6)  # meta bytes before each image
_ACK = const(1)  # QoS 1 PUBLISH sent, waiting for PUBACK
_REC = const(2)  # QoS 2 PUBLISH sent, waiting for PUBREC
_COMP = const(3)  # PUBREL sent, waiting for PUBCOMP
_HOLD = const(4)  # not sent on this connection yet
SESSION_LOST = const(-3)  # on_done reason: server lost a QoS 2 flow past PUBREC
_ETIMEDOUT = const(110)
_ENOTCONN = const(107)
_ECONNRESET = const(104)
_FULL = const(-1)  # publish(): no slot (timeout_ms None), or the outbox's file is full
_F = const(18)  # state[_F]: the hooks a profile turned on (_FRECV ...)
_OB = const(19)  # an outbox.Outbox persisting the table, 0: none
_AMAX = const(20)  # outbound aliases this connection may use (alias.Aliases)
_SUBS = const(21)  # packet ids of SUBSCRIBE/UNSUBSCRIBE in flight (recv.Receiver), 0: none
_EARLY = const(22)  # flows at the front of order sent before the CONNACK (wake.py)
_FRECV = const(1)  # recv(t, n) gets inbound PUBLISH, PUBREL, SUBACK, UNSUBACK, CONNACK
_AL = const(23)  # the outbound aliases (alias.py), 0: none: get(topic), push(k), update(i), start(i)
_ALN = const(24)  # ... how many it keeps
_OVER = const(25)  # oversize(client, rl), the driver's for a packet over data, 0: refused
_ORD = const(26)  # the slot numbers, oldest flow first (a bytearray)
_HELLO = const(27)  # the CONNECT, built once (lhello.py): 5 bytes for its fixed header, then the body
_CLOCK = const(28)  # clock(): ms, ticks_ms unless a test's
_SERVER = const(29)  # the server's host name
_SSL = const(30)  # an SSLContext, or None
# (hooks in state slots and methods of static names: a new name would cost a qstr)


def why(key, *a):  # (named as the module: no name of its own)
    """The words of an error, in why.py, imported only when one is raised
    or printed; as __str__ of the exceptions, their code and its name."""
    from . import why
    return why.why(key, a)


# A packet that breaks the protocol (args[0] and .reason: the reason code
# sent in the DISCONNECT); the server refused the connection or ended it
# (args[0]: its reason code). Made by type(): no class body to load.
MQTTError = type("MQTTError", (Exception,), {"__str__": why})
ServerError = type("ServerError", (Exception,), {"__str__": why})


def text(buf, start, end):
    """(named text, a static qstr: _utf8 or utf8 would cost the run a name)
    True when buf[start:end] is well-formed UTF-8 without U+0000 [MQTT-1.5.4-1]
    [MQTT-1.5.4-2]; U+FEFF is valid and kept [MQTT-1.5.4-3]. No allocation."""
    while start < end:
        c = buf[start]
        start += 1
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
            hi = 0x9F  # surrogates
        elif c == 0xF0:
            lo = 0x90  # overlong
        elif c == 0xF4:
            hi = 0x8F  # above U+10FFFF
        if start + n > end:
            return False
        while n:
            c = buf[start]
            if c < lo or c > hi:
                return False
            lo = 0x80
            hi = 0xBF
            start += 1
            n -= 1
    return True


def core():  # (named as the class it makes: no name of its own)
    """The core class (a driver subclasses it), made by type() from a dict
    literal: the dict is made at its size at once."""

    def parse(self, n):
        """The 5.0 property block of the packet in data[:n]: a CONNACK's
        (state[_QUOTA] 0: at data[2:n]; the limits that bind us go in state;
        returns the quota: slots, or the server's Receive Maximum when less)
        or an ack's (at data[3:n]: a reason string and user properties only,
        5.0 2.2.2.2). One walker for both, here: lconn.py (lconn.recv calls
        it) is 0.4 KB smaller, and its code is what a connect must find
        room for in a heap the client has filled (with the walker in lconn,
        one function or two, in any order, no heap under 15744 B passed). A method
        of a static name (parse): no new qstr, and no global of lite (one
        more there, and every builtin publish() looks up probes longer:
        measured 0.7k more instructions a QoS 0 publish)."""
        a = self.state
        r = self.data
        q = len(a[_ORD])
        o = 3 if a[_QUOTA] else 2
        k = 0
        s = 0
        while True:  # its length, a Variable Byte Integer
            if o >= n or s == 28:
                raise MQTTError(0x81)
            c = r[o]
            o += 1
            k |= (c & 0x7F) << s
            s += 7
            if c < 128:
                break
        if k + o != n or not c and s > 7:
            raise MQTTError(0x81)  # or not minimally encoded [MQTT-1.5.5-1]
        s = 0  # the ids seen
        while o < n:
            p = r[o]
            o += 1
            # the size of the value: a 1, 2 or 4 byte integer, 5 a string or
            # binary data, 6 a string pair, 0 none (an unknown id)
            k = b"45205500050500502201164111"[p - 0x11] - 48 if 0x11 <= p <= 0x2A else 0
            if not k or a[_QUOTA] and p != 0x1F and p != 0x26:
                raise MQTTError(0x81)  # unknown id, or not one for an ack (5.0 2.2.2.2)
            c = 1 << p - 0x11
            # Each property but User Property at most once; Authentication
            # Method/Data only in answer to ours, and we send none (5.0 3.2.2.3)
            if s & c and p != 0x26 or p == 0x15 or p == 0x16:
                raise MQTTError(0x82)
            s |= c
            c = 0
            if k < 5:
                if o + k > n:
                    raise MQTTError(0x81)
                if k == 1 and r[o] > 1:
                    raise MQTTError(0x82)  # a byte property is 0 or 1 (5.0 3.2.2.3.4, ..)
                while k:
                    c = c << 8 | r[o]
                    o += 1
                    k -= 1
                if not c and (p == 0x21 or p == 0x27):
                    raise MQTTError(0x82)  # not 0 (5.0 3.2.2.3.3, 3.2.2.3.6)
            else:
                while k > 4:  # one string, or two: UTF-8 [MQTT-1.5.4-1]
                    if o + 2 > n:
                        raise MQTTError(0x81)
                    c = o + 2 + (r[o] << 8 | r[o + 1])
                    if c > n or not text(r, o + 2, c):
                        raise MQTTError(0x81)
                    o = c
                    k -= 1
            if p == 0x21:
                if c < q:
                    q = c  # [MQTT-3.3.4-7] [MQTT-4.9.0-1]
            elif p == 0x27:
                a[_SMAX] = c  # [MQTT-3.2.2-15]
            elif p == 0x24:
                a[_MQOS] = c  # [MQTT-3.2.2-11]
            elif p == 0x25:
                a[_RET] = c  # [MQTT-3.2.2-14]
            elif p == 0x22:
                a[_AMAX] = c if c < a[_ALN] else a[_ALN]  # [MQTT-3.2.2-17]
            elif p == 0x13:
                a[_KA] = c * 1000  # Server Keep Alive replaces ours [MQTT-3.2.2-21]
        return q

    def __init__(self, *args, **t):
        # (its arguments, checks, settings and the CONNECT built once in
        # lhello.py, which drops itself when done: the signature's defaults
        # and the code are not held; star names: static qstrs)
        from . import lhello
        b = lhello.encode(self, why, *args, **t)  # (why: lhello imports nothing of lite)
        del lhello
        # Then the buffers, with lhello.py's code garbage. (Collecting it
        # first puts them lower in the heap but leaves small holes below,
        # which every publish's heap frame then scans: measured 0.4k more
        # instructions a QoS 0 publish, no smaller heap.)
        a = self.state
        # the in-flight table and the buffer for QoS 0 and control packets
        # (their sizes: lhello.py's, in state)
        self.buf = bytearray(a[_T])
        a[_ORD] = bytearray(a[_ORD])  # slot numbers, oldest flow first
        self.data = bytearray(a[_HELLO])
        a[_T] = 0
        a[_HELLO] = bytearray(b)

    def disconnect(self, reason=0):
        """Send DISCONNECT and close; the in-flight table is kept."""
        if self.sock:
            b = self.buf
            o = self.state[_TXO]
            b[o] = 0xE0
            b[o + 1] = 1 if self.state[_V] == 5 and reason else 0
            b[o + 2] = reason
            try:
                self.send(o, 2 + b[o + 1], 0, b)
            except OSError:
                pass
        core.close(self)  # [MQTT-3.14.4-1] [MQTT-3.14.4-2]

    def close(self):
        """Close the stream without DISCONNECT; the session is kept."""
        if self.sock:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self.state[_QUOTA] = 0

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """Send a PUBLISH; returns the packet id (0 at QoS 0). With every slot
        taken it waits up to timeout_ms (-1: forever) for an ack in the
        driver's poll(), OSError (ETIMEDOUT) if none came; timeout_ms None:
        FULL at once (a driver that waits its own way). Beyond the server's
        Receive Maximum a stored message waits in its slot until an ack frees
        the quota; once stored it is never lost (OSError means it was not
        stored). With an outbox (state[_OB]) a message that finds no slot goes
        to its file (its push()); with outbound aliases (state[_AMAX]) the
        topic may go as an alias (state[_AL].get())."""
        a = self.state
        T = type  # (the builtins used more than once, looked up once: each lookup
        L = len  # misses in this module's globals first)
        if not qos and self.sock is None:
            raise OSError(_ENOTCONN)
        if qos and (qos < 0 or qos > a[_MQOS]):
            raise why("qos", qos, a[_MQOS])  # [MQTT-3.2.2-11]
        if retain and not a[_RET]:
            raise why("retain")  # [MQTT-3.2.2-14]
        b = self.buf
        d = a[_ORD]
        st = a[_STRIDE]
        ob = a[_OB]  # an outbox.Outbox persisting the table, 0: none
        al = 0  # the topic's alias: > 0 the server knows it, < 0 it goes with the topic
        if qos:
            while a[_N] >= L(d) and not ob:
                if timeout_ms is None:
                    return _FULL
                if not self.poll(timeout_ms) and timeout_ms >= 0:
                    raise OSError(_ETIMEDOUT)  # in-flight window full
            if a[_N] >= L(d) or ob and ob.backlog:
                b = ob.buf  # no slot (or older ones wait): the outbox's file keeps it
                s = 0
                e = L(b)
            else:
                s = 0
                while b[s]:
                    s += st
                e = s + st
        else:
            s = a[_TXO]
            e = L(b)
        # An alias only for a QoS 1/2 message that goes now (a held one must
        # not lean on an alias sent after it), none with an outbox; asked
        # for once the topic is checked (an invalid one takes none)
        g = a[_AMAX] and (not qos or a[_N] < a[_QUOTA] and not ob)
        h = s + _M + _HEAD  # the body; the fixed header goes right before it
        x = T(topic)  # (no tuple to test it against: one would be built, allocated)
        new = topic is not self.topic or x is bytearray
        if new and x is not str and x is not bytes and x is not bytearray and \
                x is not memoryview or props and T(props) is not bytes:
            raise why("publish", topic, payload, props)
        while True:  # a second round only plain: the new alias's packet did not fit
            # Two rounds: the topic (then the packet id's room and the
            # properties), the payload.
            p = 0  # where the packet id goes, once the topic is in
            o = h + 2
            x = topic
            try:
                while True:
                    y = T(x)
                    if y is bytes or y is bytearray or y is memoryview:  # (the common case first)
                        n = L(x)
                        if o + n > e:
                            raise IndexError
                        b[o:o + n] = x
                        o += n
                    elif y is str:  # UTF-8 encoded by hand: no allocation
                        for c in x:
                            c = ord(c)
                            k = 0 if c < 0x80 else 1 if c < 0x800 else 2 if c < 0x10000 else 3
                            if o + k >= e:
                                raise IndexError
                            b[o] = (0, 0xC0, 0xE0, 0xF0)[k] | c >> 6 * k
                            o += 1
                            while k:
                                k -= 1
                                b[o] = 0x80 | c >> 6 * k & 0x3F
                                o += 1
                    else:  # a payload of another type (the topic's was checked above)
                        raise why("publish", topic, payload, props)
                    if p:
                        break  # the payload is in
                    n = o - h - 2
                    if new:
                        k = h + 2
                        while k < o and b[k] != 0x23 and b[k] != 0x2B:
                            k += 1
                        # not empty [MQTT-4.7.3-1], no wildcard [MQTT-3.3.2-2], UTF-8
                        # without U+0000 or a surrogate [MQTT-1.5.4-1] [MQTT-1.5.4-2]
                        if k < o or not n or not text(b, h + 2, o):
                            raise why("topic", n)
                        self.topic = topic
                    if g:  # (the first round only: a second one goes plain)
                        g = 0
                        al = a[_AL].get(topic)
                    b[h] = n >> 8
                    b[h + 1] = n & 0xFF
                    f = h  # where the body starts
                    if al > 0:  # the server knows the alias: an empty topic [MQTT-3.3.2-12],
                        # 3 bytes before the topic's end: the packet ends where
                        # the plain one would, the buffer bounds the plain one
                        o -= 3
                        f = o - 2
                        b[f] = b[f + 1] = 0
                    p = o
                    if qos:
                        o += 2
                    if a[_V] == 5:
                        n = L(props) if props else 0
                        k = n + 3 if al else n
                        if k < 128:
                            b[o] = k
                            o += 1
                        else:
                            b[o] = k & 0x7F | 0x80
                            b[o + 1] = k >> 7
                            o += 2
                        if al:  # Topic Alias, first; never 0 nor above the server's maximum [MQTT-3.3.2-8]
                            k = -al if al < 0 else al
                            b[o] = 0x23
                            b[o + 1] = k >> 8
                            b[o + 2] = k & 0xFF
                            o += 3
                        if n:
                            if o + n > e:
                                raise IndexError
                            b[o:o + n] = props
                            o += n
                    q = o  # the payload starts here
                    x = payload
            except IndexError:
                if al < 0:
                    al = 0  # plain, without the new alias's 3 bytes, it may fit
                    continue
                if new and not p:
                    raise why("topic", e - h - 2)
                raise why("payload", self, topic, payload, props, qos, e - s - _M)  # (why.lsize)
            # The server's limit bounds the plain packet: whether a message
            # goes never depends on which aliases it knows [MQTT-3.2.2-15]
            n = o - h + (3 if al > 0 else 0)
            if al:
                k = L(props) if props else 0
                n -= 4 if k < 128 <= k + 3 else 3
            n += 2 if n < 128 else 3 if n < 16384 else 4
            if n > a[_SMAX]:
                raise why("max_packet", n, a[_SMAX])  # over the server's [MQTT-3.2.2-15]
            n = o - f
            t = f - (2 if n < 128 else 3 if n < 16384 else 4)  # where the packet starts
            if al and (o - t > a[_SMAX] or t - s > 255 or t - s < _M):
                # the new alias's 3 bytes pass the limit (or the start the
                # meta byte; a known alias's start before a topic under 3
                # bytes, the meta bytes)
                al = 0
                continue
            break
        k = t
        b[k] = 0x30 | qos << 1 | (1 if retain else 0)
        while n > 127:
            k += 1
            b[k] = n & 0x7F | 0x80
            n >>= 7
        b[k + 1] = n
        # a payload declared UTF-8 (Payload Format Indicator 1, first) must be UTF-8 [U-3.3.2-b]
        if props and a[_V] == 5 and props[0] == 1 and props[1] and not text(b, q, o):
            raise why("payload_utf8")
        if al < 0:
            a[_AL].push(-al)  # the server learns it with this packet
        if not qos:
            # written here, not by send(): a call costs the hot path more
            # than the write (and the keep-alive's sending timer counts QoS 1/2)
            k = self.sock
            try:
                while t < o:
                    t += k.write(b, t, o - t)
            except OSError:
                core.close(self)
                raise
            return 0
        if b is not self.buf:  # its packet id comes when it takes a slot
            b[p] = b[p + 1] = 0
            return ob.push(t, o - t)  # outbox.STORED, or FULL: the file has no room
        x = a[_SUBS]  # ids of SUBSCRIBEs/UNSUBSCRIBEs in flight (recv.Receiver), 0: none
        f = a[_PID]
        while True:  # a packet id no flow in the table uses [MQTT-2.2.1-3]
            n = a[_PID] % 65535 + 1
            a[_PID] = n
            if x and n in x:
                continue
            for k in range(a[_N]):
                i = d[k] * st
                if b[i + 4] << 8 | b[i + 5] == n:
                    break
            else:
                break
        b[p] = b[s + 4] = n >> 8
        b[p + 1] = b[s + 5] = n & 0xFF
        b[s + 1] = t - s
        k = o - t
        b[s + 2] = k >> 8
        b[s + 3] = k & 0xFF
        i = s // st
        if ob and not ob.put(i):  # recorded before it is sent
            a[_PID] = f  # refused: no packet id used
            return _FULL  # the file has no room
        if a[_AL] and a[_V] == 5:
            a[_AL].start(i)  # alias.py counts the expiry down (update())
        b[s] = _HOLD  # unacknowledged [MQTT-4.3.2-1] [MQTT-4.3.3-3]
        d[a[_N]] = i
        a[_N] += 1
        # within the server's quota it goes now; beyond it, it waits [MQTT-4.9.0-2]
        if a[_N] <= a[_QUOTA]:
            b[s] = _REC if qos == 2 else _ACK
            try:
                self.send(t, k, 0, b)
            except OSError:
                pass  # link closed; the message waits for the next CONNACK
            finally:
                b[t] |= 8  # any later sending is a resend: DUP=1 [MQTT-3.3.1-1]
        return n

    def pending(self):
        """QoS 1/2 messages not yet acknowledged."""
        return self.state[_N]

    def tick(self):
        """Keep the connection alive: send PINGREQ when due; returns the ms
        until tick() has work again (-1: never). A PINGRESP overdue by half
        a keep-alive period means a half-open link: closed, OSError."""
        a = self.state
        ka = a[_KA]
        if not ka or not a[_QUOTA]:
            return -1
        now = a[_CLOCK]()
        due = ka // 2 if ka > 2000 else 1000
        if a[_PING] >= 0:
            w = due - ticks_diff(now, a[_PING])
            if w <= 0:
                core.close(self)
                raise OSError(_ETIMEDOUT)  # no PINGRESP: a half-open link
            return w
        # PINGREQ after a keep-alive period with nothing sent (QoS 0 aside)
        # [MQTT-3.1.2-20] or nothing received
        w = ka - ticks_diff(now, a[_TX])
        k = ka - ticks_diff(now, a[_RX])
        if k < w:
            w = k
        if w <= 0:
            self.send(0xC0, 0)  # PINGREQ
            a[_PING] = now
            w = due
        return w

    def input(self, n):
        """Handle the packet the driver framed: first byte state[_T], n body
        bytes in data. A packet breaking the protocol: DISCONNECT with the
        reason on 5.0 [U-4.13.1-a], close (3.1.1 just closes [MQTT-4.8.0-1]),
        MQTTError raised."""
        rl = n  # (a parameter's name is a qstr: n is a static one)
        a = self.state
        r = self.data
        v = a[_V]
        first = a[_T]
        t = first >> 4
        a[_RX] = a[_CLOCK]()
        try:
            if not a[_QUOTA]:  # the CONNACK: lconn.py's, loaded for it, dropped again
                from . import lconn
                code = lconn.recv(self, rl, MQTTError)
                if code:  # refused [MQTT-4.13.2-1]
                    core.close(self)
                    raise ServerError(code)
                return
            code = 0
            if first != 0x40 or rl != 2:  # (a PUBACK without a reason: the common case)
                if t == 3:
                    if a[_F] & _FRECV:
                        return self.recv(3, rl)  # recv.Receiver delivers it
                    # a PUBLISH: a publisher delivers nothing, but acknowledges [MQTT-4.5.0-2]
                    q = first >> 1 & 3
                    o = 2 + (r[0] << 8 | r[1])
                    # [MQTT-3.3.1-4] [MQTT-3.3.1-2] [MQTT-1.5.4-1]
                    if q == 3 or first & 8 and not q or o + (2 if q else 0) > rl or \
                            not text(r, 2, o):
                        raise MQTTError(0x81)
                    if q > a[_MQOS]:
                        raise MQTTError(0x9B)  # no subscription above it [U-3.3.4-e]
                    p = r[o] << 8 | r[o + 1] if q else 1
                    k = 2
                    while k < o and r[k] != 0x23 and r[k] != 0x2B:
                        k += 1
                    # no wildcard [MQTT-3.3.2-2], a non-zero id [MQTT-2.2.1-3]; no
                    # topic: an alias, and we allow none (5.0 3.3.2.3.4)
                    if k < o or o == 2 or not p:
                        raise MQTTError(0x82)
                    if q:
                        self.send(0x30 + (q << 4), p)  # PUBACK / PUBREC
                    return
                if not t:
                    raise MQTTError(0x81)  # type 0 is no packet (5.0 2.1.2)
                if t < 4 or t == 8 or t == 10 or t == 12 or t == 15 or t == 14 and v == 4:
                    # a packet only a server receives, a second CONNACK [MQTT-3.2.0-1],
                    # a 3.1.1 DISCONNECT, AUTH (we never start it)
                    raise MQTTError(0x82)
                if first & 0x0F != (2 if t == 6 else 0):
                    raise MQTTError(0x81)  # [MQTT-2.1.3-1]
                if t == 13:  # PINGRESP
                    if rl:
                        raise MQTTError(0x81)  # a PINGRESP has no body (3.13)
                    a[_PING] = -1
                    return
                if t == 14:  # server DISCONNECT [MQTT-4.13.2-1]
                    core.close(self)
                    raise ServerError(r[0] if rl else 0)
                if t > 7:
                    if a[_F] & _FRECV:
                        return self.recv(t, rl)  # SUBACK, UNSUBACK
                    raise MQTTError(0x82)  # SUBACK, UNSUBACK: we never subscribed
                if rl < 2 or v == 4 and rl != 2:
                    raise MQTTError(0x81)
                code = r[2] if rl > 2 else 0
                # PUBACK/PUBREC [MQTT-3.4.2-1] [MQTT-3.5.2-1], PUBREL/PUBCOMP [MQTT-3.7.2-1]
                for c in b"\x00\x92" if t > 5 else b"\x00\x10\x80\x83\x87\x90\x91\x97\x99":
                    if c == code:
                        break
                else:
                    raise MQTTError(0x81)
                if rl > 3:  # the property block (reason string, user properties)
                    self.parse(rl)
            p = r[0] << 8 | r[1]
            if not p:
                raise MQTTError(0x82)  # packet id 0 [MQTT-2.2.1-3]
            if t == 6:
                if a[_F] & _FRECV:
                    return self.recv(6, p)
                # a PUBREL: we keep no record of inbound QoS 2 ids, so none
                # is found: PUBCOMP 0x92 [MQTT-4.3.3-11] [MQTT-3.7.2-1]
                self.send(0x70, p, 0x92)
                return
            b = self.buf
            d = a[_ORD]
            st = a[_STRIDE]
            for k in range(a[_N]):
                s = d[k] * st
                if b[s + 4] << 8 | b[s + 5] == p:
                    break
            else:
                if t == 5:
                    self.send(0x62, p, 0x92)  # unknown id: PUBREL 0x92
                return
            c = b[s]
            if t == 4 and c == _ACK or t == 7 and c == _COMP or \
                    t == 5 and c == _REC and code >= 0x80:
                # [MQTT-4.3.2-3] [MQTT-4.3.3-5]; a PUBREC error ends the flow,
                # no resend [MQTT-4.4.0-2]. The slot is free again.
                self.done(d[k], code)
                # a slot of the quota came free: the oldest held PUBLISH goes
                k = 0 if a[_N] >= a[_QUOTA] else a[_N]  # fewer flows than the quota: none held
                while k < a[_N]:
                    s = d[k] * st
                    if b[s] == _HOLD:
                        if a[_AL] and a[_AL].update(d[k]):
                            continue  # dropped (expired): its flow ended
                        o = s + b[s + 1]
                        b[s] = _REC if b[o] & 4 else _ACK
                        try:
                            self.send(o, b[s + 2] << 8 | b[s + 3], 0, b)
                        finally:
                            b[o] |= 8  # a resend from now on: DUP=1 [MQTT-3.3.1-1]
                        break
                    k += 1
            elif t == 5 and _REC <= c <= _COMP:  # PUBREC, maybe repeated
                b[s] = _COMP  # never resend the PUBLISH [MQTT-4.3.3-6]
                if a[_OB]:
                    a[_OB].update(d[k])  # the outbox records it
                self.send(0x62, p)  # [MQTT-4.3.3-4]
        except MQTTError as e:
            e.reason = e.args[0]
            if v == 5:
                core.disconnect(self, e.reason)
            else:
                core.close(self)
            raise

    def done(self, i, reason):
        """Slot i's flow ended (reason: its ack's reason code, SESSION_LOST,
        alias.EXPIRED): the slot is free again, the outbox (state[_OB]) and
        the application (on_done) are told. A driver with waiters of its
        own (the asyncio client) extends this; a driver that holds a
        callback's exception until its packet is handled does it in
        why.on_done (callback_errors)."""
        a = self.state
        d = a[_ORD]
        b = self.buf
        s = i * a[_STRIDE]
        b[s] = 0
        p = b[s + 4] << 8 | b[s + 5]  # (the outbox may fill slot i again)
        k = 0
        while d[k] != i:
            k += 1
        a[_N] -= 1
        while k < a[_N]:
            d[k] = d[k + 1]
            k += 1
        if a[_OB]:
            a[_OB].done(i)
        if self.on_done:
            try:
                self.on_done(p, reason)
            except Exception as e:
                why("on_done", e, self)  # raised, or printed: callback_errors

    def send(self, t, n, reason=0, buf=None):
        """Send buf[t:t + n]; without buf, a packet of a two-byte fixed
        header: PINGREQ (t 0xC0), PUBACK/PUBREC/PUBREL/PUBCOMP (first byte
        t, packet id n, a reason code on 5.0)."""
        if buf is None:
            buf = self.buf
            o = self.state[_TXO]
            buf[o] = t
            k = 0 if t == 0xC0 else 3 if reason and self.state[_V] == 5 else 2
            buf[o + 1] = k
            buf[o + 2] = n >> 8
            buf[o + 3] = n & 0xFF
            buf[o + 4] = reason
            t = o
            n = 2 + k
        s = self.sock
        if s is None:
            raise OSError(_ENOTCONN)
        try:
            n += t
            while t < n:
                t += s.write(buf, t, n - t)
        except OSError:
            core.close(self)
            raise
        a = self.state
        a[_TX] = a[_CLOCK]()

    return type("core", (), {
        "on_done": None,  # on_done(pid, reason) when a QoS 1/2 flow ends
        "__init__": __init__,
        "disconnect": disconnect,
        "close": close,
        "publish": publish,
        "pending": pending,
        "tick": tick,
        "input": input,
        "send": send,
        "done": done,
        "parse": parse,
    })


core = core()


def Publisher():  # (named as the class it makes: no name of its own)
    """The Publisher class, made by type() from a dict literal."""

    def connect(self, clean=None, sock=None, timeout_ms=0):
        """Open the connection, then resend the table: returns session present.
        Raises ServerError when refused, OSError on network trouble. sock: an
        open stream to use instead of a new TCP/TLS socket (a test peer).
        timeout_ms: this attempt's bound, connect to CONNACK (0: the client's)."""
        from . import lconn  # it drops itself after the CONNACK
        return lconn.connect(self, clean, sock, timeout_ms, ticks_ms, ticks_diff)

    def flush(self, timeout_ms=-1):
        """Wait until every QoS 1/2 flow is acknowledged; False on timeout."""
        t0 = ticks_ms()
        while self.state[_N]:
            left = -1 if timeout_ms < 0 else timeout_ms - ticks_diff(ticks_ms(), t0)
            if timeout_ms >= 0 and left <= 0:
                return False
            self.poll(left)
        return True

    def poll(self, timeout_ms=0):
        """Handle what the server sent, waiting up to timeout_ms (-1: until a
        packet) for the first packet; send PINGREQ when due. True if a packet
        was handled. Raises OSError when the link is lost (the table is
        kept), MQTTError when the server broke the protocol. The framing is
        here, the handling in the core (input())."""
        if self.sock is None:
            raise OSError(_ENOTCONN)
        a = self.state
        r = self.data
        got = False
        while True:
            t = timeout_ms
            if not got:  # (draining what came, t 0: keep-alive waits for the next call)
                w = self.tick()
                if w >= 0 and (t < 0 or w < t):
                    t = w
            for _ in self.poller.ipoll(t):
                break
            else:
                if t == timeout_ms:
                    return got
                if timeout_ms > 0:
                    timeout_ms -= t
                continue
            got = True
            timeout_ms = 0
            try:
                # Frame one packet: fill r[k:n], the first two bytes, more
                # length bytes into r[1], then the body
                k = 0
                n = 2
                s = 0  # 7 per length byte read; -1 once reading the body
                rl = 0
                while True:
                    while k < n:
                        # a memoryview only for a packet split across reads
                        c = self.sock.readinto(memoryview(r)[k:n] if k else r, n - k)
                        if not c:
                            self.close()
                            raise OSError(_ECONNRESET)  # the server closed the connection
                        k += c
                    if s < 0:
                        break
                    if not s:
                        first = r[0]
                    c = r[1]
                    rl |= (c & 0x7F) << s
                    s += 7
                    if c & 0x80:
                        if s == 28:
                            raise MQTTError(0x81)  # a Variable Byte Integer has 4 bytes at most
                        k = 1
                        continue
                    if rl + 1 + s // 7 > len(r):
                        if a[_OVER]:  # the full client drains it (drain.py)
                            rl = a[_OVER](self, rl)  # (what it put in data for input())
                            break
                        # over our Maximum Packet Size, refused before it is read [MQTT-3.1.2-24]
                        raise MQTTError(0x95)
                    s = -1
                    k = 0
                    n = rl
            except MQTTError as e:
                # a malformed or oversize packet: DISCONNECT with the reason
                # on 5.0 [U-4.13.1-a], close (3.1.1 just closes [MQTT-4.8.0-1])
                e.reason = e.args[0]
                if a[_V] == 5:
                    self.disconnect(e.reason)
                else:
                    self.close()
                raise
            a[_T] = first
            self.input(rl)

    def __getattr__(self, name):
        # lite's documented attributes, read from state[] (by their index
        # there) when asked for: an attribute or a name each would cost RAM
        a = self.state
        if name == "connected":
            return self.sock is not None
        k = ("- quota - ka_ms - - server_max max_qos retain_ok - v clean timeout port - sp "
             "- - - - - - - - - - - - - server ssl slots keepalive callback_errors raise").split()
        if name not in k or name == k[34]:
            raise AttributeError(name)
        if name == k[33]:
            return k[34]  # callback_errors' default (why.on_done reads it so; a str made
            # from the list's: a literal of its own would be a new qstr)
        k = k.index(name)
        if k > 30:
            return len(a[_ORD]) if k == 31 else a[_HELLO][13] << 8 | a[_HELLO][14]
        return a[k] == 1 if k == _RET else a[k]

    return type("Publisher", (core,), {
        "__getattr__": __getattr__,
        "connect": connect,
        "flush": flush,
        "poll": poll,
    })


# A publish-only MQTT client. slots: QoS 1/2 messages in flight (each keeps
# its encoded PUBLISH, max_packet bytes, for a resend); rx_size: the largest
# packet accepted from the server (advertised on 5.0).
Publisher = Publisher()
