"""Splitting a TCP byte stream into MQTT packets and describing each one with
the shared codec (frugalmqtt_host.server.decode_packet, both directions):
used by the link simulator and the scripted broker. Host only."""
from frugalmqtt import publish
from frugalmqtt import props as P
from frugalmqtt_host import server
from frugalmqtt_host.codec import topic_bytes, payload_bytes, props_items
from frugalmqtt.codec import (CONNECT, CONNACK, PUBLISH, PUBACK, PUBREC, PUBREL, PUBCOMP,
                              SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP,
                              DISCONNECT, AUTH, MQTTError)

NAMES = {CONNECT: "CONNECT", CONNACK: "CONNACK", PUBLISH: "PUBLISH", PUBACK: "PUBACK",
         PUBREC: "PUBREC", PUBREL: "PUBREL", PUBCOMP: "PUBCOMP", SUBSCRIBE: "SUBSCRIBE",
         SUBACK: "SUBACK", UNSUBSCRIBE: "UNSUBSCRIBE", UNSUBACK: "UNSUBACK",
         PINGREQ: "PINGREQ", PINGRESP: "PINGRESP", DISCONNECT: "DISCONNECT", AUTH: "AUTH"}
TYPES = {v: k for k, v in NAMES.items()}


def packet_type(name_or_type):
    """"PUBREC" or 5 -> 5."""
    if isinstance(name_or_type, int):
        return name_or_type
    return TYPES[name_or_type.upper()]


class Splitter:
    """Accumulates bytes and returns whole packets (fixed header included).
    A remaining length that is not a valid VBI is returned as one 'packet'
    of everything buffered (so the peer still sees the bytes)."""

    def __init__(self):
        self.buf = bytearray()

    def feed(self, data):
        self.buf.extend(data)
        out = []
        while True:
            n = self._whole()
            if n == 0:
                return out
            out.append(bytes(self.buf[:n]))
            del self.buf[:n]

    def _whole(self):
        b = self.buf
        rl = 0
        for i in range(1, 5):
            if i >= len(b):
                return 0
            rl |= (b[i] & 0x7F) << (7 * (i - 1))
            if not b[i] & 0x80:
                n = 1 + i + rl
                return n if len(b) >= n else 0
        return len(b)  # invalid VBI: pass it on as is


def connect_version(raw):
    """The protocol level of a CONNECT (4 or 5; 5 when unreadable)."""
    try:
        i = 1
        while raw[i] & 0x80:
            i += 1
        return raw[i + 1 + 6] if raw[i + 1 + 6] in (3, 4, 5) else 5
    except IndexError:
        return 5


_pkt = publish.Packet()


def describe(raw, version):
    """A dict for one packet: type, name, pid, reason, and per type qos/dup/
    retain/topic/payload/alias (PUBLISH), clean/client_id/keepalive/props
    (CONNECT), sp (CONNACK). A packet the codec refuses gets its type from
    the first byte and `error` = the MQTTError reason code."""
    t = raw[0] >> 4
    e = {"type": t, "name": NAMES.get(t, str(t)), "first": raw[0], "pid": None,
         "reason": None, "size": len(raw), "error": None}
    try:
        t = server.decode_packet(_pkt, raw, 0, len(raw), version)
    except MQTTError as err:
        e["error"] = err.reason
        return e
    except (ValueError, IndexError) as err:
        e["error"] = repr(err)
        return e
    e["pid"] = _pkt.pid
    e["reason"] = _pkt.reason
    if t == PUBLISH:
        e.update(qos=_pkt.qos, dup=_pkt.dup, retain=_pkt.retain, topic=topic_bytes(_pkt),
                 payload=payload_bytes(_pkt), alias=_pkt.props.get_int(P.TOPIC_ALIAS, 0)
                 if version >= 5 else 0,
                 props=props_items(_pkt.props) if version >= 5 else [])
    elif t == CONNECT:
        c = _pkt.extra
        e.update(clean=c.clean, client_id=c.client_id, keepalive=c.keepalive,
                 props=list(c.props or ()), version=c.version)
    elif t == CONNACK:
        e.update(sp=_pkt.sp, props=props_items(_pkt.props) if version >= 5 else [])
    elif t == DISCONNECT:
        e["reason"] = _pkt.reason or 0
    elif t == SUBSCRIBE:
        e["subs"] = list(_pkt.extra)
    return e


def ack_direction(d, ptype):
    """Direction of the PUBLISH that an ack travelling in direction d belongs to."""
    if ptype == PUBREL:
        return d
    return "s2c" if d == "c2s" else "c2s"
