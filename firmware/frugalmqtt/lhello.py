# frugalmqtt.lhello: the core's construction (lite.core.__init__): the
# arguments, their checks, the settings in state and the CONNECT, built once
# when a client is made; then this module drops itself.
# Nothing of lite: lite imports this module (an import circle otherwise), so
# why comes as an argument; ticks_ms from time, as lite's. (A global here,
# not a second argument: this module's globals dict keeps the size it had
# when it imported both from lite. Measured: with one entry fewer, the
# holes lhello leaves took the buffers only from a 15.8 KB heap up.)

try:
    from micropython import const
    from time import ticks_ms
except ImportError:  # CPython
    from .time import const, ticks_ms

# lite.py's state[...] indices
_MQOS = const(7)
_PING = const(9)
_RET = const(8)
_SMAX = const(6)
_V = const(10)
_CLEAN = const(11)
_TMO = const(12)
_PORT = const(13)
_SSL = const(30)
_CLOCK = const(28)
_SERVER = const(29)
_STRIDE = const(16)
_TXO = const(17)
_T = const(14)
_ORD = const(26)
_HELLO = const(27)
_M = const(6)


def encode(self, why, client_id, server, port=0, version=5, user=None, password=None,
           keepalive=60, ssl=None, clean=True, session_expiry=None, will=None,
           max_packet=256, slots=4, rx_size=64, timeout_ms=10000, tx_size=0, props=b"",
           clock=None):
    """Publisher.__init__(): the state and the attributes, the checks, the
    settings, the buffers' sizes (state[_T]: buf, state[_ORD]: slots,
    state[_HELLO]: data; __init__ makes them once this module is gone), and
    the CONNECT, returned: 5 bytes for its fixed header (b[0]:
    where it starts), then the body. 5.0: we take no packet larger than rx
    [MQTT-3.1.2-24], acks without reason strings [MQTT-3.1.2-29], and a
    persistent session needs a session expiry [MQTT-3.1.2-23]. This module
    drops itself when done."""
    try:
        # (the connection's settings every driver takes, server, port, ssl,
        # timeout_ms, are kept here, not used: a driver opens the stream)
        if slots < 1 or max_packet < 16 or rx_size < 8:
            raise why("slots", slots, max_packet, rx_size)
        a = self.state = [0] * 31  # the numbers (state[_N] ...)
        a[_CLOCK] = clock or ticks_ms  # (in state, not attributes: the attribute table stays at 12)
        a[_SERVER] = server
        a[_SSL] = ssl
        # (every attribute set before a buffer: the attribute table grows no more;
        # poller: the driver's)
        self.sock = self.poller = self.topic = self.buf = self.data = None
        a[_STRIDE] = max_packet + _M
        a[_TXO] = slots * (max_packet + _M)
        a[_T] = slots * (max_packet + _M) + _M + (tx_size or max_packet)
        a[_ORD] = slots
        a[_HELLO] = rx_size
        if version != 4 and version != 5:
            raise why("version", version)
        if version == 4 and (not client_id and not clean or password is not None and user is None):
            raise why("user")  # [MQTT-3.1.3-7] [MQTT-3.1.2-22]
        a[_V] = version
        a[_CLEAN] = clean
        a[_PORT] = port or (8883 if ssl else 1883)
        a[_TMO] = timeout_ms
        a[_PING] = -1
        a[_SMAX] = 268435460
        a[_MQOS] = 2
        a[_RET] = 1
        if ssl is True or type(ssl) is dict:  # umqtt's ssl_params: frugalmqtt.tls verifies
            from .tls import context
            a[_SSL] = context(ssl)
        # the CONNECT
        w = will
        b = bytearray(b"\0\0\0\0\0\0\x04MQTT")
        b.append(version)
        b.append((4 | w[2] << 3 | (32 if w[3] else 0) if w else 0) |
                 (128 if user is not None else 0) | (64 if password is not None else 0))
        b += keepalive.to_bytes(2, "big")
        f = [(0, client_id)]  # (1: a property block, 0: a string) in order
        if version == 5:
            if session_expiry is None and not clean:
                session_expiry = 0xFFFFFFFF
            p = b"\x27" + rx_size.to_bytes(4, "big") + b"\x17\x00" + props
            if session_expiry:
                p += b"\x11" + session_expiry.to_bytes(4, "big")
            f.insert(0, (1, p))
        if w:
            if version == 5:
                f.append((1, w[4] if len(w) > 4 and w[4] else b""))
            f.append((0, w[0]))
            f.append((0, w[1]))
        for s in (user, password):
            if s is not None:
                f.append((0, s))
        for k, s in f:
            if isinstance(s, str):
                s = s.encode()
            n = len(s)
            if k:
                while n > 127:
                    b.append(n & 0x7F | 0x80)
                    n >>= 7
                b.append(n)
            elif n > 65535:
                raise why("long_string", n)  # [MQTT-1.5.4-1]
            else:
                b += n.to_bytes(2, "big")
            b += s
        n = len(b) - 5
        if n + 5 > max_packet:
            raise why("connect_size", n, max_packet)
        k = 5 - (2 if n < 128 else 3 if n < 16384 else 4)
        b[0] = k
        b[k] = 0x10
        while n > 127:
            k += 1
            b[k] = n & 0x7F | 0x80
            n >>= 7
        b[k + 1] = n
        return b
    finally:
        import sys
        if sys.implementation.name == "micropython":  # (CPython: threads may import it)
            del sys.modules[__name__]
            delattr(sys.modules["frugalmqtt"], "lhello")

