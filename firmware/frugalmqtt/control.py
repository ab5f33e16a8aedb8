# The control packets a client sends and receives: encoding CONNECT,
# SUBSCRIBE, UNSUBSCRIBE, PINGREQ/PINGRESP, DISCONNECT; decoding CONNACK,
# SUBACK, UNSUBACK, DISCONNECT, AUTH; and decode(), which checks the fixed
# header of any packet and decodes it. The broker direction (decoding
# CONNECT/SUBSCRIBE/UNSUBSCRIBE, encoding CONNACK/SUBACK/UNSUBACK/AUTH) is in
# server.py, which devices never import: decode() loads it lazily only for the
# packets a client never receives.
try:
    from micropython import const
except ImportError:
    const = lambda x: x  # CPython

from .codec import (malformed, protocol_error, check_first, check_filter,
                    put_vbi, put_u16, put_str, str_len, bin_len, vbi_size, topic_len,
                    CONNECT, CONNACK, PUBLISH, PUBACK, PUBCOMP, SUBSCRIBE, SUBACK,
                    UNSUBSCRIBE, UNSUBACK, DISCONNECT, AUTH)
from . import props as _props
from .publish import total, decode_publish, decode_ack


_SUBACK_V4 = b"\x00\x01\x02\x80"
_SUBACK_V5 = b"\x00\x01\x02\x80\x83\x87\x8f\x91\x97\x9e\xa1\xa2"
_UNSUBACK_V5 = b"\x00\x11\x80\x83\x87\x8f\x91"
_DISCONNECT_V5 = (b"\x00\x04\x80\x81\x82\x83\x87\x89\x8b\x8d\x8e\x8f\x90\x93\x94\x95"
                  b"\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f\xa0\xa1\xa2")
_AUTH_V5 = b"\x00\x18\x19"
_CONNACK_V4 = b"\x00\x01\x02\x03\x04\x05"
_CONNACK_V5 = (b"\x00\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8c\x90\x95\x97"
               b"\x99\x9a\x9b\x9c\x9d\x9f")


def _check_version(v):
    if v != 4 and v != 5:
        raise ValueError("protocol level must be 4 (3.1.1) or 5 (5.0)")


def _props_len(v, props, where):
    if v < 5:
        if props:
            raise ValueError("properties need MQTT 5")
        return 0
    return _props.size(props, where)


def _head(buf, off, first, rl):
    if off + total(rl) > len(buf):
        raise ValueError("buffer too small for packet")
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
    _check_version(v)
    rl = 10 + _pl(v, _props_len(v, props, CONNECT)) + 2 + str_len(client_id)
    if will:
        if not 0 <= will.qos <= 2:
            raise ValueError("will QoS must be 0..2")
        rl += _pl(v, _props_len(v, will.props, _props.WILL))
        rl += 2 + topic_len(will.topic) + 2 + bin_len(will.payload)  # [MQTT-4.7.0-1]
    if username is not None:
        rl += 2 + str_len(username)
    if password is not None:
        if username is None and v < 5:
            raise ValueError("3.1.1 needs a username with a password")  # [MQTT-3.1.2-22]
        rl += 2 + bin_len(password)
    return rl


def size_connect(v, client_id, keepalive=60, clean=True, props=None, will=None,
                 username=None, password=None):
    return total(_connect_rl(v, client_id, props, will, username, password))


def encode_connect(buf, off, v, client_id, keepalive=60, clean=True, props=None, will=None,
                   username=None, password=None):
    rl = _connect_rl(v, client_id, props, will, username, password)
    if not 0 <= keepalive <= 0xFFFF:
        raise ValueError("keepalive must be 0..65535")
    o = _head(buf, off, CONNECT << 4, rl)
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
    o = _put_props(buf, o, v, props, _props_len(v, props, CONNECT))
    o = put_str(buf, o, client_id, str_len(client_id))
    if will:
        o = _put_props(buf, o, v, will.props, _props_len(v, will.props, _props.WILL))
        o = put_str(buf, o, will.topic, str_len(will.topic))
        o = put_str(buf, o, will.payload, len(will.payload))
    if username is not None:
        o = put_str(buf, o, username, str_len(username))
    if password is not None:
        o = put_str(buf, o, password, len(password))
    return o - off


