"""The CONNECT settings given as connect_props (Receive Maximum, Maximum
Packet Size, Topic Alias Maximum, Session Expiry Interval) are taken as the
settings they are, by the blocking and the asyncio client alike: each goes
in the CONNECT once, with the given value, and sizes the client. Construction
only (the CONNECT is built once, in lite's state[_HELLO]: 5 bytes for its
fixed header, then the body). Runs on CPython and MicroPython."""
from frugalmqtt import props as P
from frugalmqtt.client import MQTTClient
from frugalmqtt.aclient import AMQTTClient


def _props(hello):
    """{id: [raw value bytes]} of the CONNECT body's property block."""
    o = 10  # after protocol name, level, flags, keep alive
    n = s = 0
    while True:
        c = hello[o]
        o += 1
        n |= (c & 0x7F) << s
        s += 7
        if c < 128:
            break
    end = o + n
    out = {}
    while o < end:
        pid = hello[o]
        k = {0x11: 4, 0x21: 2, 0x22: 2, 0x27: 4, 0x17: 1}[pid]
        out.setdefault(pid, []).append(bytes(hello[o + 1:o + 1 + k]))
        o += 1 + k
    return out


def test_connect_props_settings_are_the_settings_in_both_clients():
    given = [(P.RECEIVE_MAXIMUM, 3), (P.MAXIMUM_PACKET_SIZE, 512),
             (P.TOPIC_ALIAS_MAXIMUM, 2), (P.SESSION_EXPIRY, 60)]
    for cls in (MQTTClient, AMQTTClient):
        for cp in (given, P.build(given, 1)):
            c = cls("set", "broker", version=5, connect_props=cp)
            got = _props(c.state[27][5:])  # lite state[_HELLO], its body
            assert got[0x21] == [b"\x00\x03"] and c.in_max == 3, (cls, got)
            assert got[0x27] == [(512).to_bytes(4, "big")] and len(c.data) == 512, (cls, got)
            assert got[0x22] == [b"\x00\x02"] and c.a_in_max == 2, (cls, got)
            assert got[0x11] == [(60).to_bytes(4, "big")], (cls, got)
