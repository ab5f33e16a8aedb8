# MQTT 5 properties (MQTT 5.0 2.2.2). One table by property id gives the
# value type and the packets the property may appear in; it drives encoding,
# decoding and validation. Properties to send are a sequence of
# (id, value) pairs, written in that order (user property order is kept).
# Received properties are validated in one pass that records where each
# value starts in the receive buffer (no copies).
from array import array

try:
    from micropython import const
except ImportError:
    const = int  # CPython

from .codec import (MQTTError, malformed, protocol_error, str_len, put_str, put_u16, put_vbi,
                    vbi_size, has_wildcard)

# Property ids (MQTT 5.0 Table 2-4)
PAYLOAD_FORMAT = const(0x01)
MESSAGE_EXPIRY = const(0x02)
CONTENT_TYPE = const(0x03)
RESPONSE_TOPIC = const(0x08)
CORRELATION_DATA = const(0x09)
SUBSCRIPTION_ID = const(0x0B)
SESSION_EXPIRY = const(0x11)
ASSIGNED_CLIENT_ID = const(0x12)
SERVER_KEEP_ALIVE = const(0x13)
AUTH_METHOD = const(0x15)
AUTH_DATA = const(0x16)
REQUEST_PROBLEM_INFO = const(0x17)
WILL_DELAY = const(0x18)
REQUEST_RESPONSE_INFO = const(0x19)
RESPONSE_INFO = const(0x1A)
SERVER_REFERENCE = const(0x1C)
REASON_STRING = const(0x1F)
RECEIVE_MAXIMUM = const(0x21)
TOPIC_ALIAS_MAXIMUM = const(0x22)
TOPIC_ALIAS = const(0x23)
MAXIMUM_QOS = const(0x24)
RETAIN_AVAILABLE = const(0x25)
USER_PROPERTY = const(0x26)
MAXIMUM_PACKET_SIZE = const(0x27)
WILDCARD_SUB_AVAILABLE = const(0x28)
SUB_ID_AVAILABLE = const(0x29)
SHARED_SUB_AVAILABLE = const(0x2A)

_NIDS = const(0x2B)
_TOPIC_ALIAS_INVALID = const(0x94)  # reason code

# Value types; the *_NZ types must not be 0 and _BOOL only 0 or 1.
_BYTE = const(1)
_BOOL = const(2)
_U16 = const(3)
_U16_NZ = const(4)
_U32 = const(5)
_U32_NZ = const(6)
_VBI_NZ = const(7)
_STR = const(8)
_BIN = const(9)
_PAIR = const(10)

# Packet masks: bit n = packet type n; bit 0 stands for the Will Properties.
WILL = const(0)
_C = const(1 << 1)  # CONNECT
_CA = const(1 << 2)  # CONNACK
_P = const(1 << 3)  # PUBLISH
_W = const(1 << 0)  # Will properties
_ACKS = const(0xF0)  # PUBACK, PUBREC, PUBREL, PUBCOMP
_S = const(1 << 8)  # SUBSCRIBE
_SA = const(1 << 9)  # SUBACK
_U = const(1 << 10)  # UNSUBSCRIBE
_UA = const(1 << 11)  # UNSUBACK
_D = const(1 << 14)  # DISCONNECT
_A = const(1 << 15)  # AUTH

# id -> type (0: no such property), by the numbers above (1 _BYTE .. 0x0A
# _PAIR). A bytes literal, not bytes((_BOOL, ...)): the tuple such a call is
# built from would stay in RAM as a constant.
#   01 PAYLOAD_FORMAT bool       02 MESSAGE_EXPIRY u32          03 CONTENT_TYPE str
#   08 RESPONSE_TOPIC str        09 CORRELATION_DATA bin        0B SUBSCRIPTION_ID vbi
#   11 SESSION_EXPIRY u32        12 ASSIGNED_CLIENT_ID str      13 SERVER_KEEP_ALIVE u16
#   15 AUTH_METHOD str           16 AUTH_DATA bin               17 REQUEST_PROBLEM_INFO bool
#   18 WILL_DELAY u32            19 REQUEST_RESPONSE_INFO bool  1A RESPONSE_INFO str
#   1C SERVER_REFERENCE str      1F REASON_STRING str           21 RECEIVE_MAXIMUM u16 not 0
#   22 TOPIC_ALIAS_MAXIMUM u16   23 TOPIC_ALIAS u16             24 MAXIMUM_QOS bool
#   25 RETAIN_AVAILABLE bool     26 USER_PROPERTY pair          27 MAXIMUM_PACKET_SIZE u32 not 0
#   28-2A WILDCARD_SUB_AVAILABLE, SUB_ID_AVAILABLE, SHARED_SUB_AVAILABLE bool
_TYPE = (b"\x00\x02\x05\x08\x00\x00\x00\x00"  # 00-07
         b"\x08\x09\x00\x07\x00\x00\x00\x00"  # 08-0F
         b"\x00\x05\x08\x03\x00\x08\x09\x02"  # 10-17
         b"\x05\x02\x08\x00\x08\x00\x00\x08"  # 18-1F
         b"\x00\x04\x03\x03\x02\x02\x0a\x06"  # 20-27
         b"\x02\x02\x02")  # 28-2A
