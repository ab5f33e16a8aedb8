# frugalmqtt.why: the words of the errors the device package raises for bad
# arguments and sizes, the names of the reason codes, and which connect
# errors are fatal, imported only when an error is raised, printed or judged
# (lite.why), so a device holds none of this until then. Each argument error
# names the argument, and for a size the size and the limit.
_HEAD = 5  # lite._HEAD: bytes before each body for its fixed header

# key: (exception class, message with %-formatted arguments)
_TEXT = {
    "long_string": (ValueError, "a string of %d bytes, over MQTT's 65535"),  # [MQTT-1.5.4-1]
    "version": (ValueError, "version: 4 (MQTT 3.1.1) or 5, not %r"),
    "slots": (ValueError, "slots (%d) must be >= 1, max_packet (%d) >= 16, rx_size (%d) >= 8"),
    "user": (ValueError, "MQTT 3.1.1: a persistent session (clean=False) needs a client_id, "
                             "a password a user"),  # [MQTT-3.1.3-7] [MQTT-3.1.2-22]
    "connect_size": (ValueError, "max_packet: the CONNECT takes %d bytes, over max_packet %d"),
    "qos": (ValueError, "qos: %d, the server takes 0 to %d"),  # [MQTT-3.2.2-11]
    "retain": (ValueError, "retain: the server has no retained messages"),  # [MQTT-3.2.2-14]
    "topic": (ValueError, "topic: empty, a wildcard (+ #), U+0000, not UTF-8, or longer than "
                          "the buffer (%d bytes written)"),
    # (keys: names the device holds anyway)
    "max_packet": (ValueError, "payload: a PUBLISH of %d bytes, over the server's Maximum "
                               "Packet Size %d"),  # [MQTT-3.2.2-15]
    "payload_utf8": (ValueError, "payload: not UTF-8, and props say it is"),  # [U-3.3.2-b]
    "response_topic": (ValueError, "response_topic: a wildcard (+ #)"),  # [MQTT-3.3.2-14]
    "inbound": (ValueError, "inbound: %d, 1 to 65535"),
    "sub_props": (ValueError, "props: %d bytes, a SUBSCRIBE's properties take 127 at most"),
    "filter": (ValueError, "filter: %r is not a topic filter"),  # [MQTT-4.7.1-2] [MQTT-4.7.3-1]
    "options": (ValueError, "options: %r (QoS 0 to 2, retain handling 0 to 2, reserved bits 0)"),
    "no_local": (ValueError, "options: no local on a shared subscription"),  # [MQTT-3.8.3-4]
    "sub_size": (ValueError, "filters: the SUBSCRIBE does not fit the %d bytes tx_size leaves"),
    "no_subs": (ValueError, "filters: none"),  # [MQTT-3.8.3-3] [MQTT-3.10.3-2]
    "sub_id": (ValueError, "sub_id: MQTT 5 only"),
    "outbox_size": (ValueError, "size: %d bytes, an outbox needs 288 at least"),
    "outbox_other": (ValueError, "path: an outbox file of %d bytes, not size %d"),
    "outbox_full": (OSError, "outbox full"),
    "outbox_late": (ValueError, "outbox: attach it before publishing"),
    "outbox_small": (ValueError, "size: %d bytes, the slots need an outbox of %d at least"),
    "outbox_slots": (ValueError, "slots: the outbox holds more messages in flight than %d"),
    "outbox_inbound": (ValueError, "inbound: the outbox holds more inbound ids than %d"),
    "outbox_backlog": (ValueError, "outbox: a backlog record is missing"),
}


def why(key, a):
    """The exception for error `key` with arguments a; for an exception
    (core's MQTTError, ServerError), its reason code and name."""
    if isinstance(key, Exception):
        return reason(key)
    if key in _TEXT:
        cls, text = _TEXT[key]
        return cls(text % a if a else text)
    return globals()[key](*a)