# ---- CONNACK ---------------------------------------------------------------

def decode_connack(pkt, v):
    cur = pkt.cur
    flags = cur.u8()
    if flags & 0xFE:
        raise malformed("reserved CONNACK flags")  # [MQTT-3.2.2-1]
    pkt.sp = flags
    pkt.reason = cur.u8()
    if pkt.reason not in (_CONNACK_V5 if v >= 5 else _CONNACK_V4):
        raise malformed("unknown CONNACK reason code")
    if pkt.sp and pkt.reason:
        raise malformed("session present with an error")  # [MQTT-3.2.2-6]
    if v >= 5:
        _props.parse(pkt.props, cur, CONNACK)
    else:
        pkt.props.clear()


# ---- SUBSCRIBE / SUBACK / UNSUBSCRIBE / UNSUBACK -----------------------------

def _filters_len(v, filters, with_options):
    if not filters:
        raise ValueError("at least one topic filter")  # [MQTT-3.8.3-2] [MQTT-3.10.3-2]
    n = 0
    for f in filters:
        if with_options:
            opts = f[1]
            f = f[0]
            if opts & 3 == 3 or opts >> 4 > 2 or opts & 0xC0 or (v < 5 and opts & 0xFC):
                raise ValueError("bad subscription options")  # [MQTT-3.8.3-4] [MQTT-3.8.3-5]
            if opts & 4 and _is_shared(f):
                raise ValueError("no local on a shared subscription")  # [MQTT-3.8.3-4]
            n += 1
        n += 2 + check_filter(f)  # [MQTT-4.7.1-1] [MQTT-4.7.1-2]
    return n


def _is_shared(f):
    if type(f) is str:
        return f.startswith("$share/")
    return bytes(f[:7]) == b"$share/"


def _check_pid(pid):
    if not 0 < pid <= 0xFFFF:
        raise ValueError("packet id must be 1..65535")  # [MQTT-2.2.1-3]


def _sub_rl(v, pid, filters, props, where, with_options):
    _check_pid(pid)
    if where == SUBSCRIBE and v >= 5:
        for p in props or ():
            if p[0] == _props.SUBSCRIPTION_ID and p[1] > 268435455:
                raise ValueError("subscription identifier too large")
    return 2 + _pl(v, _props_len(v, props, where)) + _filters_len(v, filters, with_options)


def size_subscribe(v, pid, subs, props=None):
    return total(_sub_rl(v, pid, subs, props, SUBSCRIBE, True))


def encode_subscribe(buf, off, v, pid, subs, props=None):
    """subs: sequence of (topic filter, options); options = QoS | no local << 2 |
    retain as published << 3 | retain handling << 4 (3.1.1: QoS only)."""
    rl = _sub_rl(v, pid, subs, props, SUBSCRIBE, True)
    o = _head(buf, off, (SUBSCRIBE << 4) | 2, rl)
    o = _put_props(buf, put_u16(buf, o, pid), v, props, _props_len(v, props, SUBSCRIBE))
    for f, opts in subs:
        o = put_str(buf, o, f, str_len(f))
        buf[o] = opts
        o += 1
    return o - off


def size_unsubscribe(v, pid, filters, props=None):
    return total(_sub_rl(v, pid, filters, props, UNSUBSCRIBE, False))


def encode_unsubscribe(buf, off, v, pid, filters, props=None):
    rl = _sub_rl(v, pid, filters, props, UNSUBSCRIBE, False)
    o = _head(buf, off, (UNSUBSCRIBE << 4) | 2, rl)
    o = _put_props(buf, put_u16(buf, o, pid), v, props, _props_len(v, props, UNSUBSCRIBE))
    for f in filters:
        o = put_str(buf, o, f, str_len(f))
    return o - off


def _decode_codes(pkt, v, ptype, allowed):
    cur = pkt.cur
    pkt.pid = cur.u16()
    if not pkt.pid:
        raise malformed("packet id 0")
    if v >= 5:
        _props.parse(pkt.props, cur, ptype)
    else:
        pkt.props.clear()
    pkt.data = cur.pos
    pkt.data_len = cur.end - cur.pos
    b = cur.buf
    while cur.pos < cur.end:
        if b[cur.pos] not in allowed:
            raise malformed("unknown reason code")
        cur.pos += 1
    if ptype == SUBACK or v >= 5:
        if not pkt.data_len:
            raise protocol_error("no reason codes")


