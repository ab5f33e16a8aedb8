# The two exceptions every frugalmqtt profile raises (the full client and
# lite.py), in a module of their own so the lean profile need not import the
# codec to raise or catch them.


class MQTTError(Exception):
    """A packet that breaks the protocol. `reason` is the MQTT 5 reason code
    to send in DISCONNECT (or the ack); on 3.1.1 the connection is closed."""

    def __init__(self, reason, msg=""):
        super().__init__(reason, msg)
        self.reason = reason


class ServerError(Exception):
    """The server refused the connection (CONNACK reason code >= 0x80) or
    ended it (DISCONNECT); args[0] is its reason code."""
