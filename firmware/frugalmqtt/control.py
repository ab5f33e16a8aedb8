# The control packets a client sends and receives: encoding CONNECT,
# SUBSCRIBE, UNSUBSCRIBE, PINGREQ/PINGRESP, DISCONNECT; decoding CONNACK,
# SUBACK, UNSUBACK, DISCONNECT, AUTH; and decode(), which checks the fixed
# header of any packet a client receives and decodes it. The broker direction
# (decoding CONNECT/SUBSCRIBE/UNSUBSCRIBE, encoding CONNACK/SUBACK/UNSUBACK/
# AUTH) is host code: frugalmqtt_host/server.py.
try:
    from micropython import const
except ImportError:
    const = int  # CPython

from .codec import (malformed, protocol_error, check_first, check_filter,
                    put_vbi, put_u16, put_str, str_len, bin_len, vbi_size, topic_len)
from . import props as _props
from .publish import total, decode_publish, decode_ack

# Packet types (codec.CONNECT...): local consts cost no RAM, imported names do
_CONNECT = const(1)
_CONNACK = const(2)
_PUBLISH = const(3)
_PUBACK = const(4)
_PUBCOMP = const(7)
_SUBSCRIBE = const(8)
_SUBACK = const(9)
_UNSUBSCRIBE = const(10)
_UNSUBACK = const(11)
_DISCONNECT = const(14)
_AUTH = const(15)
_WILL = const(0)  # props.WILL
_SUBSCRIPTION_ID = const(0x0B)  # props.SUBSCRIPTION_ID


_SUBACK_V4 = b"\x00\x01\x02\x80"
_SUBACK_V5 = b"\x00\x01\x02\x80\x83\x87\x8f\x91\x97\x9e\xa1\xa2"
_UNSUBACK_V5 = b"\x00\x11\x80\x83\x87\x8f\x91"
_DISCONNECT_V5 = (b"\x00\x04\x80\x81\x82\x83\x87\x89\x8b\x8d\x8e\x8f\x90\x93\x94\x95"
                  b"\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f\xa0\xa1\xa2")
_AUTH_V5 = b"\x00\x18\x19"
_CONNACK_V4 = b"\x00\x01\x02\x03\x04\x05"
_CONNACK_V5 = (b"\x00\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8c\x90\x95\x97"
               b"\x99\x9a\x9b\x9c\x9d\x9f")


def _props_len(v, props, where):
    if v < 5:
        if props:
            raise ValueError("need MQTT5")  # properties
        return 0
    return _props.size(props, where)


def _head(buf, off, first, rl):
    if off + total(rl) > len(buf):
        raise ValueError("no room")  # buffer too small
    buf[off] = first
    return put_vbi(buf, off + 1, rl)


def _put_props(buf, o, v, props, pn):
    if v < 5:
        return o
    return _props.put(buf, put_vbi(buf, o, pn), props)


def _pl(v, pn):
    """Bytes taken by a property block of pn bytes (none on 3.1.1)."""
    return vbi_size(pn) + pn if v >= 5 else 0


# ---- CONNECT ---------------------------------------------------------------

class Will:
    """A Will Message for CONNECT."""

    def __init__(self, topic, payload, qos=0, retain=False, props=None):
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.props = props


def _connect_rl(v, client_id, props, will, username, password):
    if v != 4 and v != 5:
        raise ValueError("version: 4 or 5")  # protocol level: 3.1.1 or 5.0
    rl = 10 + _pl(v, _props_len(v, props, _CONNECT)) + 2 + str_len(client_id)
    if will:
        if not 0 <= will.qos <= 2:
            raise ValueError("bad QoS")  # will
        rl += _pl(v, _props_len(v, will.props, _WILL))
        rl += 2 + topic_len(will.topic) + 2 + bin_len(will.payload)  # [MQTT-4.7.0-1]
    if username is not None:
        rl += 2 + str_len(username)
    if password is not None:
        if username is None and v < 5:
            raise ValueError("need user")  # [MQTT-3.1.2-22] 3.1.1: password needs username
        rl += 2 + bin_len(password)
    return rl


