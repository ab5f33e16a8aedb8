# The broker direction of the codec, for the host simulator and tests:
# decoding CONNECT, SUBSCRIBE and UNSUBSCRIBE (a client never receives them)
# and encoding CONNACK, SUBACK, UNSUBACK and AUTH (a client never sends them);
# decode() and decode_packet() take a packet of either direction. The
# decoders return Python values (they run on the host).
try:
    from micropython import const
except ImportError:
    const = int  # CPython

from frugalmqtt.codec import (MQTTError, malformed, protocol_error, check_filter, check_first,
                              put_u16, CONNECT, CONNACK, SUBSCRIBE, SUBACK, UNSUBSCRIBE,
                              UNSUBACK, AUTH)
from frugalmqtt import control
from frugalmqtt import props as _props
from frugalmqtt.publish import total
from frugalmqtt.control import (Will, _props_len, _head, _put_props, _pl, _reason_rl,
                                _encode_reason, _SUBACK_V4, _SUBACK_V5, _UNSUBACK_V5, _AUTH_V5,
                                _CONNACK_V4, _CONNACK_V5)
from .codec import props_items

UNSUPPORTED_PROTOCOL_VERSION = const(0x84)


def _check_pid(pid):
    if not 0 < pid <= 0xFFFF:
        raise ValueError("packet id")  # [MQTT-2.2.1-3] 1..65535


# ---- CONNECT ---------------------------------------------------------------

class Connect:
    """A decoded CONNECT (server direction)."""

    def __init__(self):
        self.version = 0
        self.client_id = ""
        self.clean = True
        self.keepalive = 0
        self.props = []
        self.will = None
        self.username = None
        self.password = None


def _take_str(cur):
    o = cur.string()
    return bytes(cur.buf[o:o + cur.n]).decode()


def _take_bin(cur):
    o = cur.binary()
    return bytes(cur.buf[o:o + cur.n])


def _take_props(pkt, where):
    _props.parse(pkt.props, pkt.cur, where)
    return props_items(pkt.props)


def decode_connect(pkt):
    """Decode a CONNECT body at pkt.cur into a Connect (server direction)."""
    cur = pkt.cur
    c = Connect()
    if _take_str(cur) != "MQTT":
        raise MQTTError(UNSUPPORTED_PROTOCOL_VERSION, "protocol name")
    c.version = v = cur.u8()
    if v != 4 and v != 5:
        raise MQTTError(UNSUPPORTED_PROTOCOL_VERSION, "protocol level")
    flags = cur.u8()
    if flags & 0x01:
        raise malformed("reserved CONNECT flag")  # [MQTT-3.1.2-3]
    c.clean = bool(flags & 0x02)
    wqos = (flags >> 3) & 3
    if not flags & 0x04 and (wqos or flags & 0x20):
        raise malformed("will QoS/retain without will")  # [MQTT-3.1.2-11] [MQTT-3.1.2-13]
    if wqos == 3:
        raise malformed("will QoS 3")  # [MQTT-3.1.2-12]
    if v < 5 and flags & 0x40 and not flags & 0x80:
        raise malformed("password without username")  # [MQTT-3.1.2-22]
    c.keepalive = cur.u16()
    if v >= 5:
        c.props = _take_props(pkt, CONNECT)
    c.client_id = _take_str(cur)
    if flags & 0x04:
        wprops = _take_props(pkt, _props.WILL) if v >= 5 else None
        topic = _take_str(cur)
        if not topic:
            raise malformed("empty will topic")  # [MQTT-4.7.3-1]
        if "+" in topic or "#" in topic:
            raise protocol_error("wildcard in will topic")  # [MQTT-4.7.0-1]
        c.will = Will(topic, _take_bin(cur), wqos, bool(flags & 0x20), wprops)
    if flags & 0x80:
        c.username = _take_str(cur)
    if flags & 0x40:
        c.password = _take_bin(cur)
    return c


# ---- CONNACK ---------------------------------------------------------------

def _connack_rl(v, session_present, reason, props):
    if reason not in (_CONNACK_V5 if v >= 5 else _CONNACK_V4):
        raise ValueError("reason code not allowed in CONNACK")
    if session_present and reason:
        raise ValueError("session present with an error")  # [MQTT-3.2.2-6]
    return 2 + _pl(v, _props_len(v, props, CONNACK))


def size_connack(v, session_present=False, reason=0, props=None):
    return total(_connack_rl(v, session_present, reason, props))


def encode_connack(buf, off, v, session_present=False, reason=0, props=None):
    rl = _connack_rl(v, session_present, reason, props)
    o = _head(buf, off, CONNACK << 4, rl)
    buf[o] = 1 if session_present else 0
    buf[o + 1] = reason
    o = _put_props(buf, o + 2, v, props, _props_len(v, props, CONNACK))
    return o - off


# ---- SUBSCRIBE / SUBACK / UNSUBSCRIBE / UNSUBACK ---------------------------

