# PUBLISH and its acknowledgements (PUBACK, PUBREC, PUBREL, PUBCOMP), both
# directions, MQTT 3.1.1 (v=4) and 5.0 (v=5). This is the hot path: encoding
# and decoding allocate nothing under MicroPython (given bytes-like topic and
# payload and a pre-built property sequence).
try:
    from micropython import const
except ImportError:
    const = int  # CPython

from .codec import Cur, malformed, protocol_error, put_vbi, put_u16, put_raw, vbi_size
from . import props as _props

_PUBLISH = const(3)  # packet types (codec.PUBLISH...)
_PUBACK = const(4)
_PUBREL = const(6)
_PUBCOMP = const(7)
_TOPIC_ALIAS = const(0x23)

# Reason codes allowed in each ack [MQTT-3.4.2-1] [MQTT-3.5.2-1] [MQTT-3.6.2-1] [MQTT-3.7.2-1]
_PUB_REASONS = b"\x00\x10\x80\x83\x87\x90\x91\x97\x99"
_REL_REASONS = b"\x00\x92"


class Packet:
    """One decoded packet, reused for every packet received. Fields hold
    numbers and offsets into `buf`; which ones apply depends on `type`."""

    def __init__(self):
        self.cur = Cur()
        self.props = _props.Props()
        self.buf = None
        self.type = 0
        self.first = 0
        self.pid = 0
        self.reason = 0
        self.qos = 0
        self.dup = 0
        self.retain = 0
        self.sp = 0  # CONNACK session present
        self.topic = 0  # offset and length of the topic name in buf
        self.topic_len = 0
        self.data = 0  # offset and length of the payload / SUBACK codes
        self.data_len = 0


def total(rl):
    """Whole packet size for a remaining length."""
    return 1 + vbi_size(rl) + rl


def _publish_props_len(v, props, alias):
    if v < 5:
        if props or alias:
            raise ValueError("need MQTT5")  # properties
        return 0
    n = _props.size(props, _PUBLISH)
    if alias:
        if not 0 < alias <= 0xFFFF:
            raise ValueError("bad alias")  # [MQTT-3.3.2-8] 1..65535
        for p in props or ():
            if p[0] == _TOPIC_ALIAS:
                raise ValueError("bad alias")  # [U-3.3.2-c] given twice
        n += 3
    return n


def publish_rl(v, tn, plen, qos, pn):
    """Remaining length of a PUBLISH from its topic, payload and property lengths."""
    rl = 2 + tn + plen
    if qos:
        rl += 2
    if v >= 5:
        rl += vbi_size(pn) + pn  # [MQTT-2.2.2-1] Property Length always present
    return rl


def put_publish(buf, off, v, topic, tn, payload, plen, qos, pid, retain, dup, props, pn, alias):
    """Write a PUBLISH whose fields the session (or, on a host,
    frugalmqtt_host.codec.encode_publish) already checked: tn, plen and pn
    are the topic, payload and property lengths (pn counts the alias
    property). Returns its length."""
    rl = 2 + tn + plen
    if qos:
        rl += 2
    if v >= 5:
        rl += pn + 1 if pn < 128 else vbi_size(pn) + pn  # [MQTT-2.2.2-1] Property Length always present
    if off + (rl + 2 if rl < 128 else total(rl)) > len(buf):
        raise ValueError("no room")  # buffer too small
    buf[off] = 0x30 | (8 if dup else 0) | (qos << 1) | (1 if retain else 0)
    if rl < 128:
        buf[off + 1] = rl
        o = off + 2
    else:
        o = put_vbi(buf, off + 1, rl)
    buf[o] = tn >> 8  # [MQTT-3.3.2-1]
    buf[o + 1] = tn & 0xFF
    o += 2
    if tn:
        if type(topic) is str:
            o = put_raw(buf, o, topic, tn)
        else:
            buf[o:o + tn] = topic
            o += tn
    if qos:
        buf[o] = pid >> 8
        buf[o + 1] = pid & 0xFF
        o += 2
    if v >= 5:
        if pn < 128:
            buf[o] = pn
            o += 1
        else:
            o = put_vbi(buf, o, pn)
        if alias:
            buf[o] = _TOPIC_ALIAS
            buf[o + 1] = alias >> 8
            buf[o + 2] = alias & 0xFF
            o += 3
        if props:
            o = _props.put(buf, o, props)
    if plen:
        buf[o:o + plen] = payload  # bytes-like (callers refuse str)
        o += plen
    return o - off


