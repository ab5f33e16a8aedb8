# frugalmqtt.session: the full client's protocol engine without a driver:
# the core with receiving and outbound aliases, sans-I/O. client.MQTTClient
# is the same parts over the blocking driver; this is for a driver of your
# own (and the tests): hand begin() a stream with write(buf, off, n) -> k and
# close(), frame what the server sends into data (its first byte in
# state[14], lite._T) and call input(n); tick() keeps the connection alive.
from .lite import core, SESSION_LOST, ticks_ms  # noqa: F401  (SESSION_LOST: a result)
from .recv import Receiver, Message, FULL  # noqa: F401  (FULL: a result)
from .alias import Aliases, EXPIRED  # noqa: F401

WINDOW_FULL = FULL
_room = None  # room in the globals dict for fast builtin lookups (tests/test_dict_room.py)


class Session(Receiver, core):
    """client_id, version (4: 3.1.1, 5: 5.0), the CONNECT's user, password,
    keepalive, clean, session_expiry, will and props (raw, props.build()),
    and the sizes of client.MQTTClient, all allocated here, once."""

    def __init__(self, client_id, version=5, user=None, password=None, keepalive=60,
                 clean=True, session_expiry=None, will=None, props=b"", max_packet=1024,
                 tx_size=512, slots=8, slot_size=256, inbound=8, aliases_out=8, aliases_in=4,
                 alias_topic_max=64, clock=ticks_ms):
        self.rinit(inbound, aliases_in, alias_topic_max)
        if version == 5:
            props = self.rprops() + props
        core.__init__(self, client_id, None, 0, version, user, password, keepalive, None, clean,
                      session_expiry, will, slot_size, slots, max_packet, 0, tx_size, props,
                      clock)
        self.rhook()
        if version == 5:
            Aliases(self, aliases_out)  # the core's state[_AL]

    def begin(self, sock, clean):
        """Start a connection on the open stream sock: send CONNECT. The
        session resumes when the CONNACK comes (input())."""
        from . import lconn  # (it drops itself after the CONNACK)
        self.state[1] = 0  # lite._QUOTA: the server has not accepted this connection yet
        lconn.start(self, sock, clean)

    def publish(self, topic, payload, qos=0, retain=False, props=None):
        """lite.core.publish(); with every slot taken WINDOW_FULL at once
        (no driver here to wait for an ack)."""
        return core.publish(self, topic, payload, qos, retain, props, None)
