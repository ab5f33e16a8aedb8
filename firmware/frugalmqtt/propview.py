# frugalmqtt.propview: reading MQTT 5 properties (MQTT 5.0 2.2.2) in place,
# for the profiles that receive (recv.Receiver). One table by property id
# gives the value type and the packets it may appear in; it drives parsing
# here and building in props.build(). Received properties are validated in
# one pass that keeps where each value starts in the receive buffer (Props,
# no copies). A device that only receives never imports props (its names
# and build() are for the application that sends properties).
from array import array
from .lite import text as utf8

# room in the globals dict for fast builtin lookups (tests/test_dict_room.py): 13 names
# in a dict of 17 slots, not 11 in 12
_room = _room2 = None

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_RESPONSE_TOPIC = const(0x08)
_SUBSCRIPTION_ID = const(0x0B)
_TOPIC_ALIAS = const(0x23)
_USER_PROPERTY = const(0x26)
_NIDS = const(0x2B)
# value types
_BOOL = const(2)  # 1 byte, 0 or 1 (1, _BYTE, is not used by MQTT 5.0)
_U16 = const(3)
_U16_NZ = const(4)  # not 0
_U32 = const(5)
_U32_NZ = const(6)
_VBI_NZ = const(7)
_STR = const(8)
_BIN = const(9)
_PAIR = const(10)

# Where a property may appear: bit n for packet type n; bit 0 stands for the
# will properties (WILL).
_C = const(1 << 1)  # CONNECT
_CA = const(1 << 2)  # CONNACK
_P = const(1 << 3)  # PUBLISH
_W = const(1 << 0)  # Will properties
_ACKS = const(0xF0)  # PUBACK, PUBREC, PUBREL, PUBCOMP
_S = const(1 << 8)  # SUBSCRIBE
_SA = const(1 << 9)  # SUBACK
_UA = const(1 << 11)  # UNSUBACK
_D = const(1 << 14)  # DISCONNECT
_A = const(1 << 15)  # AUTH

# id -> type (0: no such property). A bytes literal: a bytes((...)) call would
# keep its source tuple in RAM as a constant.
#   01 PAYLOAD_FORMAT bool       02 MESSAGE_EXPIRY u32          03 CONTENT_TYPE str
#   08 _RESPONSE_TOPIC str        09 CORRELATION_DATA bin        0B _SUBSCRIPTION_ID vbi
#   11 SESSION_EXPIRY u32        12 ASSIGNED_CLIENT_ID str      13 SERVER_KEEP_ALIVE u16
#   15 AUTH_METHOD str           16 AUTH_DATA bin               17 REQUEST_PROBLEM_INFO bool
#   18 WILL_DELAY u32            19 REQUEST_RESPONSE_INFO bool  1A RESPONSE_INFO str
#   1C SERVER_REFERENCE str      1F REASON_STRING str           21 RECEIVE_MAXIMUM u16 not 0
#   22 TOPIC_ALIAS_MAXIMUM u16   23 _TOPIC_ALIAS u16 not 0       24 MAXIMUM_QOS bool
#   25 RETAIN_AVAILABLE bool     26 _USER_PROPERTY pair          27 MAXIMUM_PACKET_SIZE u32 not 0
#   28-2A WILDCARD_SUB_AVAILABLE, SUB_ID_AVAILABLE, SHARED_SUB_AVAILABLE bool
TYPE = (b"\x00\x02\x05\x08\x00\x00\x00\x00"  # 00-07
         b"\x08\x09\x00\x07\x00\x00\x00\x00"  # 08-0F
         b"\x00\x05\x08\x03\x00\x08\x09\x02"  # 10-17
         b"\x05\x02\x08\x00\x08\x00\x00\x08"  # 18-1F
         b"\x00\x04\x03\x04\x02\x02\x0a\x06"  # 20-27
         b"\x02\x02\x02")  # 28-2A
# id -> the packets it may appear in. Authentication Method/Data: not in our
# CONNECT, the engine has no enhanced authentication (AUTH, 5.0 4.12)
WHERE = (
    0, _P | _W, _P | _W, _P | _W, 0, 0, 0, 0, _P | _W, _P | _W, 0, _P | _S, 0, 0, 0, 0,
    0, _C | _CA | _D, _CA, _CA, 0, _CA | _A, _CA | _A, _C, _W, _C, _CA, 0,
    _CA | _D, 0, 0, _CA | _ACKS | _SA | _UA | _D | _A,
    0, _C | _CA, _C | _CA, _P, _CA, _CA, 0xFFFF, _C | _CA, _CA, _CA, _CA,
)


def _u(b, o, n):
    """The n-byte big-endian integer at b[o]."""
    v = 0
    while n:
        v = v << 8 | b[o]
        o += 1
        n -= 1
    return v