def on_done(e, c):
    """lite.core.done(): on_done raised e. A client that receives
    (recv.Receiver) holds it until its packet is handled (_cb_failed).
    callback_errors "log": print its traceback and go on; else raise it."""
    f = getattr(c, "_cb_failed", None)
    if f:
        f(e)
        return
    if getattr(c, "callback_errors", "raise") != "log":
        raise e
    try:
        from sys import print_exception
    except ImportError:  # CPython
        from .time import print_exception
    print_exception(e)


def fatal(e, v):
    """client.MQTTClient.fatal(): True for a connect error no retry mends."""
    if type(e).__name__ == "ServerError":  # (core's: no import circle)
        return e.args[0] in (b"\x01\x02\x04\x05" if v == 4 else b"\x84\x85\x86\x87\x8c")
    return type(e).__name__ == "SSLCertVerificationError"


def _packet(n):
    """The size of a packet whose body is n bytes."""
    return n + (2 if n < 128 else 3 if n < 16384 else 4)


def publish(topic, payload, props):
    """TypeError naming the publish() argument of a type it does not take."""
    for name, v, ok in (("topic", topic, (str, bytes, bytearray, memoryview)),
                        ("payload", payload, (str, bytes, bytearray, memoryview)),
                        ("props", props, (bytes, type(None)))):
        if type(v) not in ok:
            return TypeError("%s: %s, not %s" % (name, " or ".join(t.__name__ for t in ok),
                                                  type(v).__name__))
    return TypeError("props: bytes made by props.build() or liteprops.props()")


# MQTT 5.0 reason codes from 0x80 (5.0 2.4), in order
_NAMES5 = ("Unspecified error", "Malformed Packet", "Protocol Error",
           "Implementation specific error", "Unsupported Protocol Version",
           "Client Identifier not valid", "Bad User Name or Password", "Not authorized",
           "Server unavailable", "Server busy", "Banned", "Server shutting down",
           "Bad authentication method", "Keep Alive timeout", "Session taken over",
           "Topic Filter invalid", "Topic Name invalid", "Packet Identifier in use",
           "Packet Identifier not found", "Receive Maximum exceeded", "Topic Alias invalid",
           "Packet too large", "Message rate too high", "Quota exceeded",
           "Administrative action", "Payload format invalid", "Retain not supported",
           "QoS not supported", "Use another server", "Server moved",
           "Shared Subscriptions not supported", "Connection rate exceeded",
           "Maximum connect time", "Subscription Identifiers not supported",
           "Wildcard Subscriptions not supported")
# MQTT 3.1.1 CONNACK return codes 1 to 5 (3.2.2.3)
_NAMES4 = ("unacceptable protocol version", "identifier rejected", "server unavailable",
           "bad user name or password", "not authorized")


def reason(e):
    """'0x87 Not authorized': an MQTTError's or ServerError's code and name.
    Codes 1 to 5 come only in a 3.1.1 CONNACK (5.0 refusals are >= 0x80)."""
    c = e.args[0] if e.args else None
    if type(c) is not int:
        return str(c)
    if 0x80 <= c < 0x80 + len(_NAMES5):
        name = _NAMES5[c - 0x80]
    elif 1 <= c <= 5:
        name = "MQTT 3.1.1 CONNACK: " + _NAMES4[c - 1]
    elif c == 0:
        name = "Normal disconnection"
    else:
        name = "reason code"
    return "0x%02X %s" % (c, name)


def payload(c, topic, payload, props, qos, room):
    """ValueError for a PUBLISH of client c (lite.core.publish()) that did
    not fit its image of room bytes."""
    n = 2 + len(topic.encode() if type(topic) is str else topic) + (2 if qos else 0)
    n += len(payload.encode() if type(payload) is str else payload)
    if c.state[10] == 5:  # lite._V
        k = len(props) if props else 0
        n += k + (1 if k < 128 else 2)
    return ValueError("payload: a PUBLISH of %d bytes, over the %d its %s holds" % (
        _packet(n), _packet(room - _HEAD), "slot" if qos else "buffer"))
