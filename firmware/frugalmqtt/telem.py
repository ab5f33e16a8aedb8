# frugalmqtt.telem: the telemetry profile, lite.Publisher (publish-only,
# blocking) with outbound topic aliases (alias.Aliases, in the core's
# state[_AL]) and, optionally, the outbox (outbox.Outbox: messages survive a
# reboot and wait in a file beyond the slots; in state[_OB]). A class of its
# own, not an option of lite or of the full client: a publish-only device
# holds neither the receiving code (recv, props) nor the aliases it does not use.
from .alias import Aliases
from .lite import Publisher

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_V = const(10)  # lite.py's state[_V]
_FULL = const(-1)  # lite.py's FULL: the outbox's file has no room


class Telemetry(Publisher):
    """lite.Publisher's arguments, plus aliases_out (topics that may get an
    outbound alias, 5.0; with an outbox only QoS 0 messages use them) and
    outbox (an outbox.Outbox, reloaded here). With an outbox, publish()
    returns the packet id, or outbox.STORED when the message waits in the
    file for a slot (it gets its id then); it waits only when the file is
    full (OSError ETIMEDOUT after timeout_ms, ENOTCONN when the link is down:
    not stored)."""

    def __init__(self, *a, aliases_out=4, outbox=None, **kw):
        Publisher.__init__(self, *a, **kw)
        if self.state[_V] == 5:
            Aliases(self, aliases_out)  # it installs itself in state[_AL]
        if outbox:
            outbox.attach(self)  # reloads what the last run left unacknowledged

    def publish(self, topic, payload, qos=0, retain=False, props=None, timeout_ms=-1):
        """lite.Publisher.publish(); with an outbox whose file is full
        (the core's FULL) it waits for an ack in poll() and tries again
        (timeout_ms None: FULL at once, as the core's)."""
        while True:
            pid = Publisher.publish(self, topic, payload, qos, retain, props, timeout_ms)
            if pid != _FULL or timeout_ms is None:
                return pid
            if not self.poll(timeout_ms) and timeout_ms >= 0:
                raise OSError(110)  # ETIMEDOUT: no ack came, not stored
