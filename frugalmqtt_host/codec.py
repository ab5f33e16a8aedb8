# Conveniences over the device codec for hosts and tests, moved out of the
# device package because no device code calls them: framing from a buffer or
# a blocking stream, encode_publish (with its checks; devices write PUBLISH
# with publish.put_publish), the size_* helpers, and copies of what a decoded
# packet holds. Runs on CPython and MicroPython.
from frugalmqtt.codec import (MQTTError, malformed, topic_len, PACKET_TOO_LARGE, SUBSCRIBE,
                              UNSUBSCRIBE, DISCONNECT)
from frugalmqtt.props import USER_PROPERTY, _TYPE, _vbi_at
from frugalmqtt.publish import (put_publish, publish_rl, total, _publish_props_len,
                                _ack_props_len, _ack_rl)
from frugalmqtt.control import _connect_rl, _sub_rl, _reason_rl, _DISCONNECT_V5

# The device modules' private const() names are not importable on MicroPython
# (they exist only at compile time): the ones needed here, again.
# Framer states (codec._HEAD ...)
_HEAD = 0
_LEN = 1
_BODY = 2
_DONE = 3
# Property value types (props._BOOL ...)
_BOOL = 2
_U16_NZ = 4
_U32_NZ = 6
_VBI_NZ = 7
_STR = 8
_PAIR = 10


# ---- Framing (the device's Framer.read_packet reads a socket) ---------------
_ONE = bytearray(1)  # read_from(): header bytes are read one at a time


def _header_byte(f, c):
    if f.state == _HEAD:
        f.first = c
        f.state = _LEN
        return
    if f.nlen and c == 0:
        raise malformed()  # [MQTT-1.5.5-1] remaining length not minimal
    f.rl |= (c & 0x7F) << (7 * f.nlen)
    f.nlen += 1
    if c & 0x80:
        if f.nlen == 4:
            raise malformed()  # [U-1.5.5-a] remaining length over 4 bytes
        return
    if 1 + f.nlen + f.rl > f.max:
        # Refused before reading the body (MQTT 5: DISCONNECT 0x95)
        raise MQTTError(PACKET_TOO_LARGE)
    f.state = _BODY if f.rl else _DONE


def done(f):
    """True when codec.Framer f holds a whole packet."""
    return f.state == _DONE


def feed(f, data, off, end):
    """Give codec.Framer f the bytes data[off:end]; return the new offset.
    Check done(f) afterwards: the body is then at f.buf[0:f.rl]."""
    if f.state == _DONE:
        f.reset()
    while off < end and f.state != _DONE:
        if f.state != _BODY:
            _header_byte(f, data[off])
            off += 1
            continue
        n = f.rl - f.got
        if n > end - off:
            n = end - off
        f.buf[f.got:f.got + n] = data[off:off + n]
        f.got += n
        off += n
        if f.got == f.rl:
            f.state = _DONE
    return off


def read_from(f, stream):
    """Frame the next packet into codec.Framer f from a stream with
    readinto(), header byte by header byte, then the body at once (at
    f.buf[0]). Returns True when a packet is complete, False when a
    non-blocking stream has no data now; raises EOFError when the peer
    closed. Allocates nothing unless a body is split across reads. Nothing
    after the packet is read."""
    if f.state == _DONE:
        f.reset()
    while True:
        if f.state != _BODY:
            n = stream.readinto(_ONE)
            if n is None:
                return False
            if not n:
                raise EOFError
            _header_byte(f, _ONE[0])
            if f.state == _DONE:
                return True
            continue
        if f.got:
            n = stream.readinto(f.mv[f.got:f.rl])  # split body: one view
        else:
            n = stream.readinto(f.buf, f.rl)
        if n is None:
            return False
        if not n:
            raise EOFError
        f.got += n
        if f.got == f.rl:
            f.state = _DONE
            return True


# ---- Encoding with checks, and sizes ---------------------------------------