def decode_publish(pkt, first, v):
    """Decode a PUBLISH body at pkt.cur (fixed header already checked)."""
    cur = pkt.cur
    pkt.qos = (first >> 1) & 3
    pkt.dup = (first >> 3) & 1
    pkt.retain = first & 1
    pkt.topic = cur.string()  # [MQTT-3.3.2-1] [MQTT-1.5.4-1..3]
    pkt.topic_len = cur.n
    b = cur.buf
    o = pkt.topic
    end = o + cur.n
    while o < end:
        if b[o] == 0x2B or b[o] == 0x23:
            raise protocol_error()  # [MQTT-3.3.2-2] wildcard
        o += 1
    if pkt.qos:
        pkt.pid = cur.u16()
        if not pkt.pid:
            raise protocol_error()  # [MQTT-2.2.1-3] packet id 0
    else:
        pkt.pid = 0  # [MQTT-2.2.1-2] no packet id on QoS 0
    if v >= 5:
        _props.parse(pkt.props, cur, _PUBLISH)  # [MQTT-2.2.2-1]
        if not pkt.topic_len and not pkt.props.has(_TOPIC_ALIAS):
            raise protocol_error()  # [U-3.3.2-a] empty topic, no alias
    else:
        pkt.props.clear()
        if not pkt.topic_len:
            raise malformed()  # [MQTT-4.7.3-1] empty topic
    pkt.data = cur.pos
    pkt.data_len = cur.end - cur.pos


def _ack_props_len(v, ptype, reason, props):
    if ptype < _PUBACK or ptype > _PUBCOMP:
        raise ValueError("ack type")
    if v < 5:
        if reason or props:
            raise ValueError("need MQTT5")  # reason codes, properties
        return 0
    if reason not in (_REL_REASONS if ptype >= _PUBREL else _PUB_REASONS):
        raise ValueError("bad reason")  # [MQTT-3.4.2-1] [MQTT-3.6.2-1]
    return _props.size(props, ptype)


def _ack_rl(v, reason, pn):
    if pn:
        return 3 + vbi_size(pn) + pn
    if v >= 5 and reason:
        return 3
    return 2  # short form: reason 0x00, no properties [U-3.4.2-a]


def encode_ack(buf, off, v, ptype, pid, reason=0, props=None):
    """Write PUBACK/PUBREC/PUBREL/PUBCOMP for packet id pid; return its length."""
    if not 0 < pid <= 0xFFFF:
        raise ValueError("packet id")  # [MQTT-2.2.1-5] 1..65535
    pn = _ack_props_len(v, ptype, reason, props)
    rl = _ack_rl(v, reason, pn)
    if off + total(rl) > len(buf):
        raise ValueError("no room")  # buffer too small
    buf[off] = (ptype << 4) | (2 if ptype == _PUBREL else 0)  # [MQTT-3.6.1-1]
    o = put_vbi(buf, off + 1, rl)
    o = put_u16(buf, o, pid)
    if rl > 2:
        buf[o] = reason
        o += 1
        if pn:
            o = put_vbi(buf, o, pn)
            o = _props.put(buf, o, props)
    return o - off


def decode_ack(pkt, ptype, v):
    """Decode an ack body at pkt.cur; accepts the short forms [U-3.4.2-a]."""
    cur = pkt.cur
    pkt.pid = cur.u16()
    if not pkt.pid:
        raise protocol_error()  # [MQTT-2.2.1-5] packet id 0
    pkt.reason = 0
    pkt.props.clear()
    if v < 5:
        if cur.pos != cur.end:
            raise malformed()  # [U-3.4-a] 3.1.1: 4 bytes
        return
    if cur.pos < cur.end:
        pkt.reason = cur.u8()
        if pkt.reason not in (_REL_REASONS if ptype >= _PUBREL else _PUB_REASONS):
            raise malformed()  # [MQTT-3.4.2-1] [MQTT-3.6.2-1]
        if cur.pos < cur.end:
            _props.parse(pkt.props, cur, ptype)
    if cur.pos != cur.end:
        raise malformed()  # bytes after the ack