def encode_connect(buf, off, v, client_id, keepalive=60, clean=True, props=None, will=None,
                   username=None, password=None):
    rl = _connect_rl(v, client_id, props, will, username, password)
    if not 0 <= keepalive <= 0xFFFF:
        raise ValueError("keepalive: 0..65535")
    o = _head(buf, off, _CONNECT << 4, rl)
    o = put_str(buf, o, "MQTT", 4)
    buf[o] = v
    flags = 0x02 if clean else 0
    if will:
        flags |= 0x04 | (will.qos << 3) | (0x20 if will.retain else 0)
    if username is not None:
        flags |= 0x80
    if password is not None:
        flags |= 0x40
    buf[o + 1] = flags
    o = put_u16(buf, o + 2, keepalive)
    o = _put_props(buf, o, v, props, _props_len(v, props, _CONNECT))
    o = put_str(buf, o, client_id, str_len(client_id))
    if will:
        o = _put_props(buf, o, v, will.props, _props_len(v, will.props, _WILL))
        o = put_str(buf, o, will.topic, str_len(will.topic))
        o = put_str(buf, o, will.payload, len(will.payload))
    if username is not None:
        o = put_str(buf, o, username, str_len(username))
    if password is not None:
        o = put_str(buf, o, password, len(password))
    return o - off


# ---- SUBSCRIBE / SUBACK / UNSUBSCRIBE / UNSUBACK -----------------------------

def _sub_rl(v, pid, filters, props, where):
    """Remaining length of a SUBSCRIBE (filters are (filter, options) pairs)
    or UNSUBSCRIBE (filters only)."""
    if not 0 < pid <= 0xFFFF:
        raise ValueError("packet id")  # [MQTT-2.2.1-3] 1..65535
    if where == _SUBSCRIBE and v >= 5:
        for p in props or ():
            if p[0] == _SUBSCRIPTION_ID and p[1] > 268435455:
                raise ValueError("bad props")  # subscription identifier too large
    n = 2 + _pl(v, _props_len(v, props, where))
    if not filters:
        raise ValueError("no filter")  # [MQTT-3.8.3-2] [MQTT-3.10.3-2]
    for f in filters:
        if where == _SUBSCRIBE:
            opts = f[1]
            f = f[0]
            if opts & 3 == 3 or opts >> 4 > 2 or opts & 0xC0 or (v < 5 and opts & 0xFC):
                raise ValueError("bad sub options")  # [MQTT-3.8.3-4] [MQTT-3.8.3-5]
            if opts & 4 and (f.startswith("$share/") if type(f) is str
                             else bytes(f[:7]) == b"$share/"):
                raise ValueError("bad sub options")  # [MQTT-3.8.3-4] no local on $share
            n += 1
        n += 2 + check_filter(f)  # [MQTT-4.7.1-1] [MQTT-4.7.1-2]
    return n


def encode_subscribe(buf, off, v, pid, subs, props=None):
    """subs: sequence of (topic filter, options); options = QoS | no local << 2 |
    retain as published << 3 | retain handling << 4 (3.1.1: QoS only)."""
    rl = _sub_rl(v, pid, subs, props, _SUBSCRIBE)
    o = _head(buf, off, (_SUBSCRIBE << 4) | 2, rl)
    o = _put_props(buf, put_u16(buf, o, pid), v, props, _props_len(v, props, _SUBSCRIBE))
    for f, opts in subs:
        o = put_str(buf, o, f, str_len(f))
        buf[o] = opts
        o += 1
    return o - off


def encode_unsubscribe(buf, off, v, pid, filters, props=None):
    rl = _sub_rl(v, pid, filters, props, _UNSUBSCRIBE)
    o = _head(buf, off, (_UNSUBSCRIBE << 4) | 2, rl)
    o = _put_props(buf, put_u16(buf, o, pid), v, props, _props_len(v, props, _UNSUBSCRIBE))
    for f in filters:
        o = put_str(buf, o, f, str_len(f))
    return o - off


def _decode_codes(pkt, v, ptype, allowed):
    cur = pkt.cur
    pkt.pid = cur.u16()
    if not pkt.pid:
        raise malformed()  # packet id 0
    if v >= 5:
        _props.parse(pkt.props, cur, ptype)
    else:
        pkt.props.clear()
    pkt.data = cur.pos
    pkt.data_len = cur.end - cur.pos
    b = cur.buf
    while cur.pos < cur.end:
        if b[cur.pos] not in allowed:
            raise malformed()  # unknown reason code
        cur.pos += 1
    if ptype == _SUBACK or v >= 5:
        if not pkt.data_len:
            raise protocol_error()  # no reason codes


# ---- PINGREQ / PINGRESP / DISCONNECT / AUTH --------------------------------