def _take_filters(pkt, v, with_options):
    cur = pkt.cur
    pkt.pid = cur.u16()
    if not pkt.pid:
        raise malformed("packet id 0")  # [MQTT-2.3.1-1]
    if v >= 5:
        _props.parse(pkt.props, cur, SUBSCRIBE if with_options else UNSUBSCRIBE)
    else:
        pkt.props.clear()
    out = []
    while cur.pos < cur.end:
        f = _take_str(cur)
        try:
            check_filter(f)
        except ValueError:
            raise malformed("bad topic filter")  # [MQTT-4.7.1-1] [MQTT-4.7.1-2]
        if with_options:
            opts = cur.u8()
            if opts & 3 == 3 or opts >> 4 > 2 or opts & 0xC0 or (v < 5 and opts & 0xFC):
                raise malformed("bad subscription options")  # [MQTT-3.8.3-4] [MQTT-3-8.3-5]
            if opts & 4 and f.startswith("$share/"):
                raise protocol_error("no local on a shared subscription")  # [MQTT-3.8.3-4]
            out.append((f, opts))
        else:
            out.append(f)
    if not out:
        raise protocol_error("no topic filter")  # [MQTT-3.8.3-2] [MQTT-3.10.3-2]
    return out


def _codes_rl(v, pid, codes, props, where, allowed):
    _check_pid(pid)
    if not codes and (where == SUBACK or v >= 5):
        raise ValueError("at least one reason code")  # one per filter [MQTT-3.9.3-1]
    for c in codes:
        if c not in allowed:
            raise ValueError("reason code not allowed here")
    return 2 + _pl(v, _props_len(v, props, where)) + len(codes)


def _encode_codes(buf, off, v, ptype, pid, codes, props, allowed):
    rl = _codes_rl(v, pid, codes, props, ptype, allowed)
    o = _head(buf, off, ptype << 4, rl)
    o = _put_props(buf, put_u16(buf, o, pid), v, props, _props_len(v, props, ptype))
    for c in codes:
        buf[o] = c
        o += 1
    return o - off


def size_suback(v, pid, codes, props=None):
    return total(_codes_rl(v, pid, codes, props, SUBACK, _SUBACK_V5 if v >= 5 else _SUBACK_V4))


def encode_suback(buf, off, v, pid, codes, props=None):
    return _encode_codes(buf, off, v, SUBACK, pid, codes, props,
                         _SUBACK_V5 if v >= 5 else _SUBACK_V4)


def size_unsuback(v, pid, codes=(), props=None):
    if v < 5:
        return 4
    return total(_codes_rl(v, pid, codes, props, UNSUBACK, _UNSUBACK_V5))


def encode_unsuback(buf, off, v, pid, codes=(), props=None):
    """3.1.1 UNSUBACK carries only the packet id; 5.0 one code per filter."""
    if v < 5:
        if codes or props:
            raise ValueError("3.1.1 UNSUBACK has no reason codes")
        codes = ()
    return _encode_codes(buf, off, v, UNSUBACK, pid, codes, props,
                         _UNSUBACK_V5 if v >= 5 else b"")


# ---- AUTH ------------------------------------------------------------------

def size_auth(reason=0, props=None):
    return total(_reason_rl(5, reason, props, AUTH, _AUTH_V5))


def encode_auth(buf, off, reason=0, props=None):
    return _encode_reason(buf, off, 5, AUTH, reason, props, _AUTH_V5)


# ---- Any packet ------------------------------------------------------------

def decode(pkt, first, buf, off, end, v):
    """control.decode() for packets of both directions: also CONNECT
    (pkt.extra: a Connect), SUBSCRIBE (pkt.extra: [(filter, options)]) and
    UNSUBSCRIBE (pkt.extra: [filter]); pkt.extra is None for the others."""
    t = first >> 4
    if t != CONNECT and t != SUBSCRIBE and t != UNSUBSCRIBE:
        pkt.extra = None
        return control.decode(pkt, first, buf, off, end, v)
    check_first(first, v)  # [MQTT-2.1.3-1]
    pkt.type = t
    pkt.first = first
    pkt.buf = buf
    cur = pkt.cur
    cur.set(buf, off, end)
    pkt.props.clear()
    if t == CONNECT:
        pkt.extra = decode_connect(pkt)
    else:
        pkt.extra = _take_filters(pkt, v, t == SUBSCRIBE)
    if cur.pos != cur.end:
        raise malformed()  # bytes after the packet
    return t


def decode_packet(pkt, buf, off=0, end=None, v=5):
    """Decode one whole packet of either direction (fixed header included) in
    buf[off:end]; its remaining length must match exactly."""
    if end is None:
        end = len(buf)
    cur = pkt.cur
    cur.set(buf, off + 1, end)
    if off >= end:
        raise malformed()  # empty packet
    rl = cur.vbi()
    if cur.pos + rl != end:
        raise malformed()  # remaining length does not match the data
    return decode(pkt, buf[off], buf, cur.pos, end, v)