def _int(b, o, t):
    """The integer value of type t at b[o]."""
    if t == _VBI_NZ:
        v = s = 0
        while True:
            v |= (b[o] & 0x7F) << s
            if b[o] < 0x80:
                return v
            o += 1
            s += 7
    return _u(b, o, 1 if t == _BOOL else 2 if t < _U32 else 4)


class Props:
    """Where each property of the last parsed block starts in its buffer:
    at[id] is the offset of the first value with that id, or -1."""

    def __init__(self):
        self.buf = None
        self.off = 0  # the block is buf[off:end]
        self.end = 0
        self.at = array("h", [-1] * _NIDS)

    def has(self, pid):
        return self.at[pid] >= 0

    def get_int(self, pid, default=None):
        """An integer property's value, or default when absent."""
        o = self.at[pid]
        return default if o < 0 else _int(self.buf, o, TYPE[pid])

    def get_bytes(self, pid):
        """A string or binary property as bytes (allocates), or None."""
        o = self.at[pid]
        if o < 0:
            return None
        return bytes(self.buf[o + 2:o + 2 + _u(self.buf, o, 2)])

    def get_str(self, pid):
        b = self.get_bytes(pid)
        return None if b is None else b.decode()

    def user_properties(self):
        """The user properties as (name, value) str pairs, in order (allocates)."""
        out = []
        b = self.buf
        o = self.off
        while o < self.end:
            pid = b[o]
            k = _skip(b, o + 1, TYPE[pid])
            if pid == _USER_PROPERTY:
                s = o + 3 + _u(b, o + 1, 2)
                out.append((bytes(b[o + 3:s]).decode(), bytes(b[s + 2:k]).decode()))
            o = k
        return out

    def parse(self, b, o, end, where):
        """Read the Property Length at b[o] and the properties after it,
        checking each id is known and allowed in packet type `where`
        [U-2.2.2-a], single-valued ones appear once [U-3.3.2-c], values are in
        range and strings UTF-8 [MQTT-1.5.4-1] [MQTT-1.5.7-1]. Returns the
        offset after the block, or minus the reason code to disconnect with."""
        at = self.at
        i = 0
        while i < _NIDS:
            at[i] = -1
            i += 1
        n = s = 0
        while True:  # the length, a Variable Byte Integer
            if o >= end or s == 28:
                return -0x81
            c = b[o]
            o += 1
            n |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                break
        if o + n > end or not c and s > 7:
            return -0x81  # past the packet, or not minimally encoded [MQTT-1.5.5-1]
        self.buf = b
        self.off = o
        end = self.end = o + n
        while o < end:
            pid = b[o]
            o += 1
            t = TYPE[pid] if pid < _NIDS else 0
            if not t or not WHERE[pid] & 1 << where:
                return -0x81  # [U-2.2.2-a] unknown, or not allowed here
            if at[pid] < 0:
                at[pid] = o
            elif pid != _USER_PROPERTY and (pid != _SUBSCRIPTION_ID or where != 3):
                return -0x82  # [U-3.3.2-c] repeated
            k = _skip(b, o, t)
            if k > end:
                return -0x81
            if t < _STR:
                if t == _VBI_NZ and (b[k - 1] > 0x7F or not b[k - 1] and k - o > 1):
                    return -0x81  # more than 4 bytes, or not minimal [MQTT-1.5.5-1]
                v = _int(b, o, t)
                if t == _BOOL and v > 1 or not v and (t == _U16_NZ or t >= _U32_NZ):
                    # a flag is 0 or 1, the others here not 0 [U-3.3.2-d];
                    # Topic Alias 0 [MQTT-3.3.2-8]
                    return -0x94 if pid == _TOPIC_ALIAS else -0x82
            elif t != _BIN:
                if not utf8(b, o + 2, o + 2 + _u(b, o, 2)):
                    return -0x81  # [MQTT-1.5.4-1]
                if t == _PAIR:
                    s = o + 2 + _u(b, o, 2)
                    if not utf8(b, s + 2, k):
                        return -0x81  # [MQTT-1.5.7-1]
                elif pid == _RESPONSE_TOPIC:
                    s = o + 2
                    while s < k:
                        if b[s] == 0x23 or b[s] == 0x2B:
                            return -0x82  # [MQTT-3.3.2-14] wildcard
                        s += 1
            o = k
        return o


def _skip(b, o, t):
    """The offset after the value of type t at b[o] (maybe past the block)."""
    if t < _STR:
        if t == _VBI_NZ:
            s = 0
            while o < len(b) and b[o] & 0x80 and s < 21:
                o += 1
                s += 7
            return o + 1  # the caller checks the last byte
        return o + (1 if t == _BOOL else 2 if t < _U32 else 4)
    if o + 2 > len(b):
        return o + 2
    o += 2 + _u(b, o, 2)
    if t == _PAIR and o + 2 <= len(b):
        o += 2 + _u(b, o, 2)
    elif t == _PAIR:
        o += 2
    return o


