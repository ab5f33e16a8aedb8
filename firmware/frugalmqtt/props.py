# frugalmqtt.props: MQTT 5 properties (MQTT 5.0 2.2.2) for an application
# that sends more than lite's PUBLISH properties: the property ids by name,
# and build(), which makes the raw bytes every props= takes, checked once
# against the table in propview (which reads received properties in place;
# Props is here too under its old name). Imported only by a device that
# builds properties.
from .lite import text as utf8
from .propview import Props, TYPE, WHERE  # noqa: F401

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

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
# value types (propview's)
_BOOL = const(2)
_U16_NZ = const(4)
_U32 = const(5)
_U32_NZ = const(6)
_VBI_NZ = const(7)
_STR = const(8)
_BIN = const(9)
_PAIR = const(10)
# where: bit 0 stands for the will properties
WILL = const(0)


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
        if type(p) is not tuple and type(p) is not list or len(p) != 2 or type(p[0]) is not int:
            raise TypeError("props: each item an (id, value) pair, not %r" % (p,))
        pid = p[0]
        v = p[1]
        k = len(b)
        t = TYPE[pid] if 0 < pid < _NIDS else 0
        if not t or not WHERE[pid] & 1 << where:
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
            if t == _PAIR and (type(v) is not tuple and type(v) is not list or len(v) != 2):
                raise TypeError("props: a user property is a (name, value) pair, not %r" % (v,))
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
    return bytes(f + b)