# id -> packets it may appear in
_WHERE = (
    0, _P | _W, _P | _W, _P | _W, 0, 0, 0, 0, _P | _W, _P | _W, 0, _P | _S, 0, 0, 0, 0,
    0, _C | _CA | _D, _CA, _CA, 0, _C | _CA | _A, _C | _CA | _A, _C, _W, _C, _CA, 0,
    _CA | _D, 0, 0, _CA | _ACKS | _SA | _UA | _D | _A,
    0, _C | _CA, _C | _CA, _P, _CA, _CA, 0xFFFF, _C | _CA, _CA, _CA, _CA,
)


def size(props, where, find=0):
    """Encoded length of a property sequence, not counting its length prefix.
    Validates ids, value types, duplicates and values (user errors:
    ValueError("bad props"), the spec id comment tells which check).
    With `find` (a property id): the offset of its value within the encoded
    items instead, or -1 (lets the session patch a stored message expiry)."""
    n = 0
    i = 0
    for p in props or ():
        pid = p[0]
        v = p[1]
        if pid <= 0 or pid >= _NIDS or not _TYPE[pid]:
            raise ValueError("bad props")  # unknown id
        if pid == find:
            return n + 1
        if not _WHERE[pid] & (1 << where):
            raise ValueError("bad props")  # [U-2.2.2-a] not allowed in this packet
        # Subscription Identifier repeats only in PUBLISH (one per matching
        # subscription); in SUBSCRIBE it is single-valued (MQTT 5.0 3.8.2.1.2).
        if pid != USER_PROPERTY and (pid != SUBSCRIPTION_ID or where != 3):
            j = 0
            while j < i:
                if props[j][0] == pid:
                    raise ValueError("bad props")  # [U-3.3.2-c] given twice
                j += 1
        t = _TYPE[pid]
        if t <= _BOOL:
            if not 0 <= v <= (1 if t == _BOOL else 255):
                raise ValueError("bad props")  # out of range
            n += 2
        elif t <= _U16_NZ:
            if not (1 if t == _U16_NZ or pid == TOPIC_ALIAS else 0) <= v <= 0xFFFF:
                raise ValueError("bad props")  # [MQTT-3.3.2-8] alias 0
            n += 3
        elif t <= _U32_NZ:
            if not (1 if t == _U32_NZ else 0) <= v <= 0xFFFFFFFF:
                raise ValueError("bad props")
            n += 5
        elif t == _VBI_NZ:
            if v < 1:
                raise ValueError("bad props")  # [U-3.3.2-d] must be 1..268435455
            n += 1 + vbi_size(v)
        elif t == _STR:
            if pid == RESPONSE_TOPIC and has_wildcard(v):
                raise ValueError("wildcard")  # [MQTT-3.3.2-14]
            n += 3 + str_len(v)
        elif t == _BIN:
            if type(v) is str:
                raise TypeError("need bytes")  # binary property
            if len(v) > 65535:
                raise ValueError("too long")  # [MQTT-1.5.6-1]
            n += 3 + len(v)
        else:
            n += 5 + str_len(v[0]) + str_len(v[1])  # [MQTT-1.5.7-1]
        i += 1
    return -1 if find else n


def put(buf, o, props):
    """Write the properties (checked by size()) without their length prefix."""
    if not props:
        return o
    for p in props:
        pid = p[0]
        v = p[1]
        buf[o] = pid
        o += 1
        t = _TYPE[pid]
        if t <= _BOOL:
            buf[o] = v
            o += 1
        elif t <= _U16_NZ:
            o = put_u16(buf, o, v)
        elif t <= _U32_NZ:
            o = put_u16(buf, put_u16(buf, o, v >> 16), v & 0xFFFF)
        elif t == _VBI_NZ:
            o = put_vbi(buf, o, v)
        elif t == _PAIR:
            o = put_str(buf, o, v[0], str_len(v[0]))
            o = put_str(buf, o, v[1], str_len(v[1]))
        else:
            o = put_str(buf, o, v, str_len(v) if t == _STR else len(v))
    return o