# ---- PINGREQ / PINGRESP / DISCONNECT / AUTH --------------------------------

def encode_ping(buf, off, ptype):
    """PINGREQ (C0 00) or PINGRESP (D0 00)."""
    _head(buf, off, ptype << 4, 0)
    return 2


def _reason_rl(v, reason, props, where, allowed):
    if v < 5:
        if reason or props:
            raise ValueError("reason codes and properties need MQTT 5")
        return 0
    if reason not in allowed:
        raise ValueError("reason code not allowed here")
    pn = _props.size(props, where)
    if pn:
        return 1 + vbi_size(pn) + pn
    return 1 if reason else 0  # short form: success, no properties


def size_disconnect(v, reason=0, props=None):
    return total(_reason_rl(v, reason, props, DISCONNECT, _DISCONNECT_V5))


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
    return _encode_reason(buf, off, v, DISCONNECT, reason, props, _DISCONNECT_V5)


def _decode_reason(pkt, v, ptype, allowed):
    cur = pkt.cur
    pkt.reason = 0
    pkt.props.clear()
    if v < 5 or cur.pos == cur.end:
        return  # 3.1.1, or the short form: success, no properties
    pkt.reason = cur.u8()
    if pkt.reason not in allowed:
        raise malformed("unknown reason code")
    if cur.pos < cur.end:
        _props.parse(pkt.props, cur, ptype)


# ---- Any packet ------------------------------------------------------------

def decode(pkt, first, buf, off, end, v):
    """Decode the body buf[off:end] of a packet whose first byte is `first`,
    received on protocol level v. Fills pkt and returns the packet type.
    Anything malformed raises MQTTError with the reason code to send."""
    t = check_first(first, v)  # [MQTT-2.1.3-1]
    pkt.type = t
    pkt.first = first
    pkt.buf = buf
    cur = pkt.cur
    cur.set(buf, off, end)
    if t == PUBLISH:
        decode_publish(pkt, first, v)
        return t
    if PUBACK <= t <= PUBCOMP:
        decode_ack(pkt, t, v)
        return t
    # No stale properties (the last packet's, or a block whose parse failed)
    # on PINGREQ/PINGRESP/CONNECT; the other decoders reset them too.
    pkt.props.clear()
    if t == CONNACK:
        decode_connack(pkt, v)
    elif t == SUBACK:
        _decode_codes(pkt, v, t, _SUBACK_V5 if v >= 5 else _SUBACK_V4)
    elif t == UNSUBACK:
        _decode_codes(pkt, v, t, _UNSUBACK_V5 if v >= 5 else b"")
    elif t == DISCONNECT:
        if v < 5 and cur.pos != cur.end:
            raise malformed("3.1.1 DISCONNECT has no body")
        _decode_reason(pkt, v, t, _DISCONNECT_V5)
    elif t == AUTH:
        _decode_reason(pkt, v, t, _AUTH_V5)
    elif t == CONNECT or t == SUBSCRIBE or t == UNSUBSCRIBE:
        # Server direction: a client never receives these, so devices never
        # load the module (it is imported here, not at the top).
        from . import server
        if t == CONNECT:
            pkt.extra = server.decode_connect(pkt)
        else:
            pkt.extra = server._take_filters(pkt, v, t == SUBSCRIBE)
    # PINGREQ / PINGRESP have no body
    if cur.pos != cur.end:
        raise malformed("bytes after the packet")
    return t


def decode_packet(pkt, buf, off=0, end=None, v=5):
    """Decode one whole packet (fixed header included) in buf[off:end]; its
    remaining length must match exactly. For hosts and tests: devices
    receive through a codec.Framer and call decode() on the body."""
    if end is None:
        end = len(buf)
    cur = pkt.cur
    cur.set(buf, off + 1, end)
    if off >= end:
        raise malformed("empty packet")
    rl = cur.vbi()
    if cur.pos + rl != end:
        raise malformed("remaining length does not match the data")
    return decode(pkt, buf[off], buf, cur.pos, end, v)