def encode_ping(buf, off, ptype):
    """PINGREQ (C0 00) or PINGRESP (D0 00)."""
    _head(buf, off, ptype << 4, 0)
    return 2


def _reason_rl(v, reason, props, where, allowed):
    if v < 5:
        if reason or props:
            raise ValueError("need MQTT5")  # reason codes, properties
        return 0
    if reason not in allowed:
        raise ValueError("bad reason")
    pn = _props.size(props, where)
    if pn:
        return 1 + vbi_size(pn) + pn
    return 1 if reason else 0  # short form: success, no properties


def _encode_reason(buf, off, v, ptype, reason, props, allowed):
    rl = _reason_rl(v, reason, props, ptype, allowed)
    o = _head(buf, off, ptype << 4, rl)
    if rl:
        buf[o] = reason
        o += 1
        if rl > 1:
            o = _put_props(buf, o, v, props, _props.size(props, ptype))
    return o - off


def encode_disconnect(buf, off, v, reason=0, props=None):
    return _encode_reason(buf, off, v, _DISCONNECT, reason, props, _DISCONNECT_V5)


def _decode_reason(pkt, v, ptype, allowed):
    cur = pkt.cur
    pkt.reason = 0
    pkt.props.clear()
    if v < 5 or cur.pos == cur.end:
        return  # 3.1.1, or the short form: success, no properties
    pkt.reason = cur.u8()
    if pkt.reason not in allowed:
        raise malformed()  # unknown reason code
    if cur.pos < cur.end:
        _props.parse(pkt.props, cur, ptype)


# ---- Any packet ------------------------------------------------------------

def decode(pkt, first, buf, off, end, v):
    """Decode the body buf[off:end] of a packet whose first byte is `first`,
    received on protocol level v. Fills pkt and returns the packet type.
    Anything malformed raises MQTTError with the reason code to send."""
    if end - off == 2 and (first == 0x40 or first == 0x50 or first == 0x62 or first == 0x70) and (
            buf[off] or buf[off + 1]):
        # The common case first: an ack in its short form (reason 0x00, no
        # properties) [U-3.4.2-a] with valid flags [MQTT-3.6.1-1] and a packet
        # id, decoded as decode_ack would without its checks
        t = first >> 4
        pkt.type = t
        pkt.first = first
        pkt.buf = buf
        pkt.pid = (buf[off] << 8) | buf[off + 1]
        pkt.reason = 0
        if pkt.props.nids:
            pkt.props.clear()
        return t
    t = check_first(first, v)  # [MQTT-2.1.3-1]
    pkt.type = t
    pkt.first = first
    pkt.buf = buf
    cur = pkt.cur
    cur.set(buf, off, end)
    if t == _PUBLISH:
        decode_publish(pkt, first, v)
        return t
    if _PUBACK <= t <= _PUBCOMP:
        decode_ack(pkt, t, v)
        return t
    # No stale properties (the last packet's, or a block whose parse failed)
    # on PINGREQ/PINGRESP/CONNECT; the other decoders reset them too.
    pkt.props.clear()
    if t == _CONNACK:
        flags = cur.u8()
        if flags & 0xFE:
            raise malformed()  # [MQTT-3.2.2-1] reserved flags
        pkt.sp = flags
        pkt.reason = cur.u8()
        if pkt.reason not in (_CONNACK_V5 if v >= 5 else _CONNACK_V4):
            raise malformed()  # unknown reason code
        if pkt.sp and pkt.reason:
            raise malformed()  # [MQTT-3.2.2-6] session present with an error
        if v >= 5:
            _props.parse(pkt.props, cur, t)
    elif t == _SUBACK:
        _decode_codes(pkt, v, t, _SUBACK_V5 if v >= 5 else _SUBACK_V4)
    elif t == _UNSUBACK:
        _decode_codes(pkt, v, t, _UNSUBACK_V5 if v >= 5 else b"")
    elif t == _DISCONNECT:
        if v < 5 and cur.pos != cur.end:
            raise malformed()  # 3.1.1 DISCONNECT has no body
        _decode_reason(pkt, v, t, _DISCONNECT_V5)
    elif t == _AUTH:
        _decode_reason(pkt, v, t, _AUTH_V5)
    elif t == _CONNECT or t == _SUBSCRIBE or t == _UNSUBSCRIBE:
        raise protocol_error()  # a client never receives these (the host decodes them)
    # PINGREQ / PINGRESP have no body
    if cur.pos != cur.end:
        raise malformed()  # bytes after the packet
    return t
