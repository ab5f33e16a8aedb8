# The MQTT session, sans-I/O: packet ids, the outbound in-flight table, the
# inbound QoS 2 table, topic aliases both ways, flow control, message expiry
# and keep-alive. No sockets: packets leave through `write(buf, off, n)` (one
# call per whole packet) and arrive through `self.framer` + `receive()`.
# Time comes from an injected millisecond tick function, compared wrap-safely.
# Everything is allocated in __init__; publish() and receive() allocate
# nothing in steady state (given bytes-like topic and payload).
try:
    from micropython import const
except ImportError:
    const = int  # CPython

try:
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython
    from time import monotonic as _mono

    def ticks_ms():
        return int(_mono() * 1000) & 0x3FFFFFFF

    def ticks_diff(a, b):
        return ((a - b + 0x20000000) & 0x3FFFFFFF) - 0x20000000

from array import array
from .codec import MQTTError, Framer, check_utf8, protocol_error, topic_len, put_vbi, put_raw
from .publish import (Packet, encode_ack, put_publish, publish_rl, total, _publish_props_len)
from . import control as _ctl
from . import props as _p
from .err import ServerError  # noqa: F401  (re-exported: frugalmqtt.session.ServerError)

# Slot states of the outbound table
_FREE = const(0)
_QUEUED = const(1)  # stored, not sent on this connection yet
_WAIT_ACK = const(2)  # QoS 1 sent, waiting for PUBACK
_WAIT_REC = const(3)  # QoS 2 sent, waiting for PUBREC
_WAIT_COMP = const(4)  # PUBREL sent, waiting for PUBCOMP

# publish() result when every slot (or the packet id space) is taken
WINDOW_FULL = const(-1)
# publish() results with an outbox (outbox.py): no room in its file; the
# message waits in its file for a slot (its packet id comes then)
OUTBOX_FULL = const(-4)
STORED = const(-5)
# on_done() reasons that are not MQTT reason codes
EXPIRED = const(-2)  # message expiry passed before it could be sent
SESSION_LOST = const(-3)  # server had no session: QoS 2 release lost with it

_SEQ_WRAP = const(0x1FFFFFFF)  # renumber before leaving 32-bit small ints
_NO_LIMIT = const(268435460)  # largest possible MQTT packet
# Packet types (codec.CONNACK...) and property ids (props.*) as local
# consts: they take no RAM, where an imported name is a global
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBACK = const(4)
_PUBREC = const(5)
_PUBREL = const(6)
_PUBCOMP = const(7)
_SUBACK = const(9)
_UNSUBACK = const(11)
_PINGREQ = const(12)
_PINGRESP = const(13)
_DISCONNECT = const(14)
_PAYLOAD_FORMAT = const(0x01)
_MESSAGE_EXPIRY = const(0x02)
_SUBSCRIPTION_ID = const(0x0B)
_SESSION_EXPIRY = const(0x11)
_ASSIGNED_CLIENT_ID = const(0x12)
_SERVER_KEEP_ALIVE = const(0x13)
_AUTH_METHOD = const(0x15)
_AUTH_DATA = const(0x16)
_RECEIVE_MAXIMUM = const(0x21)
_TOPIC_ALIAS_MAXIMUM = const(0x22)
_TOPIC_ALIAS = const(0x23)
_MAXIMUM_QOS = const(0x24)
_RETAIN_AVAILABLE = const(0x25)
_MAXIMUM_PACKET_SIZE = const(0x27)
# Reason codes
_IMPL_ERROR = const(0x83)
_PID_NOT_FOUND = const(0x92)
_RECEIVE_MAXIMUM_EXCEEDED = const(0x93)
_TOPIC_ALIAS_INVALID = const(0x94)
_PAYLOAD_FORMAT_INVALID = const(0x99)
_QOS_NOT_SUPPORTED = const(0x9B)
# Bit t set: packet type t may come from a server (CONNACK, PUBLISH, the
# acks, SUBACK, UNSUBACK, PINGRESP, DISCONNECT, AUTH); bit 0 too, so that
# the reserved type 0 is refused as Malformed by the codec
_FROM_SERVER = const(0xEAFD)
_NO_TOPIC = object()  # no topic checked yet (any topic is another object)


def _check_props(props, payload):
    """What Session.publish() refuses in props, besides props.size()'s checks."""
    for p in props:
        if p[0] == _SUBSCRIPTION_ID:
            raise ValueError("bad props")  # [MQTT-3.3.4-6] never sent by a client
        if p[0] == _TOPIC_ALIAS:
            raise ValueError("bad props")  # aliases are the session's
        if p[0] == _PAYLOAD_FORMAT and p[1] == 1:
            try:
                check_utf8(payload, 0, len(payload))  # [U-3.3.2-b]
            except MQTTError:
                raise ValueError("bad UTF-8")  # payload format 1