class Props:
    """Where each property of the last parsed block starts in the buffer.
    at[id] is the offset of the first value with that id, or -1.
    Repeated ids (user property, subscription identifier) are counted."""

    def __init__(self):
        self.buf = None
        self.off = 0  # the property block is buf[off:end]
        self.end = 0
        self.at = array("i", [-1] * _NIDS)
        self.ids = bytearray(_NIDS)  # ids set in the last parse, to reset
        self.nids = 0
        self.n_user = 0
        self.n_subid = 0

    def clear(self):
        i = 0
        while i < self.nids:
            self.at[self.ids[i]] = -1
            i += 1
        self.nids = 0
        self.n_user = 0
        self.n_subid = 0
        self.off = self.end = 0

    def has(self, pid):
        return self.at[pid] >= 0

    def get_int(self, pid, default=None):
        """Value of an integer property, or default when absent."""
        o = self.at[pid]
        if o < 0:
            return default
        b = self.buf
        t = _TYPE[pid]
        if t <= _BOOL:
            return b[o]
        if t <= _U16_NZ:
            return (b[o] << 8) | b[o + 1]
        if t <= _U32_NZ:
            return (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]
        return _vbi_at(b, o)

    def get_bytes(self, pid):
        """A string/binary property as bytes (allocates), or None."""
        o = self.at[pid]
        if o < 0:
            return None
        n = (self.buf[o] << 8) | self.buf[o + 1]
        return bytes(self.buf[o + 2:o + 2 + n])

    def get_str(self, pid):
        b = self.get_bytes(pid)
        return None if b is None else b.decode()


def _vbi_at(b, o):
    v = 0
    shift = 0
    while True:
        c = b[o]
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v
        shift += 7
        o += 1


def parse(props, cur, where):
    """Read a Property Length and the properties at the cursor into `props`,
    checking each id is known and allowed here [U-2.2.2-a], single-valued ids
    appear once [U-3.3.2-c], strings are valid UTF-8 [MQTT-1.5.4-1]
    [MQTT-1.5.7-1] and values are in range. Leaves the cursor after them."""
    props.clear()
    props.buf = cur.buf
    n = cur.vbi()
    cur.need(n)
    props.off = cur.pos
    end = cur.pos + n
    props.end = end
    at = props.at
    saved_end = cur.end
    cur.end = end  # no property may run past the block
    while cur.pos < end:
        pid = cur.u8()
        if pid >= _NIDS or not _TYPE[pid]:
            raise malformed()  # [U-2.2.2-a] unknown id
        if not _WHERE[pid] & (1 << where):
            raise malformed()  # [U-2.2.2-a] not allowed here
        o = cur.pos
        if at[pid] < 0:
            at[pid] = o
            props.ids[props.nids] = pid
            props.nids += 1
        elif pid == USER_PROPERTY:
            pass
        elif pid != SUBSCRIPTION_ID or where != 3:
            raise protocol_error()  # [U-3.3.2-c] repeated
        t = _TYPE[pid]
        if t <= _BOOL:
            if cur.u8() > 1 and t == _BOOL:
                raise protocol_error()  # must be 0 or 1
        elif t <= _U16_NZ:
            if cur.u16() == 0 and t == _U16_NZ:
                raise protocol_error()  # must not be 0
            if pid == TOPIC_ALIAS and cur.buf[o] == 0 and cur.buf[o + 1] == 0:
                raise MQTTError(_TOPIC_ALIAS_INVALID)  # [MQTT-3.3.2-8] alias 0
        elif t <= _U32_NZ:
            if cur.u32() == 0 and t == _U32_NZ:
                raise protocol_error()  # must not be 0
        elif t == _VBI_NZ:
            if cur.vbi() == 0:
                raise protocol_error()  # [U-3.3.2-d] subscription identifier 0
            props.n_subid += 1
        elif t == _STR:
            s = cur.string()
            if pid == RESPONSE_TOPIC:
                e = s + cur.n
                while s < e:
                    if cur.buf[s] == 0x2B or cur.buf[s] == 0x23:
                        raise protocol_error()  # [MQTT-3.3.2-14] wildcard
                    s += 1
        elif t == _BIN:
            cur.binary()
        else:
            cur.string()  # [MQTT-1.5.7-1]
            cur.string()
            props.n_user += 1
    cur.end = saved_end

