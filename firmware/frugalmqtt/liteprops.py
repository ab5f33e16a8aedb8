# frugalmqtt.liteprops: MQTT 5 PUBLISH properties for lite.Publisher, encoded
# once. In a module of its own so a device that sends none does not hold it.
from .lite import why as _why


def _field(b, pid, s):
    """Append property id pid (unless < 0) and s (str or bytes) after its
    two-byte length. (hello.field also writes property blocks, but hello.py
    is dropped once the client is made: this module keeps its own.)"""
    if pid >= 0:
        b.append(pid)
    if isinstance(s, str):
        s = s.encode()
    if len(s) > 65535:
        raise _why("long_string", len(s))  # [MQTT-1.5.4-1]
    b += len(s).to_bytes(2, "big")
    b += s


def props(content_type=None, expiry=None, utf8=False, response_topic=None,
          correlation=None, user=()):
    """MQTT 5 PUBLISH properties for publish(props=...), encoded once (the
    publish adds their length). user: (name, value) pairs, order kept. Topic
    Alias and Subscription Identifier are not offered: the core sets the one,
    a client never sends the other [MQTT-3.3.4-6]."""
    b = bytearray()
    if utf8:
        b += b"\x01\x01"
    if expiry is not None:
        b += b"\x02" + expiry.to_bytes(4, "big")
    for pid, s in ((3, content_type), (8, response_topic), (9, correlation)):
        if s is not None:
            if pid == 8 and ("+" in s or "#" in s):
                raise _why("response_topic")  # [MQTT-3.3.2-14]
            _field(b, pid, s)
    for k, v in user:
        _field(b, 0x26, k)
        _field(b, -1, v)
    return bytes(b)
