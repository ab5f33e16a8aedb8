# MQTT 5 properties (MQTT 5.0 2.2.2), for the profiles that send or read
# more than lite's PUBLISH properties. One table by property id gives the
# value type and the packets it may appear in; it drives building, parsing
# and validation. Outgoing properties are built once into the raw bytes the
# core writes (build()); received ones are validated in one pass that keeps
# where each value starts in the receive buffer (Props, no copies).
from array import array
from .core import utf8

try:
    from micropython import const
except ImportError:  # CPython
    from ._cpython import const

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

# SUBSCRIBE options, or'ed with the QoS (client.MQTTClient.subscribe)
NO_LOCAL = const(0x04)  # not our own messages [MQTT-3.8.3-3]
RETAIN_AS_PUBLISHED = const(0x08)  # keep the RETAIN flag as published
RETAIN_IF_NEW = const(0x10)  # retain handling 1: retained only for a new subscription
RETAIN_NONE = const(0x20)  # retain handling 2: no retained messages

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
WILL = const(0)
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
#   08 RESPONSE_TOPIC str        09 CORRELATION_DATA bin        0B SUBSCRIPTION_ID vbi
#   11 SESSION_EXPIRY u32        12 ASSIGNED_CLIENT_ID str      13 SERVER_KEEP_ALIVE u16
#   15 AUTH_METHOD str           16 AUTH_DATA bin               17 REQUEST_PROBLEM_INFO bool
#   18 WILL_DELAY u32            19 REQUEST_RESPONSE_INFO bool  1A RESPONSE_INFO str
#   1C SERVER_REFERENCE str      1F REASON_STRING str           21 RECEIVE_MAXIMUM u16 not 0
#   22 TOPIC_ALIAS_MAXIMUM u16   23 TOPIC_ALIAS u16 not 0       24 MAXIMUM_QOS bool
#   25 RETAIN_AVAILABLE bool     26 USER_PROPERTY pair          27 MAXIMUM_PACKET_SIZE u32 not 0
#   28-2A WILDCARD_SUB_AVAILABLE, SUB_ID_AVAILABLE, SHARED_SUB_AVAILABLE bool
_TYPE = (b"\x00\x02\x05\x08\x00\x00\x00\x00"  # 00-07
         b"\x08\x09\x00\x07\x00\x00\x00\x00"  # 08-0F
         b"\x00\x05\x08\x03\x00\x08\x09\x02"  # 10-17
         b"\x05\x02\x08\x00\x08\x00\x00\x08"  # 18-1F
         b"\x00\x04\x03\x04\x02\x02\x0a\x06"  # 20-27
         b"\x02\x02\x02")  # 28-2A
# id -> the packets it may appear in. Authentication Method/Data: not in our
# CONNECT, the engine has no enhanced authentication (AUTH, 5.0 4.12)
_WHERE = (
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
        return default if o < 0 else _int(self.buf, o, _TYPE[pid])

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
            k = _skip(b, o + 1, _TYPE[pid])
            if pid == USER_PROPERTY:
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
            t = _TYPE[pid] if pid < _NIDS else 0
            if not t or not _WHERE[pid] & 1 << where:
                return -0x81  # [U-2.2.2-a] unknown, or not allowed here
            if at[pid] < 0:
                at[pid] = o
            elif pid != USER_PROPERTY and (pid != SUBSCRIPTION_ID or where != 3):
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
                    return -0x94 if pid == TOPIC_ALIAS else -0x82
            elif t != _BIN:
                if not utf8(b, o + 2, o + 2 + _u(b, o, 2)):
                    return -0x81  # [MQTT-1.5.4-1]
                if t == _PAIR:
                    s = o + 2 + _u(b, o, 2)
                    if not utf8(b, s + 2, k):
                        return -0x81  # [MQTT-1.5.7-1]
                elif pid == RESPONSE_TOPIC:
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


def build(pairs, where=3):
    """MQTT 5 properties for packet type `where` (3: PUBLISH, 1: CONNECT,
    WILL, 8: SUBSCRIBE, 14: DISCONNECT ...) as the raw bytes every call that
    takes props= wants: built and checked once, reusable. pairs: (id, value)
    in wire order; strings str, binary bytes, a user property (name, value).
    Raises ValueError naming the property that is not right here."""
    b = bytearray()
    f = b""  # the Payload Format Indicator, put first: the core looks for it there
    seen = 0
    for p in pairs:
        pid = p[0]
        v = p[1]
        k = len(b)
        t = _TYPE[pid] if 0 < pid < _NIDS else 0
        if not t or not _WHERE[pid] & 1 << where:
            raise ValueError("props: 0x%02x is not a property of this packet" % pid)  # [U-2.2.2-a]
        if where == 3 and (pid == TOPIC_ALIAS or pid == SUBSCRIPTION_ID):
            # the client sets the alias itself; never a subscription id [MQTT-3.3.4-6]
            raise ValueError("props: 0x%02x is set by the client" % pid)
        if seen >> pid & 1 and pid != USER_PROPERTY:
            raise ValueError("props: 0x%02x given twice" % pid)  # [U-3.3.2-c]
        seen |= 1 << pid
        b.append(pid)
        if t < _STR:
            hi = 1 if t == _BOOL else 0xFFFF if t < _U32 else 268435455 if t == _VBI_NZ else 0xFFFFFFFF
            if type(v) is not int or v < (t == _U16_NZ or t >= _U32_NZ) or v > hi:
                raise ValueError("props: 0x%02x takes an integer %d..%d" % (
                    pid, t == _U16_NZ or t >= _U32_NZ, hi))  # [U-3.3.2-d]
            if t == _VBI_NZ:
                while True:
                    b.append(v & 0x7F | (0x80 if v > 127 else 0))
                    v >>= 7
                    if not v:
                        break
            else:
                b += v.to_bytes(1 if t == _BOOL else 2 if t < _U32 else 4, "big")
            if pid == PAYLOAD_FORMAT:
                f = b[k:]
                b = b[:k]
        else:
            for x in (v if t == _PAIR else (v,)):
                # a string is str or UTF-8 bytes; binary data is bytes-like
                if type(x) is str:
                    if t == _BIN:
                        raise TypeError("props: 0x%02x takes bytes" % pid)
                    x = x.encode()
                elif type(x) is int or x is None:
                    raise TypeError("props: 0x%02x takes %s" % (pid, "bytes" if t == _BIN else "str"))
                x = bytes(x)
                if len(x) > 65535 or t != _BIN and not utf8(x, 0, len(x)):
                    # [MQTT-1.5.4-1] [MQTT-1.5.4-2]
                    raise ValueError("props: 0x%02x: over 65535 bytes, not UTF-8 or U+0000" % pid)
                if pid == RESPONSE_TOPIC and (b"#" in x or b"+" in x):
                    raise ValueError("props: a wildcard in the response topic")  # [MQTT-3.3.2-14]
                b += len(x).to_bytes(2, "big")
                b += x
            if t == _PAIR and len(v) != 2:
                raise ValueError("props: a user property is a (name, value) pair")
    return bytes(f + b)
