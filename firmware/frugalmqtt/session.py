# frugalmqtt.session: the full client's protocol engine without a driver:
# the core with receiving and outbound aliases, sans-I/O. client.MQTTClient
# is the same parts over the blocking driver; this is for a driver of your
# own (and the tests): hand begin() a stream with write(buf, off, n) -> k and
# close(), frame what the server sends into rx (first byte in `first`) and
# call packet(rl); tick() keeps the connection alive.
from .core import Core, FULL, SESSION_LOST, ticks_ms  # noqa: F401  (FULL, SESSION_LOST: results)
from .recv import Receiver, Message  # noqa: F401
from .alias import Aliases, EXPIRED  # noqa: F401

WINDOW_FULL = FULL
_room = None  # room in the globals dict for fast builtin lookups (see core.py)


class Session(Receiver, Aliases, Core):
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
        Core.__init__(self, client_id, version, user, password, keepalive, clean, session_expiry,
                      will, slot_size, slots, max_packet, clock, tx_size, props)
        if version == 5:
            self.ainit(aliases_out)
