# frugalmqtt.recv: receiving, for the profiles that subscribe. A mixin over
# core.Core (MicroPython looks methods up depth first, so mixins do not
# derive from Core; the client class lists them before its driver): inbound
# PUBLISH with its properties, QoS 2 receiving, inbound topic aliases,
# SUBSCRIBE/UNSUBSCRIBE and their acks. Its tables are sized once, in
# rinit(); dispatching a message allocates nothing.
import errno
from .core import Core, FULL, utf8, _why
from .propview import Props

try:
    from micropython import const
except ImportError:  # CPython
    from ._cpython import const

_HEAD = const(5)  # core._HEAD
_SUBS = const(4)  # SUBSCRIBEs/UNSUBSCRIBEs in flight at once
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
    """Receiving for a Core: call rinit() from the client's constructor and
    put rprops() into the CONNECT's properties.

    An exception raised by on_message or on_done is raised out of packet()
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
        # SUBSCRIBE/UNSUBSCRIBE in flight (core._pid skips their ids) and
        # the acks that came, kept for suback(pid) until the slot is reused
        self.sub_pids = [0] * _SUBS  # a list: MicroPython's array has no `in`
        self.sub_done = [0] * _SUBS
        self.sub_codes = [None] * _SUBS
        self.suback_pid = 0  # the last SUBACK/UNSUBACK: its id and first code
        self.suback_code = 0

    def _done(self, pid, reason):
        """core.Core._done: on_done's exception waits until the packet is
        handled (called only when there is one)."""
        try:
            self.on_done(pid, reason)
        except Exception as e:
            self._cb_failed(e)

    def _cb_failed(self, e):
        """An application callback raised e. callback_errors "log": print its
        traceback, go on, True. Else False: packet() raises it (a second one
        before that is printed)."""
        if self.callback_errors != "log" and self._cbe is None:
            self._cbe = e
            return False
        try:
            from sys import print_exception
        except ImportError:  # CPython
            from ._cpython import print_exception
        print_exception(e)
        return True

    def packet(self, rl):
        self._cbe = None
        Core.packet(self, rl)
        if self._cbe is not None:
            raise self._cbe  # the driver tells it from a link error by identity

    def rprops(self):
        """Our Receive Maximum and Topic Alias Maximum, for the CONNECT."""
        b = b"\x21" + self.in_max.to_bytes(2, "big")
        if self.a_in_max:
            b += b"\x22" + self.a_in_max.to_bytes(2, "big")
        return b

    def inbound(self, t, n):
        r = self.rx
        if t == 2:  # CONNACK, n session present
            self.connack_props = self.keep(2)
            i = 0
            while i < _SUBS:
                self.sub_pids[i] = 0  # a SUBSCRIBE is not resent: its ack will not come [MQTT-4.4.0-1]
                i += 1
            i = 0
            while i < self.a_in_max:
                self.a_in_len[i] = 0  # aliases are per connection [MQTT-3.3.2-7]
                i += 1
            if not n:  # no session: the server forgot our QoS 2 ids [MQTT-3.2.2-5]
                if self.ob:
                    self.ob.inbound(0, False)  # one record for all, before they go
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
                    if self.ob:
                        self.ob.inbound(n, False)
                    return self._ack(0x70, n)  # PUBCOMP [MQTT-4.3.3-11]
                i += 1
            return self._ack(0x70, n, 0x92)  # not found
        if t != 3:
            return self._suback(t, n)
        first = self.first
        qos = first >> 1 & 3
        if qos == 3 or first & 8 and not qos or n < 2:
            raise self._fail(0x81)  # [MQTT-3.3.1-4] [MQTT-3.3.1-2]
        if qos > self.max_qos:
            # no subscription was granted above the server's Maximum QoS [U-3.3.4-e]
            raise self._fail(0x9B)
        tn = r[0] << 8 | r[1]
        o = 2 + tn
        pid = 0
        if qos:
            if o + 2 > n:
                raise self._fail(0x81)
            pid = r[o] << 8 | r[o + 1]
            o += 2
        if o > n or not utf8(r, 2, 2 + tn):
            raise self._fail(0x81)  # [MQTT-1.5.4-1]
        k = 2
        while k < 2 + tn and r[k] != 0x23 and r[k] != 0x2B:
            k += 1
        if k < 2 + tn or qos and not pid:
            raise self._fail(0x82)  # a wildcard [MQTT-3.3.2-2]; id 0 [MQTT-2.2.1-3]
        m = self.msg
        m.topic_buf = r
        m.topic_off = 2
        m.topic_len = tn
        reason = 0
        if self.v == 5:
            o = self.props.parse(r, o, n, 3)
            if o < 0:
                raise self._fail(-o)
            a = self.props.get_int(0x23, 0)
            if a:  # [U-3.3.4-a..c]
                if a > self.a_in_max:
                    raise self._fail(0x94)  # above our Topic Alias Maximum
                k = self.alias_topic_max
                j = (a - 1) * k
                if tn:  # set or replace the mapping
                    if tn > k:
                        raise self._fail(0x83)  # longer than alias_topic_max
                    s = self.a_in_topic
                    k = 0
                    while k < tn:
                        s[j + k] = r[2 + k]
                        k += 1
                    self.a_in_len[a - 1] = tn
                else:
                    tn = self.a_in_len[a - 1]
                    if not tn:
                        raise self._fail(0x82)  # an alias never set
                    m.topic_buf = self.a_in_topic
                    m.topic_off = j
                    m.topic_len = tn
            if self.props.get_int(1) == 1 and self.check_utf8_payload and not utf8(r, o, n):
                reason = 0x99  # refused in the ack [U-3.3.2-b]
        if not tn:
            raise self._fail(0x82)  # no topic and no alias (5.0 3.3.2.3.4) [MQTT-4.7.3-1]
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
                    return self._ack(0x50, pid)
                if p == -pid:  # sent again, the application has not taken it yet
                    free = i
                    break
                if not p and free < 0:
                    free = i
                i += 1
            if free < 0 and self.v == 5:
                raise self._fail(0x93)  # over our Receive Maximum [U-3.3.4-d]
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
                if self.ob and not held:
                    self.ob.inbound(pid, True)
        if reason < 0x80 and self.on_message:
            try:
                self.on_message(m)
            except Exception as e:  # the message is still acknowledged [MQTT-4.5.0-2]
                self._cb_failed(e)
        # Every PUBLISH is acknowledged, in order of arrival [MQTT-4.5.0-2]
        # [MQTT-4.6.0-2] [MQTT-4.6.0-3]
        if qos == 1 and (not self.manual_ack or reason):
            self._ack(0x40, pid, reason)  # [MQTT-4.3.2-4]
        elif qos == 2 and not held:
            self._ack(0x50, pid, reason)  # [MQTT-4.3.3-8]

    def ack(self, pid, reason=0):
        """Acknowledge a QoS 1/2 message delivered while manual_ack is set,
        once the application has it safe: PUBACK (QoS 1) or PUBREC (QoS 2,
        which takes ownership [MQTT-4.3.3-8]; the server then releases it).
        reason (5.0) >= 0x80 refuses it instead (a QoS 2 flow ends
        [MQTT-4.3.3-9]). Call in delivery order [MQTT-4.6.0-2]
        [MQTT-4.6.0-3]; after a reconnect that resumed the session the server
        sends the unacknowledged ones again (DUP=1) and they are delivered
        again."""
        if self.v == 4:
            reason = 0  # 3.1.1 acks carry no reason code
        i = 0
        while i < self.in_max:
            if self.in_pid[i] == -pid:  # a held QoS 2 message
                self.in_pid[i] = 0 if reason >= 0x80 else pid
                if self.ob and reason < 0x80:
                    self.ob.inbound(pid, True)
                return self._ack(0x50, pid, reason)  # [MQTT-4.3.3-8]
            i += 1
        self._ack(0x40, pid, reason)  # [MQTT-4.3.2-4]

    def _suback(self, t, n):
        """A SUBACK (t 9) or UNSUBACK (t 11) of n bytes in rx."""
        r = self.rx
        if n < 2:
            raise self._fail(0x81)
        pid = r[0] << 8 | r[1]
        i = 0
        while i < _SUBS and (not pid or self.sub_pids[i] != pid):
            i += 1
        if i == _SUBS:
            raise self._fail(0x82)  # not our SUBSCRIBE's id [MQTT-2.2.1-6] [MQTT-2.2.1-3]
        o = 2
        if self.v == 5:
            o = self.props.parse(r, 2, n, t)
            if o < 0:
                raise self._fail(-o)
        c = _SUBACK5 if self.v == 5 else _SUBACK4
        if t == 11:
            c = _UNSUBACK5 if self.v == 5 else b""  # a 3.1.1 UNSUBACK has no payload
        k = o
        while k < n:
            if r[k] not in c:
                raise self._fail(0x81)  # not a reason code of this packet
            k += 1
        if o == n and c:
            raise self._fail(0x82)  # a code for each filter [MQTT-3.9.3-1] [MQTT-3.11.3-1]
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
        _SUBS newer SUBSCRIBEs."""
        i = 0
        while i < _SUBS:
            if self.sub_done[i] == pid:
                self.sub_done[i] = 0
                c = self.sub_codes[i]
                self.sub_codes[i] = None
                return c
            i += 1
        return None

    def keep(self, o):
        """The properties of the CONNACK (o 2) or DISCONNECT (o 1) in rx, a
        propview.Props over a copy of the packet up to the end of its
        property block (its length at rx[o]), for connack_props and
        disconnect_props; None on 3.1.1 or when there are none."""
        if self.v == 4:
            return None
        r = self.rx
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
        once (the ack: on_suback / suback(pid)), or FULL while _SUBS others
        wait for theirs. props: props.build(..., 8), maybe with a
        Subscription Identifier."""
        if not self.up:
            raise OSError(errno.ENOTCONN)
        # a free place for its ack: one never used, else the oldest answer unread
        k = -1
        i = 0
        while i < _SUBS:
            if not self.sub_pids[i] and (k < 0 or not self.sub_done[i]):
                k = i
                if not self.sub_done[i]:
                    break
            i += 1
        if k < 0:
            return FULL
        b = self.img[-1]
        o = _HEAD + 2  # after the packet id
        try:
            if self.v == 5:
                n = len(props) if props else 0
                b[o] = n  # a block under 128 bytes
                if n > 127:
                    raise _why("sub_props", n)
                o = self._text(b, o + 1, props) if props else o + 1
            for f in subs:
                opt = 0
                if not unsub:
                    f, opt = f
                s = o + 2
                o = self._text(b, s, f)
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
                if opt & 3 > 2 or opt & (0xC0 if self.v == 5 else 0xFC) or opt & 0x30 == 0x30:
                    raise _why("options", opt)
                if opt & 4 and b[s:s + 7] == b"$share/":
                    raise _why("no_local")  # [MQTT-3.8.3-4]
                b[o] = opt
                o += 1
        except IndexError:
            raise _why("sub_size", len(b) - _HEAD)
        if o == _HEAD + 2 + (1 if self.v == 5 else 0):
            raise _why("no_subs")  # at least one [MQTT-3.8.3-3] [MQTT-3.10.3-2]
        pid = self._pid()
        b[_HEAD] = pid >> 8
        b[_HEAD + 1] = pid & 0xFF
        s = self._seal(b, o, 0xA2 if unsub else 0x82)  # reserved bits 0010 [MQTT-3.8.1-1]
        self.sub_done[k] = 0
        self.sub_codes[k] = None
        self._send(b, s, o - s)
        self.sub_pids[k] = pid
        return pid

    def unsubscribe(self, filters, props=None):
        return self.subscribe(filters, props, True)

