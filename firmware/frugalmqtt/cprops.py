# frugalmqtt.cprops: MQTT 5 properties given as raw bytes read back into
# (id, value) pairs, and the CONNECT properties that are client settings
# taken out of connect_props. client.MQTTClient imports it only when such
# properties are given, so a device that passes none never loads it.
from .props import build, _TYPE, _skip, _int, _u

# the CONNECT properties that are settings of the client: Session Expiry
# Interval, Receive Maximum, Topic Alias Maximum, Maximum Packet Size
_SETTINGS = b"\x11\x21\x22\x27"


def pairs(raw):
    """Raw property bytes (props.build() output, without the length) as
    (id, value) pairs, as build() takes them."""
    out = []
    o = 0
    n = len(raw)
    while o < n:
        pid = raw[o]
        o += 1
        t = _TYPE[pid] if pid < len(_TYPE) else 0
        k = _skip(raw, o, t) if t else n + 1
        if k > n:
            raise ValueError("props: 0x%02x unknown or cut short" % pid)  # [U-2.2.2-a]
        if t < 8:  # an integer
            v = _int(raw, o, t)
        elif t == 9:  # binary data
            v = bytes(raw[o + 2:k])
        elif t == 8:  # a string
            v = bytes(raw[o + 2:k]).decode()
        else:  # a string pair
            s = o + 2 + _u(raw, o, 2)
            v = (bytes(raw[o + 2:s]).decode(), bytes(raw[s + 2:k]).decode())
        out.append((pid, v))
        o = k
    return out


def split(props):
    """connect_props (raw bytes or (id, value) pairs) -> (the properties
    that are not settings, built; {id: value} of the settings)."""
    p = pairs(props) if type(props) is bytes else props
    build(p, 1)  # every property checked, the settings too
    rest = []
    got = {}
    for x in p:
        if x[0] in _SETTINGS:
            got[x[0]] = x[1]
        else:
            rest.append(x)
    return build(rest, 1), got
