# frugalmqtt.cprops: what the full client does with MQTT 5 properties only
# when an application asks for it, kept out of the modules every device
# loads (imported on first use): raw property bytes read back into (id,
# value) pairs, the CONNECT properties that are settings taken out of
# connect_props, SUBSCRIBE properties with a Subscription Identifier, a
# DISCONNECT with properties.
from .props import build
from .propview import TYPE as _TYPE, _skip, _int, _u

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_HEAD = const(5)  # lite._HEAD
_M = const(6)  # lite._M
_TXO = const(17)  # lite's state[_TXO]: the buffer for control packets
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


def settings(props, inbound, max_packet, aliases_in, session_expiry):
    """The CONNECT properties a client was given (connect_props), with the
    settings among them taken as its arguments (Receive Maximum: inbound,
    Maximum Packet Size: max_packet, Topic Alias Maximum: aliases_in,
    Session Expiry Interval: session_expiry): (the other properties, built,
    inbound, max_packet, aliases_in, session_expiry)."""
    p, c = split(props)
    return (p, c.get(0x21, inbound), c.get(0x27, max_packet), c.get(0x22, aliases_in),
            c.get(0x11, session_expiry))


def sub_props(props, sub_id):
    """SUBSCRIBE properties (bytes or pairs) with a Subscription Identifier
    (when sub_id), built."""
    p = list(pairs(props) if type(props) is bytes else props or ())
    if sub_id:
        p.append((0x0B, sub_id))  # SUBSCRIPTION_ID
    return build(p, 8)


def disconnect(c, reason, props, session_expiry):
    """client.MQTTClient.disconnect() with properties (5.0): built and
    checked before anything is sent, then DISCONNECT and close."""
    p = list(pairs(props) if type(props) is bytes else props or ())
    if session_expiry is not None:
        p.append((0x11, session_expiry))  # SESSION_EXPIRY
    p = build(p, 14)
    for x in pairs(p):
        if x[0] == 0x11 and x[1] and not c.session_expiry:
            raise ValueError("session_expiry: the CONNECT's was 0")  # [MQTT-3.14.2-2]
    n = len(p)
    b = c.buf
    h = c.state[_TXO] + _M + _HEAD  # the body
    o = h + 1 + (1 if n < 128 else 2)
    if not 0 <= reason < 256 or o + n > len(b):
        raise ValueError("reason: 0..255; props: over tx_size")
    b[h] = reason
    b[h + 1] = n & 0x7F | (0x80 if n > 127 else 0)
    b[o - 1] = n >> 7 if n > 127 else n
    b[o:o + n] = p
    if c.sock:
        from .recv import _seal
        s = _seal(b, h, o + n, 0xE0)
        try:
            c.send(s, o + n - s, 0, b)
        except OSError:
            pass
    c.close()  # [MQTT-3.14.4-1] [MQTT-3.14.4-2]

