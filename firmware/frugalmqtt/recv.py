# frugalmqtt.recv: receiving, for the profiles that subscribe. A mixin over
# lite.core (MicroPython looks methods up depth first, so mixins do not
# derive from the core; the client class lists them before its driver):
# inbound PUBLISH with its properties, QoS 2 receiving, inbound topic
# aliases, SUBSCRIBE/UNSUBSCRIBE and their acks. The core hands it what it
# receives through its recv(t, n) hook (state[_F] & _FRECV, set by
# rhook()) and skips the ids of SUBSCRIBEs in flight (state[_SUBS]). Its
# tables are sized once, in rinit(); dispatching a message allocates nothing.
import errno
from .lite import core, Publisher, MQTTError, text as utf8, why as _why
from .propview import Props

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_HEAD = const(5)  # lite._HEAD: bytes before each image for its fixed header
_M = const(6)  # lite._M: meta bytes before each image
FULL = const(-1)  # lite._FULL: subscribe() finds no place for its ack
# lite.py's state[...] indices
_N = const(0)
_QUOTA = const(1)
_PID = const(2)
_AMAX = const(20)
_EARLY = const(22)
_ALN = const(24)
_MQOS = const(7)
_V = const(10)
_T = const(14)
_STRIDE = const(16)
_TXO = const(17)
_F = const(18)
_OB = const(19)
_SUBS = const(21)
_ORD = const(26)
_FRECV = const(1)
_NSUB = const(4)  # SUBSCRIBEs/UNSUBSCRIBEs in flight at once
# SUBACK / UNSUBACK reason codes a server may send
_SUBACK4 = b"\x00\x01\x02\x80"
_SUBACK5 = b"\x00\x01\x02\x80\x83\x87\x8f\x91\x97\x9e\xa1\xa2"
_UNSUBACK5 = b"\x00\x11\x80\x83\x87\x8f\x91"


class Message:
    """A received PUBLISH, reused for every message: read it inside the
    callback. `topic`/`payload` make memoryviews (one small allocation
    each); topic_off/topic_len/payload_off/payload_len address `buf` (and
    `topic_buf` for the topic) without allocating; `props` (5.0) reads the
    properties in place."""

    def __init__(self, props):
        self.buf = None
        self.topic_buf = None
        self.topic_off = 0
        self.topic_len = 0
        self.payload_off = 0
        self.payload_len = 0
        self.qos = 0
        self.retain = 0
        self.dup = 0
        self.pid = 0
        self.props = props

    @property
    def topic(self):
        return memoryview(self.topic_buf)[self.topic_off:self.topic_off + self.topic_len]

    @property
    def payload(self):
        return memoryview(self.buf)[self.payload_off:self.payload_off + self.payload_len]

    def topic_is(self, t):
        """Compare the topic with bytes t without allocating."""
        n = self.topic_len
        if len(t) != n:
            return False
        b = self.topic_buf
        o = self.topic_off
        i = 0
        while i < n:
            if b[o + i] != t[i]:
                return False
            i += 1
        return True