class Message:
    """A received PUBLISH, reused for every message: read it inside the
    callback. `topic`/`payload` make memoryviews (one small allocation
    each); topic_off/topic_len/payload_off/payload_len address `buf`
    (and `topic_buf` for the topic) without allocating."""

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


class Session:
    """State of one MQTT session across network connections.

    Sized once: `max_packet` bytes of receive buffer (also the Maximum
    Packet Size we announce), `tx_size` bytes for packets built on the fly,
    `slots` outbound QoS 1/2 messages of up to `slot_size` bytes each,
    `inbound` QoS 2 messages awaiting PUBREL (our Receive Maximum),
    `aliases_out` topic aliases we may assign, `aliases_in` aliases the
    server may use (our Topic Alias Maximum) of up to `alias_topic_max` bytes.
    """

    def __init__(self, client_id, write, version=5, max_packet=1024, tx_size=512, slots=8,
                 slot_size=256, inbound=8, aliases_out=8, aliases_in=4, alias_topic_max=64,
                 clock=ticks_ms):
        if version != 4 and version != 5:
            raise ValueError("version: 4 or 5")  # 3.1.1 or 5.0
        if not 0 < slots <= 65535 or not 0 < inbound <= 65535:
            raise ValueError("slots, inbound: 1..65535")
        self.client_id = client_id
        self.write = write
        self.version = version
        self.clock = clock
        self.framer = Framer(max_packet)
        self.pkt = Packet()
        self.msg = Message(self.pkt.props)
        self.tx = bytearray(tx_size)
        # Outbound in-flight table: one fixed slot per message
        self.slots = slots
        self.slot_size = slot_size
        self.store = bytearray(slots * slot_size)
        self.s_state = bytearray(slots)
        self.s_qos = bytearray(slots)
        self.s_pid = array("H", bytes(2 * slots))
        self.s_len = array("H", bytes(2 * slots))
        self.s_seq = array("i", bytes(4 * slots))  # publish order, for resend order
        self.s_t0 = array("i", bytes(4 * slots))  # ticks when stored
        self.s_exp_off = array("H", bytes(2 * slots))  # offset of expiry value in image, 0 none
        self.s_exp = array("I", bytes(4 * slots))  # expiry interval as published (s)
        self.seq = 0
        self.queued = False  # a slot may be _QUEUED (so _pump has work)
        self.next_pid = 1
        self.sub_pid = 0  # the one SUBSCRIBE/UNSUBSCRIBE in flight (shares the id space)
        # Inbound QoS 2: packet ids received, PUBREC sent, awaiting PUBREL
        self.in_pid = array("H", bytes(2 * inbound))
        self.inbound = inbound
        # Topic aliases: outbound holds references to immutable topics;
        # inbound copies topics into fixed slots.
        self.a_out = [None] * aliases_out
        self.a_in_max = aliases_in
        self.a_in_topic = bytearray(aliases_in * alias_topic_max)
        self.a_in_len = array("H", bytes(2 * aliases_in))
        self.alias_topic_max = alias_topic_max
        # The last topic published, if immutable (bytes, str): checked once,
        # its encoded length, and its outbound alias on this connection
        # (0: not looked up yet, -1: none, the plain topic).
        self.c_topic = _NO_TOPIC
        self.c_tn = 0
        self.c_alias = 0
        self.c_room = 0  # publish()'s hot path: the largest payload it takes
        self.c_rl = 0  # ... and its packets' remaining length without the payload
        # Callbacks
        self.on_message = None  # f(msg)
        self.on_done = None  # f(pid, reason): a QoS 1/2 flow ended (reason < 0x80: delivered)
        self.on_suback = None  # f(pkt): SUBACK/UNSUBACK, codes at pkt.buf[pkt.data:]
        self.check_utf8_payload = True  # refuse Payload Format 1 that is not UTF-8
        self.manual_ack = False  # QoS 1: the application sends PUBACK with ack(pid)
        self.callback_error = None  # last exception raised by on_message
        self.link = False  # a network connection is open
        self.connected = False  # ... and the server accepted CONNECT
        self.session_present = 0
        self.ob = None  # an outbox.Outbox persisting QoS 1/2 state (set by its attach())
        self._reset_connection()

    # ---- connection ------------------------------------------------------

    def _reset_connection(self):
        """Connection-scoped state [U-4.9-a] [MQTT-3.3.2-7]."""
        self.server_receive_max = 65535
        self.quota = 0
        self.server_max_qos = 2
        self.retain_available = True
        self.server_max_packet = _NO_LIMIT
        self.a_out_max = 0  # server's Topic Alias Maximum (none unless told) [MQTT-3.2.2-18]
        self.c_alias = 0
        i = 0
        while i < len(self.a_out):
            self.a_out[i] = None
            i += 1
        i = 0
        while i < self.a_in_max:
            self.a_in_len[i] = 0
            i += 1
        self.keepalive_ms = 0
        self.last_tx = self.last_rx = self.ping_t = self.clock()
        self.ping_out = False
        self.clean = True

    def connect(self, keepalive=60, clean=True, props=None, will=None, username=None,
                password=None, session_expiry=None):
        """Send CONNECT on a fresh network connection."""
        if self.version < 5 and not clean and not self.client_id:
            raise ValueError("client id")  # [MQTT-3.1.3-7] 3.1.1: none needs clean=True
        self._reset_connection()
        self.framer.reset()
        # Only PUBLISH and PUBREL are resent [MQTT-4.4.0-1]: an unacknowledged
        # SUBSCRIBE/UNSUBSCRIBE gets no ack on a new connection; free its id.
        self.sub_pid = 0
        self.link = True
        self.connected = False
        self.clean = clean
        self.keepalive_ms = keepalive * 1000
        cp = props
        self.auth = False  # we sent an Authentication Method
        if self.version >= 5:
            cp = [(_RECEIVE_MAXIMUM, self.inbound),
                  (_MAXIMUM_PACKET_SIZE, self.framer.max)]
            if self.a_in_max:
                cp.append((_TOPIC_ALIAS_MAXIMUM, self.a_in_max))
            if session_expiry is not None:
                cp.append((_SESSION_EXPIRY, session_expiry))
            for p in props or ():
                cp.append(p)
                if p[0] == _AUTH_METHOD:
                    self.auth = True
        n = _ctl.encode_connect(self.tx, 0, self.version, self.client_id, keepalive, clean, cp,
                                will, username, password)
        self._send(self.tx, 0, n)

    def _on_connack(self):
        pkt = self.pkt
        if pkt.reason:
            self.lost()
            raise ServerError(pkt.reason)  # [MQTT-4.13.2-1] the caller closes
        if pkt.sp and self.clean:
            raise protocol_error()  # [MQTT-3.2.2-4] session present after clean start
        if self.version >= 5:
            pr = pkt.props
            if not self.auth and (pr.has(_AUTH_METHOD) or pr.has(_AUTH_DATA)):
                raise protocol_error()  # authentication we never asked for (5.0 4.12)
            self.server_receive_max = pr.get_int(_RECEIVE_MAXIMUM, 65535)
            self.server_max_qos = pr.get_int(_MAXIMUM_QOS, 2)
            self.retain_available = pr.get_int(_RETAIN_AVAILABLE, 1) == 1
            self.server_max_packet = pr.get_int(_MAXIMUM_PACKET_SIZE, _NO_LIMIT)
            # No Topic Alias Maximum: no aliases [MQTT-3.2.2-17] [MQTT-3.2.2-18]
            self.a_out_max = min(pr.get_int(_TOPIC_ALIAS_MAXIMUM, 0), len(self.a_out))
            ka = pr.get_int(_SERVER_KEEP_ALIVE)
            if ka is not None:
                self.keepalive_ms = ka * 1000
            if pr.has(_ASSIGNED_CLIENT_ID):
                self.client_id = pr.get_str(_ASSIGNED_CLIENT_ID)
        self.connected = True
        sp = self.session_present = pkt.sp
        if not sp:
            # The server kept no session [MQTT-3.2.2-5]: our session state goes.
            # Messages it never acknowledged are queued again as new messages
            # (DUP=0, so nothing is lost); a QoS 2 message whose PUBREC had
            # arrived is reported SESSION_LOST. Inbound QoS 2 state is dropped.
            if self.ob:
                self.ob.inbound(0, False)
            i = 0
            while i < self.inbound:
                self.in_pid[i] = 0
                i += 1
        # The send quota starts at the server's Receive Maximum [MQTT-4.9.0-1];
        # a resumed QoS 2 flow past PUBREC counts against it until PUBCOMP.
        q = self.server_receive_max
        i = 0
        while i < self.slots:
            st = self.s_state[i]
            if st == _WAIT_COMP:
                if sp:
                    q -= 1
                else:
                    self._free(i, SESSION_LOST)
            elif st != _FREE and not sp:
                self.s_state[i] = _QUEUED
                self.queued = True
                self.store[i * self.slot_size] &= 0xF7
            i += 1
        self.quota = q
        # On a resumed session resend every unacknowledged PUBREL and PUBLISH
        # with its original packet id, in the original order, PUBLISH with
        # DUP=1 [MQTT-4.4.0-1] [MQTT-4.6.0-1] [MQTT-3.3.1-1]. Never at other
        # times. PUBLISHes beyond the quota are held, DUP=1, and go as acks
        # free it [MQTT-3.3.4-7]; PUBRELs are never held [MQTT-3.3.4-8].
        seq = -1
        while self.connected:
            i = self._next(seq, _WAIT_ACK, _WAIT_COMP)
            if i < 0:
                break
            seq = self.s_seq[i]
            st = self.s_state[i]
            if st == _WAIT_COMP:
                self._send_ack(_PUBREL, self.s_pid[i])
            elif self.quota <= 0:
                self.s_state[i] = _QUEUED
                self.queued = True
                if st == _WAIT_REC:
                    self.s_exp_off[i] = 0  # sent once: expiry no longer applies [MQTT-4.3.3-7]
            elif st == _WAIT_REC or not self._expire(i):  # QoS 2: as [MQTT-4.3.3-7]
                o = i * self.slot_size
                self.store[o] |= 0x08
                self._send(self.store, o, self.s_len[i])
                self.quota -= 1
        self._pump()

    def disconnect(self, reason=0):
        """Send DISCONNECT; the caller then closes the socket and sends nothing
        more [MQTT-3.14.4-1] [MQTT-3.14.4-2]."""
        if self.link:
            n = _ctl.encode_disconnect(self.tx, 0, self.version,
                                       reason if self.version >= 5 else 0)
            self._send(self.tx, 0, n)
        self.lost()

    def lost(self):
        """The network connection ended: keep the session, forget the connection."""
        self.link = False
        self.connected = False

    # ---- sending ---------------------------------------------------------

    def _send(self, buf, off, n):
        """Write one whole packet. A dead link ends the connection (the caller
        sees `connected` False); stored messages stay for the next one."""
        if not self.link:
            return
        try:
            self.write(buf, off, n)
        except OSError:
            self.lost()
            return
        self.last_tx = self.clock()

    def _send_ack(self, ptype, pid, reason=0):
        n = encode_ack(self.tx, 0, self.version, ptype, pid, reason if self.version >= 5 else 0)
        self._send(self.tx, 0, n)

    def _new_pid(self):
        """A non-zero packet id not in use [MQTT-2.2.1-3] [U-2.2.1-b], wrapping at
        65535. At most slots + 1 ids are in use, so the scan is bounded."""
        st = self.s_state
        ids = self.s_pid
        n = self.slots
        k = 0
        while k <= n + 1:
            pid = self.next_pid
            self.next_pid = 1 if pid == 65535 else pid + 1
            if pid != self.sub_pid:
                i = 0
                while i < n and (not st[i] or ids[i] != pid):
                    i += 1
                if i == n:
                    return pid
            k += 1
        return 0

    def in_flight(self):
        """QoS 1/2 messages sent and not yet completely acknowledged."""
        n = 0
        i = 0
        while i < self.slots:
            if self.s_state[i] >= _WAIT_ACK:
                n += 1
            i += 1
        return n

    def pending(self):
        """QoS 1/2 messages stored (queued or in flight)."""
        n = 0
        i = 0
        while i < self.slots:
            if self.s_state[i]:
                n += 1
            i += 1
        return n

    def publish(self, topic, payload, qos=0, retain=False, props=None):
        """Publish a message. Returns its packet id (QoS 1/2), 0 for QoS 0, or
        WINDOW_FULL when every slot is taken. A QoS 1/2 message is stored until
        acknowledged, sent as soon as the server's Receive Maximum allows, and
        resent after a reconnect; on_done(pid, reason) reports the end of its
        flow. QoS 0 needs a connection (OSError otherwise)."""
        a = self.c_alias
        if a and topic is self.c_topic and not qos and not props:
            # The hot path: QoS 0, no properties, to the last topic, already
            # sent on this connection. A payload within c_room fits as the
            # plain packet did (see _encode_now); the checks left are what
            # can change from call to call.
            if type(payload) is str:
                raise TypeError("need bytes")  # payload
            plen = len(payload) if payload is not None else 0
            if plen <= self.c_room and self.connected and (not retain or self.retain_available):
                tx = self.tx
                rl = self.c_rl + plen
                tx[0] = 0x31 if retain else 0x30
                if rl < 128:
                    tx[1] = rl
                    o = 2
                else:
                    o = put_vbi(tx, 1, rl)
                if a > 0:  # the server has its alias (5.0): no topic, the alias property
                    tx[o] = 0
                    tx[o + 1] = 0
                    tx[o + 2] = 3
                    tx[o + 3] = _TOPIC_ALIAS
                    tx[o + 4] = a >> 8
                    tx[o + 5] = a & 0xFF
                    o += 6
                else:
                    tn = self.c_tn
                    tx[o] = tn >> 8
                    tx[o + 1] = tn & 0xFF
                    o = put_raw(tx, o + 2, topic, tn)
                    if self.version >= 5:
                        tx[o] = 0  # no properties
                        o += 1
                if plen:
                    tx[o:o + plen] = payload
                self._send(tx, 0, o + plen)
                return 0
        if qos < 0 or qos > 2:
            raise ValueError("bad QoS")
        if qos > self.server_max_qos:
            raise ValueError("bad QoS")  # [MQTT-3.2.2-11] above the server's Maximum QoS
        if retain and not self.retain_available:
            raise ValueError("server has no retain")  # [MQTT-3.2.2-14]
        if props:
            _check_props(props, payload)
        # Checked once here; the packets below are written without checking
        # again. An immutable topic is checked once while it stays the last one.
        if topic is not self.c_topic:
            self.c_tn = topic_len(topic)  # [MQTT-3.3.2-2] [MQTT-4.7.3-1..3]
            self.c_topic = topic if type(topic) is bytes or type(topic) is str else _NO_TOPIC
            self.c_alias = 0
        tn = self.c_tn
        if type(payload) is str:
            raise TypeError("need bytes")  # payload
        plen = len(payload) if payload is not None else 0
        v = self.version
        pn = _publish_props_len(v, props, 0) if props else 0
        rl = 2 + tn + plen
        if qos:
            rl += 2
        if v >= 5:
            rl += pn + 1 if pn < 128 else publish_rl(v, 0, 0, 0, pn) - 2
        size = rl + 2 if rl < 128 else total(rl)
        if size > self.server_max_packet:
            raise ValueError("over server max size")  # [MQTT-3.2.2-15] Maximum Packet Size
        if not qos:
            if not self.connected:
                raise OSError("not connected")
            tx = self.tx
            if size > len(tx):
                raise ValueError("over tx_size")
            self._send(tx, 0, self._encode_now(tx, topic, tn, payload, plen, 0, 0, retain, props,
                                               pn, rl))
            return 0
        if size > self.slot_size:
            raise ValueError("over slot_size")
        if self.queued:
            self._pump()  # older queued messages go first
        st = self.s_state
        n = self.slots
        i = 0
        while i < n and st[i]:
            i += 1
        pid = self._new_pid() if i < n else 0
        ob = self.ob
        if ob and (not pid or ob.backlog):  # the outbox keeps it until a slot frees
            return ob.defer(put_publish(ob.buf, 0, v, topic, tn, payload, plen, qos, 1, retain,
                                        False, props, pn, 0))
        if not pid:
            return WINDOW_FULL
        o = i * self.slot_size
        k = put_publish(self.store, o, v, topic, tn, payload, plen, qos, pid, retain, False, props,
                        pn, 0)
        self.s_len[i] = k
        self.s_pid[i] = pid
        self.s_qos[i] = qos
        st[i] = _QUEUED
        self.s_t0[i] = self.clock()
        self.s_exp_off[i] = 0
        if props and v >= 5:
            self._note_expiry(i, props)
        if ob and not ob.put(i):  # recorded before it is sent
            st[i] = _FREE
            return OUTBOX_FULL
        if self.seq < _SEQ_WRAP:
            self.seq += 1
            self.s_seq[i] = self.seq
        else:
            self._number(i)
        if self.connected and self.quota > 0:
            if self.a_out_max and size <= len(self.tx):
                self._send(self.tx, 0, self._encode_now(self.tx, topic, tn, payload, plen, qos, pid,
                                                        retain, props, pn, rl))
            else:
                self._send(self.store, o, k)
            self._sent(i)
        else:
            self.queued = True
        return pid

    def _encode_now(self, buf, topic, tn, payload, plen, qos, pid, retain, props, pn, rl):
        """Encode a PUBLISH going out now (rl: its remaining length with the
        plain topic), with a topic alias when the server allows them (never
        above its maximum [MQTT-3.2.2-9], never 0 [MQTT-3.3.2-8]): the first
        publish of a topic carries it and a new alias, later ones the empty
        topic and the alias. Aliases go to the first topics published on a
        connection and stay theirs until it ends; only immutable topics
        (bytes, str) get one."""
        v = self.version
        if topic is self.c_topic:
            lim = self.server_max_packet
            if len(buf) < lim:
                lim = len(buf)
            a = self.c_alias
            if a == 0:  # look the topic up once per connection
                # The alias property adds 3 bytes (more than a short topic
                # saves): use it only if the packet still fits the server's
                # Maximum Packet Size [MQTT-3.2.2-15] and the buffer; else
                # send the plain topic.
                n = self.a_out_max
                t = 0
                i = 0
                while i < n:
                    t = self.a_out[i]
                    if t is None or t is topic or t == topic:
                        break
                    i += 1
                a = i + 1 if i < n else -1
                if a > 0 and t is None:  # a free alias: the topic and the alias go now
                    if total(publish_rl(v, tn, plen, qos, pn + 3)) > lim:
                        a = 0  # too large now: try again next time
                    else:
                        self.a_out[i] = topic
                self.c_alias = a
                # For publish()'s hot path: the largest payload whose plain
                # QoS 0 PUBLISH to the topic (no properties) fits lim; its
                # aliased form is no larger when the topic has 3 bytes or
                # more (else the hot path is not taken).
                k = 2 + tn + (1 if v >= 5 else 0)
                p = lim - k - 2 if a < 0 or tn > 2 else -1
                while p >= 0 and total(k + p) > lim:
                    p -= 1
                self.c_room = p
                self.c_rl = 6 if a > 0 else k
                if a > 0 and t is None:
                    return put_publish(buf, 0, v, topic, tn, payload, plen, qos, pid, retain,
                                       False, props, pn + 3, a)
            if a > 0:
                if pn < 125:  # same property length size: 3 bytes more, no topic
                    arl = rl - tn + 3
                else:
                    arl = publish_rl(v, 0, plen, qos, pn + 3)
                if (arl + 2 if arl < 128 else total(arl)) <= lim:
                    return put_publish(buf, 0, v, b"", 0, payload, plen, qos, pid, retain, False,
                                       props, pn + 3, a)
        return put_publish(buf, 0, v, topic, tn, payload, plen, qos, pid, retain, False, props, pn,
                           0)

    def _note_expiry(self, i, props):
        """Remember where the stored image holds its Message Expiry Interval."""
        e = _p.size(props, _PUBLISH, _MESSAGE_EXPIRY)
        if e < 0:
            return
        b = self.store
        o = i * self.slot_size + 1
        while b[o] & 0x80:  # remaining length
            o += 1
        o += 1
        o += 2 + ((b[o] << 8) | b[o + 1]) + 2  # topic, packet id
        while b[o] & 0x80:  # property length
            o += 1
        o += 1 + e
        self.s_exp_off[i] = o - i * self.slot_size
        self.s_exp[i] = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]

    def _expire(self, i):
        """Before (re)sending a stored message that may still expire: lower its
        expiry by the time it waited, or drop it and report EXPIRED."""
        eo = self.s_exp_off[i]
        if not eo:
            return False
        left = self.s_exp[i] - ticks_diff(self.clock(), self.s_t0[i]) // 1000
        if left <= 0:
            self._free(i, EXPIRED)
            return True
        o = i * self.slot_size + eo
        b = self.store
        b[o] = (left >> 24) & 0xFF
        b[o + 1] = (left >> 16) & 0xFF
        b[o + 2] = (left >> 8) & 0xFF
        b[o + 3] = left & 0xFF
        return False

    def _number(self, i):
        """Give slot i the next sequence number (publish order). Renumber
        before the counter leaves the small-int range of 32-bit ports."""
        self.queued = True  # (the outbox loads stored messages as _QUEUED)
        if self.seq >= _SEQ_WRAP:
            self.s_state[i] = _FREE  # not numbered yet
            n = 0
            seq = -1
            while True:
                j = self._next(seq, _QUEUED, _WAIT_COMP)
                if j < 0:
                    break
                seq = self.s_seq[j]
                n += 1
                self.s_seq[j] = -n  # numbered in order; made positive below
            k = 0
            while k < self.slots:
                if self.s_seq[k] < 0:
                    self.s_seq[k] = -self.s_seq[k]
                k += 1
            self.seq = n
            self.s_state[i] = _QUEUED
        self.seq += 1
        self.s_seq[i] = self.seq

    def _next(self, after, lo, hi):
        """The slot with the smallest sequence number above `after` whose state
        is in lo..hi, or -1."""
        best = -1
        i = 0
        while i < self.slots:
            st = self.s_state[i]
            q = self.s_seq[i]
            if lo <= st <= hi and q > after and (best < 0 or q < self.s_seq[best]):
                best = i
            i += 1
        return best

    def _sent(self, i):
        self.store[i * self.slot_size] |= 0x08  # the stored image is now a redelivery
        self.s_state[i] = _WAIT_ACK if self.s_qos[i] == 1 else _WAIT_REC
        self.quota -= 1  # [MQTT-4.9.0-2]

    def _pump(self):
        """Send queued messages in publish order while connected and within
        the send quota [MQTT-4.9.0-2]."""
        while self.connected and self.quota > 0:
            i = self._next(-1, _QUEUED, _QUEUED)
            if i < 0:
                self.queued = False
                return
            if self._expire(i):
                continue
            self._send(self.store, i * self.slot_size, self.s_len[i])
            if self.connected:
                self._sent(i)

    def _free(self, i, reason):
        pid = self.s_pid[i]
        self.s_state[i] = _FREE
        if self.ob:
            self.ob.done(i)  # may move a stored message into slot i
        if self.on_done:
            self.on_done(pid, reason)

    # ---- subscriptions ---------------------------------------------------

    def subscribe(self, subs, props=None, unsub=False):
        """Send SUBSCRIBE for [(filter, options)] (UNSUBSCRIBE for [filter]
        with unsub=True); returns its packet id, or WINDOW_FULL while another
        SUBSCRIBE/UNSUBSCRIBE awaits its ack."""
        if not self.connected:
            raise OSError("not connected")
        if self.sub_pid:
            return WINDOW_FULL
        pid = self._new_pid()
        if not pid:
            return WINDOW_FULL
        if unsub:
            n = _ctl.encode_unsubscribe(self.tx, 0, self.version, pid, subs, props)
        else:
            n = _ctl.encode_subscribe(self.tx, 0, self.version, pid, subs, props)
        self.sub_pid = pid
        self._send(self.tx, 0, n)
        return pid

    def unsubscribe(self, filters, props=None):
        return self.subscribe(filters, props, True)

    # ---- receiving -------------------------------------------------------

    def receive(self):
        """Handle the packet now complete in self.framer. A protocol violation
        by the server sends DISCONNECT with the reason code (MQTT 5) and raises
        MQTTError [U-4.13.1-a] [MQTT-4.8.0-1]; the caller closes the socket."""
        f = self.framer
        pkt = self.pkt
        if not self.link:
            return 0  # closed: nothing more is handled (or answered) [MQTT-3.14.4-1]
        try:
            if not (_FROM_SERVER >> (f.first >> 4)) & 1:
                raise protocol_error()  # CONNECT, SUBSCRIBE, ...: a client never receives them
            t = _ctl.decode(pkt, f.first, f.buf, f.off, f.off + f.rl, self.version)
            if (t == _CONNACK) == self.connected:
                raise protocol_error()  # CONNACK first [MQTT-3.2.0-1], and only once
            self.last_rx = self.clock()
            self.ping_out = False
            if t == _PUBLISH:
                self._on_publish()
            elif t == _PUBACK:
                self._ack_done(_WAIT_ACK)
            elif t == _PUBREC:
                self._on_pubrec()
            elif t == _PUBREL:
                self._on_pubrel()
            elif t == _PUBCOMP:
                self._ack_done(_WAIT_COMP)
            elif t == _CONNACK:
                self._on_connack()
            elif t == _SUBACK or t == _UNSUBACK:
                if pkt.pid != self.sub_pid:
                    raise protocol_error()  # no SUBSCRIBE/UNSUBSCRIBE with that id [MQTT-2.2.1-6]
                self.sub_pid = 0
                if self.on_suback:
                    self.on_suback(pkt)
            elif t == _DISCONNECT:
                if self.version < 5:
                    raise protocol_error()  # 3.1.1: only a client sends DISCONNECT (3.1.1 3.14)
                self.lost()
                raise ServerError(pkt.reason)  # [MQTT-4.13.2-1]
            elif t != _PINGRESP:
                raise protocol_error()  # a client never receives it (AUTH without method too)
            return t
        except MQTTError as e:
            if self.version >= 5:
                self.disconnect(e.reason)  # [U-4.13.1-a]
            else:
                self.lost()  # 3.1.1 just closes [MQTT-4.8.0-1]
            raise

    def _on_publish(self):
        pkt = self.pkt
        msg = self.msg
        qos = pkt.qos
        if qos > self.server_max_qos:
            raise MQTTError(_QOS_NOT_SUPPORTED)  # [U-3.3.4-e] above the CONNACK's Maximum QoS
        msg.buf = pkt.buf
        msg.topic_buf = pkt.buf
        msg.topic_off = pkt.topic
        msg.topic_len = pkt.topic_len
        msg.payload_off = pkt.data
        msg.payload_len = pkt.data_len
        msg.qos = qos
        msg.retain = pkt.retain
        msg.dup = pkt.dup
        msg.pid = pkt.pid
        reason = 0
        if self.version >= 5:
            self._alias_in(msg)
            if pkt.props.get_int(_PAYLOAD_FORMAT, 0) == 1 and self.check_utf8_payload:
                try:
                    check_utf8(pkt.buf, pkt.data, pkt.data + pkt.data_len)
                except MQTTError:
                    reason = _PAYLOAD_FORMAT_INVALID  # [U-3.3.2-b] refused in the ack
        if qos == 2:
            i = 0
            free = -1
            while i < self.inbound:
                p = self.in_pid[i]
                if p == pkt.pid:
                    # Repeated before PUBREL: acknowledge, deliver nothing [MQTT-4.3.3-10]
                    self._send_ack(_PUBREC, pkt.pid)
                    return
                if not p and free < 0:
                    free = i
                i += 1
            if free < 0 and self.version >= 5:
                # More unacknowledged QoS 2 than our Receive Maximum [U-3.3.4-d]
                raise MQTTError(_RECEIVE_MAXIMUM_EXCEEDED)
            # 3.1.1 has no Receive Maximum: a server may hold more QoS 2 messages
            # unreleased than we have slots. Then the message is delivered and
            # acknowledged unrecorded: only a resend after a reconnect (its
            # PUBREC lost) could deliver it twice [MQTT-4.3.3-2 (3.1.1)].
            if reason < 0x80 and free >= 0:
                self.in_pid[free] = pkt.pid  # PUBREC >= 0x80 ends the flow [MQTT-4.3.3-9]
                if self.ob:
                    self.ob.inbound(pkt.pid, True)
        if reason < 0x80:
            self._deliver(msg)
        # Every PUBLISH is acknowledged, in order of arrival, even when the
        # application failed on it [MQTT-4.5.0-2] [MQTT-4.6.0-2] [MQTT-4.6.0-3]
        if qos == 1 and (not self.manual_ack or reason >= 0x80):
            self._send_ack(_PUBACK, pkt.pid, reason)  # [MQTT-4.3.2-4]
        elif qos == 2:
            self._send_ack(_PUBREC, pkt.pid, reason)  # [MQTT-4.3.3-8]

    def ack(self, pid):
        """PUBACK a QoS 1 message delivered while manual_ack is set, once the
        application has it safe. Call in delivery order [MQTT-4.6.0-2]; after
        a reconnect the server sends unacknowledged ones again (DUP=1)."""
        self._send_ack(_PUBACK, pid)  # [MQTT-4.3.2-4]

    def _deliver(self, msg):
        if self.on_message:
            try:
                self.on_message(msg)
            except Exception as e:  # the message is still acknowledged [MQTT-4.5.0-2]
                self.callback_error = e

    def _alias_in(self, msg):
        """Resolve an inbound Topic Alias [U-3.3.4-a..c]."""
        a = self.pkt.props.get_int(_TOPIC_ALIAS, 0)
        if not a:
            return
        if a > self.a_in_max:
            raise MQTTError(_TOPIC_ALIAS_INVALID)  # [U-3.3.4-a] above our maximum
        m = self.alias_topic_max
        o = (a - 1) * m
        n = msg.topic_len
        if n:  # set or replace the mapping [U-3.3.4-b]
            if n > m:
                raise MQTTError(_IMPL_ERROR)  # aliased topic longer than alias_topic_max
            b = msg.buf
            t = msg.topic_off
            s = self.a_in_topic
            k = 0
            while k < n:
                s[o + k] = b[t + k]
                k += 1
            self.a_in_len[a - 1] = n
        else:
            n = self.a_in_len[a - 1]
            if not n:
                raise protocol_error()  # [U-3.3.4-c] unknown alias
            msg.topic_buf = self.a_in_topic
            msg.topic_off = o
            msg.topic_len = n

    def _slot_of(self, pid, state):
        i = 0
        while i < self.slots:
            if self.s_state[i] == state and self.s_pid[i] == pid:
                return i
            i += 1
        return -1

    def _release(self, i, reason):
        """A QoS 1/2 flow ended: free the slot and the quota it held [U-4.9-a]."""
        self._free(i, reason)
        if self.quota < self.server_receive_max:
            self.quota += 1
        if self.queued:
            self._pump()

    def _ack_done(self, state):
        pkt = self.pkt
        i = self._slot_of(pkt.pid, state)
        if i >= 0:
            self._release(i, pkt.reason)

    def _on_pubrec(self):
        pkt = self.pkt
        i = self._slot_of(pkt.pid, _WAIT_REC)
        if i < 0:
            if self._slot_of(pkt.pid, _WAIT_COMP) >= 0:
                self._send_ack(_PUBREL, pkt.pid)  # PUBREC repeated: PUBREL again
            else:
                self._send_ack(_PUBREL, pkt.pid, _PID_NOT_FOUND)
            return
        if pkt.reason >= 0x80:
            self._release(i, pkt.reason)  # flow ends, no retransmission [MQTT-4.4.0-2]
            return
        # PUBREL, in PUBREC order; the PUBLISH is never sent again [MQTT-4.3.3-4]
        # [MQTT-4.3.3-6] [MQTT-4.6.0-4]
        self.s_state[i] = _WAIT_COMP
        if self.ob:
            self.ob.rec(i)
        self._send_ack(_PUBREL, pkt.pid)

    def _on_pubrel(self):
        pkt = self.pkt
        i = 0
        while i < self.inbound:
            if self.in_pid[i] == pkt.pid:
                self.in_pid[i] = 0
                if self.ob:
                    self.ob.inbound(pkt.pid, False)
                self._send_ack(_PUBCOMP, pkt.pid)  # [MQTT-4.3.3-11]
                return
            i += 1
        self._send_ack(_PUBCOMP, pkt.pid, _PID_NOT_FOUND)

    # ---- keep-alive ------------------------------------------------------

    def tick(self):
        """Call now and then (at least every next_timeout() ms): sends PINGREQ
        when the link was quiet for the keep-alive period; raises OSError when
        a PINGREQ went unanswered (half-open link)."""
        if not self.connected or not self.keepalive_ms:
            return
        now = self.clock()
        if self.ping_out:  # PINGRESP awaited for half the keep-alive, at least 1 s
            if ticks_diff(now, self.ping_t) >= max(self.keepalive_ms // 2, 1000):
                self.lost()
                raise OSError("keepalive")  # no PINGRESP
        elif (ticks_diff(now, self.last_tx) >= self.keepalive_ms
              or ticks_diff(now, self.last_rx) >= self.keepalive_ms):
            n = _ctl.encode_ping(self.tx, 0, _PINGREQ)
            self._send(self.tx, 0, n)
            self.ping_out = True
            self.ping_t = now

    def next_timeout(self):
        """Milliseconds until tick() has work, or -1 with no keep-alive."""
        if not self.connected or not self.keepalive_ms:
            return -1
        now = self.clock()
        if self.ping_out:
            return max(0, max(self.keepalive_ms // 2, 1000) - ticks_diff(now, self.ping_t))
        d = self.keepalive_ms - max(ticks_diff(now, self.last_tx), ticks_diff(now, self.last_rx))
        return max(0, d)
