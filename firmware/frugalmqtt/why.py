# frugalmqtt.why: the words of the errors, imported only when one happens,
# so a device holds none of this text until then.
_HEAD = 5  # core._HEAD


def _packet(n):
    """The size of a packet whose body is n bytes."""
    return n + (2 if n < 128 else 3 if n < 16384 else 4)


def too_big(c, b, payload, props, qos):
    """ValueError for a PUBLISH of core c that did not fit its buffer b."""
    n = 2 + c.tn + (2 if qos else 0) + len(payload.encode() if type(payload) is str else payload)
    if c.v == 5:
        k = len(props) if props else 0
        n += k + (1 if k < 128 else 2)
    return ValueError("payload: a PUBLISH of %d bytes, over the %d its %s holds" % (
        _packet(n), _packet(len(b) - _HEAD), "slot" if qos else "buffer"))


def bad_args(topic, payload, props):
    """TypeError naming the publish() argument of a type it does not take."""
    for name, v, ok in (("topic", topic, (str, bytes, bytearray, memoryview)),
                        ("payload", payload, (str, bytes, bytearray, memoryview)),
                        ("props", props, (bytes, type(None)))):
        if type(v) not in ok:
            return TypeError("%s: %s, not %s" % (name, " or ".join(t.__name__ for t in ok),
                                                  type(v).__name__))
    return TypeError("props: bytes made by props.build() or liteprops.props()")