class Receiver:
    """Receiving for a lite.core: call rinit() from the client's constructor
    before the core's, put rprops() into the CONNECT's properties, then
    rhook() once the core is made.

    An exception raised by on_message or on_done is raised out of input()
    once the packet is handled (acknowledged, the state consistent): the
    driver's poll() or task lets it through, with its traceback. With
    callback_errors = "log" its traceback is printed and dispatch goes on."""

    # Settings and rarely changed state, read where they matter: class-level
    # defaults, so the instance map stays sparse (every method lookup first
    # misses in it, and a nearly full map makes each miss slow)
    callback_errors = "raise"  # or "log"
    manual_ack = False  # QoS 1/2: PUBACK/PUBREC only by ack(pid)
    check_utf8_payload = True  # refuse Payload Format 1 that is not UTF-8
    on_suback = None  # on_suback(pid, codes) for each SUBACK/UNSUBACK
    # the properties of the last CONNACK and of the server's last DISCONNECT
    # (5.0), propview.Props kept by keep(); None before one came
    connack_props = None
    disconnect_props = None

    def rinit(self, inbound=8, aliases_in=4, alias_topic_max=64):
        """inbound: QoS 2 messages received and not yet released (our Receive
        Maximum); aliases_in: topic aliases the server may set (our Topic
        Alias Maximum), each up to alias_topic_max bytes of topic."""
        if not 0 < inbound <= 65535:
            raise _why("inbound", inbound)
        self.in_max = inbound
        self.in_pid = [0] * inbound  # QoS 2 ids received, PUBREC sent, no PUBREL yet
        self.a_in_max = aliases_in
        self.a_in_topic = bytearray(aliases_in * alias_topic_max)
        self.a_in_len = [0] * aliases_in
        self.alias_topic_max = alias_topic_max
        self.props = Props()
        self.msg = Message(self.props)
        self.on_message = None  # on_message(msg)
        self._cbe = None  # a callback's exception, raised once its packet is handled
        # SUBSCRIBE/UNSUBSCRIBE in flight (the core skips their ids) and
        # the acks that came, kept for suback(pid) until the slot is reused
        self.sub_pids = [0] * _NSUB  # a list: MicroPython's array has no `in`
        self.sub_done = [0] * _NSUB
        self.sub_codes = [None] * _NSUB
        self.suback_pid = 0  # the last SUBACK/UNSUBACK: its id and first code
        self.suback_code = 0

    def rhook(self):
        """The core made (state): it hands this mixin what it receives
        (recv()) and skips the ids of SUBSCRIBEs in flight."""
        a = self.state
        a[_F] |= _FRECV
        a[_SUBS] = self.sub_pids

    def __getattr__(self, name):
        # the full client's documented state, read from the core's state[]
        # when asked for (then lite's: connected, quota, sp, ...)
        if name == "state":
            raise AttributeError(name)  # not made yet
        a = self.state
        if name == "up":  # the server accepted our CONNECT (a quota: a CONNACK came)
            return a[_QUOTA] != 0
        if name == "n":
            return a[_N]
        if name == "amax":
            return a[_AMAX]
        if name == "aliases":
            return a[_ALN]
        if name == "ob":
            return a[_OB] or None
        if name == "early":
            return a[_EARLY]
        return Publisher.__getattr__(self, name)

    def _cb_failed(self, e):
        """An application callback raised e. callback_errors "log": print its
        traceback, go on, True. Else False: input() raises it (a second one
        before that is printed). on_done's comes here through
        why.on_done (the core's done())."""
        if self.callback_errors != "log" and self._cbe is None:
            self._cbe = e
            return False
        try:
            from sys import print_exception
        except ImportError:  # CPython
            from .time import print_exception
        print_exception(e)
        return True

    def input(self, n):
        """lite.core.input(), then a callback's exception. n < 0: drain.py
        read an oversize PUBLISH through and answered it; what is left is
        a PINGRESP's effect (the server is there, it just sent)."""
        self._cbe = None
        a = self.state
        if n < 0:
            a[_T] = 0xD0
            n = 0
        elif n < 2 and a[_T] == 0xE0:
            self.data[1] = 0  # a DISCONNECT without properties: an empty block where keep() reads
        core.input(self, n)
        if self._cbe is not None:
            raise self._cbe  # the driver tells it from a link error by identity

    def rprops(self):
        """Our Receive Maximum and Topic Alias Maximum, for the CONNECT."""
        b = b"\x21" + self.in_max.to_bytes(2, "big")
        if self.a_in_max:
            b += b"\x22" + self.a_in_max.to_bytes(2, "big")
        return b

    def recv(self, t, n):
        """The core's hook: a PUBLISH (t 3, n body bytes in data), a checked
        PUBREL (t 6, n its packet id), a SUBACK/UNSUBACK (t 9/11, n body
        bytes), a CONNACK accepted (t 2, n session present). A packet that
        breaks the protocol raises MQTTError (input() answers it)."""
        r = self.data
        a = self.state
        ob = a[_OB]
        if t == 2:  # CONNACK, n session present
            self.connack_props = self.keep(2)
            i = 0
            while i < _NSUB:
                self.sub_pids[i] = 0  # a SUBSCRIBE is not resent: its ack will not come [MQTT-4.4.0-1]
                i += 1
            i = 0
            while i < self.a_in_max:
                self.a_in_len[i] = 0  # aliases are per connection [MQTT-3.3.2-7]
                i += 1
            if not n:  # no session: the server forgot our QoS 2 ids [MQTT-3.2.2-5]
                if ob:
                    ob.inbound(0, False)  # one record for all, before they go
                i = 0
                while i < self.in_max:
                    self.in_pid[i] = 0
                    i += 1
            return
        if t == 6:  # PUBREL, n its packet id
            i = 0
            while i < self.in_max:
                if self.in_pid[i] == n:
                    self.in_pid[i] = 0
                    if ob:
                        ob.inbound(n, False)
                    return self.send(0x70, n)  # PUBCOMP [MQTT-4.3.3-11]
                i += 1
            return self.send(0x70, n, 0x92)  # not found
        if t != 3:
            return self._suback(t, n)
        first = a[_T]
        qos = first >> 1 & 3
        if qos == 3 or first & 8 and not qos or n < 2:
            raise MQTTError(0x81)  # [MQTT-3.3.1-4] [MQTT-3.3.1-2]
        if qos > a[_MQOS]:
            # no subscription was granted above the server's Maximum QoS [U-3.3.4-e]
            raise MQTTError(0x9B)
        tn = r[0] << 8 | r[1]
        o = 2 + tn
        pid = 0
        if qos:
            if o + 2 > n:
                raise MQTTError(0x81)
            pid = r[o] << 8 | r[o + 1]
            o += 2
        if o > n or not utf8(r, 2, 2 + tn):
            raise MQTTError(0x81)  # [MQTT-1.5.4-1]
        k = 2
        while k < 2 + tn and r[k] != 0x23 and r[k] != 0x2B:
            k += 1
        if k < 2 + tn or qos and not pid:
            raise MQTTError(0x82)  # a wildcard [MQTT-3.3.2-2]; id 0 [MQTT-2.2.1-3]
        m = self.msg
        m.topic_buf = r
        m.topic_off = 2
        m.topic_len = tn
        reason = 0
        if a[_V] == 5:
            o = self.props.parse(r, o, n, 3)
            if o < 0:
                raise MQTTError(-o)
            al = self.props.get_int(0x23, 0)
            if al:  # [U-3.3.4-a..c]
                if al > self.a_in_max:
                    raise MQTTError(0x94)  # above our Topic Alias Maximum
                k = self.alias_topic_max
                j = (al - 1) * k
                if tn:  # set or replace the mapping
                    if tn > k:
                        raise MQTTError(0x83)  # longer than alias_topic_max
                    s = self.a_in_topic
                    k = 0
                    while k < tn:
                        s[j + k] = r[2 + k]
                        k += 1
                    self.a_in_len[al - 1] = tn
                else:
                    tn = self.a_in_len[al - 1]
                    if not tn:
                        raise MQTTError(0x82)  # an alias never set
                    m.topic_buf = self.a_in_topic
                    m.topic_off = j
                    m.topic_len = tn
            if self.props.get_int(1) == 1 and self.check_utf8_payload and not utf8(r, o, n):
                reason = 0x99  # refused in the ack [U-3.3.2-b]
        if not tn:
            raise MQTTError(0x82)  # no topic and no alias (5.0 3.3.2.3.4) [MQTT-4.7.3-1]
        m.buf = r
        m.payload_off = o
        m.payload_len = n - o
        m.qos = qos
        m.retain = first & 1
        m.dup = first >> 3 & 1
        m.pid = pid
        held = False  # a QoS 2 message waiting for ack(pid): no PUBREC yet
        if qos == 2:
            i = 0
            free = -1
            while i < self.in_max:
                p = self.in_pid[i]
                if p == pid:
                    # again before PUBREL: acknowledged, not delivered [MQTT-4.3.3-10]
                    return self.send(0x50, pid)
                if p == -pid:  # sent again, the application has not taken it yet
                    free = i
                    break
                if not p and free < 0:
                    free = i
                i += 1
            if free < 0 and a[_V] == 5:
                raise MQTTError(0x93)  # over our Receive Maximum [U-3.3.4-d]
            # 3.1.1 has no Receive Maximum: a server may hold more QoS 2
            # messages unreleased than we have room for. Such a message is
            # delivered and acknowledged unrecorded (even with manual_ack):
            # only a resend after a reconnect (its PUBREC lost) could
            # deliver it twice.
            if reason < 0x80 and free >= 0:
                # a PUBREC >= 0x80 ends the flow [MQTT-4.3.3-9]; with manual_ack
                # the id is held (negative) until ack(pid) sends the PUBREC
                held = self.manual_ack
                self.in_pid[free] = -pid if held else pid
                if ob and not held:
                    ob.inbound(pid, True)
        if reason < 0x80 and self.on_message:
            try:
                self.on_message(m)
            except Exception as e:  # the message is still acknowledged [MQTT-4.5.0-2]
                self._cb_failed(e)
        # Every PUBLISH is acknowledged, in order of arrival [MQTT-4.5.0-2]
        # [MQTT-4.6.0-2] [MQTT-4.6.0-3]
        if qos == 1 and (not self.manual_ack or reason):
            self.send(0x40, pid, reason)  # [MQTT-4.3.2-4]
        elif qos == 2 and not held:
            self.send(0x50, pid, reason)  # [MQTT-4.3.3-8]

    def ack(self, pid, reason=0):
        """Acknowledge a QoS 1/2 message delivered while manual_ack is set,
        once the application has it safe: PUBACK (QoS 1) or PUBREC (QoS 2,
        which takes ownership [MQTT-4.3.3-8]; the server then releases it).
        reason (5.0) >= 0x80 refuses it instead (a QoS 2 flow ends
        [MQTT-4.3.3-9]). Call in delivery order [MQTT-4.6.0-2]
        [MQTT-4.6.0-3]; after a reconnect that resumed the session the server
        sends the unacknowledged ones again (DUP=1) and they are delivered
        again."""
        if self.state[_V] == 4:
            reason = 0  # 3.1.1 acks carry no reason code
        ob = self.state[_OB]
        i = 0
        while i < self.in_max:
            if self.in_pid[i] == -pid:  # a held QoS 2 message
                self.in_pid[i] = 0 if reason >= 0x80 else pid
                if ob and reason < 0x80:
                    ob.inbound(pid, True)
                return self.send(0x50, pid, reason)  # [MQTT-4.3.3-8]
            i += 1
        self.send(0x40, pid, reason)  # [MQTT-4.3.2-4]

    def _suback(self, t, n):
        """A SUBACK (t 9) or UNSUBACK (t 11) of n bytes in data."""
        r = self.data
        v = self.state[_V]
        if n < 2:
            raise MQTTError(0x81)
        pid = r[0] << 8 | r[1]
        i = 0
        while i < _NSUB and (not pid or self.sub_pids[i] != pid):
            i += 1
        if i == _NSUB:
            raise MQTTError(0x82)  # not our SUBSCRIBE's id [MQTT-2.2.1-6] [MQTT-2.2.1-3]
        o = 2
        if v == 5:
            o = self.props.parse(r, 2, n, t)
            if o < 0:
                raise MQTTError(-o)
        c = _SUBACK5 if v == 5 else _SUBACK4
        if t == 11:
            c = _UNSUBACK5 if v == 5 else b""  # a 3.1.1 UNSUBACK has no payload
        k = o
        while k < n:
            if r[k] not in c:
                raise MQTTError(0x81)  # not a reason code of this packet
            k += 1
        if o == n and c:
            raise MQTTError(0x82)  # a code for each filter [MQTT-3.9.3-1] [MQTT-3.11.3-1]
        codes = bytes(r[o:n])  # one code a filter (none in a 3.1.1 UNSUBACK)
        self.sub_pids[i] = 0
        self.sub_done[i] = pid
        self.sub_codes[i] = codes
        self.suback_pid = pid
        self.suback_code = r[o] if o < n else 0
        if self.on_suback:
            try:
                self.on_suback(pid, codes)
            except Exception as e:  # raised once the packet is handled
                self._cb_failed(e)

    def suback(self, pid):
        """The reason codes (bytes, one a filter, in order: the granted QoS or
        >= 0x80 refused; b"" for a 3.1.1 UNSUBACK) the SUBACK/UNSUBACK for
        packet id pid brought, or None if it has not come (yet). Each
        answer is kept until read here or until its place is needed by
        _NSUB newer SUBSCRIBEs."""
        i = 0
        while i < _NSUB:
            if self.sub_done[i] == pid:
                self.sub_done[i] = 0
                c = self.sub_codes[i]
                self.sub_codes[i] = None
                return c
            i += 1
        return None

    def keep(self, o):
        """The properties of the CONNACK (o 2) or DISCONNECT (o 1) in data, a
        propview.Props over a copy of the packet up to the end of its
        property block (its length at data[o]), for connack_props and
        disconnect_props; None on 3.1.1 or when there are none."""
        if self.state[_V] == 4:
            return None
        r = self.data
        n = s = 0
        k = o
        while k < len(r) and s < 28:  # a Variable Byte Integer
            c = r[k]
            k += 1
            n |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                break
        raw = bytes(r[:k + n])
        p = Props()
        if len(raw) <= o or p.parse(raw, o, len(raw), 2 if o == 2 else 14) < 0:
            return None  # none, or a block parse() refuses
        return p

    def subscribe(self, subs, props=None, unsub=False):
        """Send SUBSCRIBE for [(filter, options)] (UNSUBSCRIBE for [filter]
        with unsub=True); options: QoS | no local 4 | retain as published 8 |
        retain handling << 4 (props.NO_LOCAL...). Returns the packet id at
        once (the ack: on_suback / suback(pid)), or FULL while _NSUB others
        wait for theirs. props: props.build(..., 8), maybe with a
        Subscription Identifier."""
        a = self.state
        v = a[_V]
        if not a[_QUOTA]:  # no CONNACK on this connection (yet)
            raise OSError(errno.ENOTCONN)
        # a free place for its ack: one never used, else the oldest answer unread
        k = -1
        i = 0
        while i < _NSUB:
            if not self.sub_pids[i] and (k < 0 or not self.sub_done[i]):
                k = i
                if not self.sub_done[i]:
                    break
            i += 1
        if k < 0:
            return FULL
        b = self.buf
        w = a[_TXO] + _M + _HEAD  # the body, in the buffer for control packets
        o = w + 2  # after the packet id
        try:
            if v == 5:
                n = len(props) if props else 0
                b[o] = n  # a block under 128 bytes
                if n > 127:
                    raise _why("sub_props", n)
                o = _put(b, o + 1, props) if props else o + 1
            for f in subs:
                opt = 0
                if not unsub:
                    f, opt = f
                s = o + 2
                o = _put(b, s, f)
                n = o - s
                b[s - 2] = n >> 8
                b[s - 1] = n & 0xFF
                # a topic filter: '#' alone or after '/', and last [MQTT-4.7.1-2];
                # '+' a whole level [MQTT-4.7.1-3]; a shared one "$share/NAME/filter"
                # with a name without wildcards [MQTT-4.8.2-1] [MQTT-4.8.2-2];
                # UTF-8, not empty [MQTT-4.7.3-1]
                ok = o > s and utf8(b, s, o)
                i = h = s  # h: where the filter proper starts
                if ok and b[s:s + 7] == b"$share/":
                    i = s + 7
                    while i < o and b[i] != 0x2F and b[i] != 0x23 and b[i] != 0x2B:
                        i += 1
                    ok = s + 7 < i < o - 1 and b[i] == 0x2F  # a name, then a filter
                    h = i = i + 1
                while ok and i < o:
                    c = b[i]
                    if c == 0x23 or c == 0x2B:
                        ok = not (i > h and b[i - 1] != 0x2F or c == 0x23 and i != o - 1 or
                                  c == 0x2B and i + 1 < o and b[i + 1] != 0x2F)
                    i += 1
                if not ok:
                    raise _why("filter", f)
                if unsub:
                    continue
                # QoS <= 2, retain handling <= 2, reserved bits 0 [MQTT-3.8.3-5];
                # 3.1.1: only the QoS bits [MQTT-3-8.3-4 (3.1.1)]
                if opt & 3 > 2 or opt & (0xC0 if v == 5 else 0xFC) or opt & 0x30 == 0x30:
                    raise _why("options", opt)
                if opt & 4 and b[s:s + 7] == b"$share/":
                    raise _why("no_local")  # [MQTT-3.8.3-4]
                b[o] = opt
                o += 1
        except IndexError:
            raise _why("sub_size", len(b) - w)
        if o == w + 2 + (1 if v == 5 else 0):
            raise _why("no_subs")  # at least one [MQTT-3.8.3-3] [MQTT-3.10.3-2]
        pid = Receiver.pid(self)
        b[w] = pid >> 8
        b[w + 1] = pid & 0xFF
        s = _seal(b, w, o, 0xA2 if unsub else 0x82)  # reserved bits 0010 [MQTT-3.8.1-1]
        self.sub_done[k] = 0
        self.sub_codes[k] = None
        self.send(s, o - s, 0, b)
        self.sub_pids[k] = pid
        return pid

    def unsubscribe(self, filters, props=None):
        return self.subscribe(filters, props, True)

    def pid(self):
        """A non-zero packet id that neither a flow in the table nor a
        SUBSCRIBE in flight uses [MQTT-2.2.1-3], wrapping at 65535 (as
        lite.core.publish() takes one); the scan ends since the table
        holds fewer flows than there are ids."""
        a = self.state
        b = self.buf
        d = a[_ORD]
        st = a[_STRIDE]
        x = self.sub_pids
        while True:
            n = a[_PID] % 65535 + 1
            a[_PID] = n
            if n in x:
                continue
            for k in range(a[_N]):
                i = d[k] * st
                if b[i + 4] << 8 | b[i + 5] == n:
                    break
            else:
                return n


def _put(b, o, s):
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


def _seal(b, h, end, first):
    """Put the fixed header before the body b[h:end] (h - _HEAD bytes free
    before it at least); returns where the packet starts."""
    n = end - h
    s = h - (2 if n < 128 else 3 if n < 16384 else 4)
    b[s] = first
    o = s + 1
    while n > 127:
        b[o] = n & 0x7F | 0x80
        n >>= 7
        o += 1
    b[o] = n
    return s