def _payload_len(payload):
    if type(payload) is str:
        raise TypeError("need bytes")  # payload
    return len(payload) if payload is not None else 0


def encode_publish(buf, off, v, topic, payload, qos=0, pid=0, retain=False, dup=False,
                   props=None, alias=0):
    """Write a PUBLISH at buf[off:]; return its length. With an alias the
    topic may be empty (MQTT 5: the alias then stands for the topic)."""
    if qos < 0 or qos > 2:
        raise ValueError("bad QoS")  # [MQTT-3.3.1-4]
    if qos == 0:
        if pid:
            raise ValueError("packet id")  # [MQTT-2.2.1-2] none on QoS 0
        if dup:
            raise ValueError("DUP")  # [MQTT-3.3.1-2] must be 0 on QoS 0
    elif not 0 < pid <= 0xFFFF:
        raise ValueError("packet id")  # [MQTT-2.2.1-3] 1..65535
    tn = topic_len(topic, alias > 0)  # [MQTT-3.3.2-2] [MQTT-4.7.3-1..3]
    return put_publish(buf, off, v, topic, tn, payload, _payload_len(payload), qos, pid,
                       retain, dup, props, _publish_props_len(v, props, alias), alias)


def size_publish(v, topic, payload, qos=0, props=None, alias=0):
    pn = _publish_props_len(v, props, alias)
    return total(publish_rl(v, topic_len(topic, alias > 0), _payload_len(payload), qos, pn))


def size_ack(v, ptype, reason=0, props=None):
    return total(_ack_rl(v, reason, _ack_props_len(v, ptype, reason, props)))


def size_connect(v, client_id, keepalive=60, clean=True, props=None, will=None,
                 username=None, password=None):
    return total(_connect_rl(v, client_id, props, will, username, password))


def size_subscribe(v, pid, subs, props=None):
    return total(_sub_rl(v, pid, subs, props, SUBSCRIBE))


def size_unsubscribe(v, pid, filters, props=None):
    return total(_sub_rl(v, pid, filters, props, UNSUBSCRIBE))


def size_disconnect(v, reason=0, props=None):
    return total(_reason_rl(v, reason, props, DISCONNECT, _DISCONNECT_V5))


# ---- Copies of a decoded packet (allocate) ----------------------------------

def topic_bytes(pkt):
    """The topic name of a decoded PUBLISH (publish.Packet) as bytes."""
    return bytes(pkt.buf[pkt.topic:pkt.topic + pkt.topic_len])


def payload_bytes(pkt):
    """The payload of a decoded PUBLISH (SUBACK/UNSUBACK: its codes) as bytes."""
    return bytes(pkt.buf[pkt.data:pkt.data + pkt.data_len])


def props_items(p):
    """Every property of the last block parsed into p (a props.Props) as a
    list of (id, value) pairs in wire order, with strings as str, binary as
    bytes and user properties as (str, str)."""
    out = []
    b = p.buf
    o = p.off
    while o < p.end:
        pid = b[o]
        o += 1
        t = _TYPE[pid]
        if t <= _BOOL:
            v = b[o]
            o += 1
        elif t <= _U16_NZ:
            v = (b[o] << 8) | b[o + 1]
            o += 2
        elif t <= _U32_NZ:
            v = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]
            o += 4
        elif t == _VBI_NZ:
            v = _vbi_at(b, o)
            while b[o] & 0x80:
                o += 1
            o += 1
        else:
            n = (b[o] << 8) | b[o + 1]
            v = bytes(b[o + 2:o + 2 + n])
            o += 2 + n
            if t == _PAIR:
                n = (b[o] << 8) | b[o + 1]
                v = (v.decode(), bytes(b[o + 2:o + 2 + n]).decode())
                o += 2 + n
            elif t == _STR:
                v = v.decode()
        out.append((pid, v))
    return out


def user_properties(p):
    """The user properties of the last block parsed into p, as (str, str)."""
    return [v for pid, v in props_items(p) if pid == USER_PROPERTY]
