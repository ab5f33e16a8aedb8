# frugalmqtt.alias: outbound topic aliases (MQTT 5), an object the core
# holds in state[_AL] (lite.py calls get(), push(), update(), start();
# state[_ALN]: how many it keeps). Aliases(client, n) installs itself.
#
# The first topics published get the aliases and keep them: alias k stands
# for the same topic on every connection, and only which of them the server
# knows is per connection [MQTT-3.3.2-7]. A topic's first PUBLISH on a
# connection carries it with its alias, later ones the alias alone. A stored
# QoS 1/2 message that went out with an alias is made plain again before it
# is resent on a new connection (update()). Only immutable topics (str,
# bytes) get one: a bytearray may change under the same object.
from .lite import ticks_diff

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

# lite.py's state[...] indices and buffer layout
_V = const(10)
_STRIDE = const(16)
_AMAX = const(20)
_AL = const(23)
_ALN = const(24)
_ORD = const(26)
_CLOCK = const(28)
_M = const(6)  # meta bytes before each slot's image
_HEAD = const(5)  # spare bytes before each body for its fixed header
EXPIRED = const(-2)  # on_done reason: the Message Expiry Interval passed while stored


class Aliases:
    """aliases_out: topics that may get an alias (the server's Topic Alias
    Maximum, when smaller, bounds what a connection uses)."""

    def __init__(self, c, aliases_out=8):
        self.c = c
        self.a_out = [None] * aliases_out  # alias k's topic at k - 1
        self.a_known = bytearray(aliases_out)  # ... sent with it on this connection
        self.t0 = [0] * len(c.state[_ORD])  # clock() when slot i's message was stored
        c.state[_AL] = self
        c.state[_ALN] = aliases_out

    def get(self, topic):
        """The alias for topic on this connection: k > 0 when the server knows
        it, -k when this PUBLISH is to carry the topic and k, 0 for none.
        get(None) starts a connection: the server knows none."""
        t = self.a_out
        k = self.a_known
        i = 0
        if topic is None:
            while i < len(k):
                k[i] = 0
                i += 1
            return 0
        if type(topic) is bytearray:
            return 0
        m = self.c.state[_AMAX]
        while i < m:  # never above the server's maximum [MQTT-3.3.2-9]
            x = t[i]
            if x is None:
                t[i] = topic
                x = topic
            if x is topic or type(x) is type(topic) and x == topic:
                return i + 1 if k[i] else -1 - i
            i += 1
        return 0

    def push(self, k):
        """The PUBLISH carrying alias k goes: the server will know it."""
        self.a_known[k - 1] = 1

    def start(self, i):
        """Slot i took a new message: its expiry counts from now."""
        self.t0[i] = self.c.state[_CLOCK]()

    def update(self, i):
        """Before slot i's PUBLISH goes again: drop it when its Message Expiry
        Interval passed while it was stored, else lower the interval by the time
        it waited (QoS 1; a QoS 2 message keeps it once sent [MQTT-4.3.3-7]); and
        put its topic back in place of an alias this connection does not know.
        Returns True when dropped (the flow ended: done(i, EXPIRED))."""
        c = self.c
        a = c.state
        if a[_V] != 5:
            return False
        b = c.buf
        s = i * a[_STRIDE]
        t = s + b[s + 1]  # the PUBLISH
        e = t + (b[s + 2] << 8 | b[s + 3])  # its end
        o = t + 1
        while b[o] & 0x80:  # the remaining length
            o += 1
        o += 1  # the body
        p = o + 4 + (b[o] << 8 | b[o + 1])  # the property length, after the topic and packet id
        n = b[p]
        q = p + 1
        if n & 0x80:
            n = n & 0x7F | b[p + 1] << 7
            q += 1
        if not n:
            return False
        k = 0
        if b[q] == 0x23:  # the alias the core wrote first
            k = b[q + 1] << 8 | b[q + 2]
        x = q + (3 if k else 0)
        while x < q + n:  # the Message Expiry Interval, if any
            if b[x] == 0x02:
                if b[t] & 4 and b[t] & 8:
                    break  # QoS 2 already sent: unchanged
                left = b[x + 1] << 24 | b[x + 2] << 16 | b[x + 3] << 8 | b[x + 4]
                gone = ticks_diff(a[_CLOCK](), self.t0[i]) // 1000
                if left <= gone:
                    c.done(i, EXPIRED)
                    return True
                left -= gone
                self.t0[i] += gone * 1000
                b[x + 1] = left >> 24
                b[x + 2] = left >> 16 & 0xFF
                b[x + 3] = left >> 8 & 0xFF
                b[x + 4] = left & 0xFF
                break
            # the next property (those a client sends)
            m = b[x]
            if m == 0x01:
                x += 2
            elif m == 0x23:
                x += 3
            else:  # a string or binary data, a user property's name and value
                x += 3 + (b[x + 1] << 8 | b[x + 2])
                if m == 0x26:
                    x += 2 + (b[x] << 8 | b[x + 1])
        if not k:
            return False
        # The plain image, its body from h: the topic (its alias's), the
        # packet id, the properties without the alias, the rest moved there
        # first (no later than it is: the aliased image starts at most 3
        # bytes before h, its topic left out or kept with the 3 alias bytes;
        # byte by byte: no copy made)
        f = b[t]
        h = s + _M + _HEAD
        y = self.a_out[k - 1]
        if type(y) is str:
            y = y.encode()  # (once per resend on a new connection)
        m = len(y)
        k = b[p - 2] << 8 | b[p - 1]  # the packet id
        n -= 3
        x = h + 4 + m + (1 if n < 128 else 2)  # where the rest goes
        q += 3
        while q < e:
            b[x] = b[q]
            x += 1
            q += 1
        b[h] = m >> 8
        b[h + 1] = m & 0xFF
        b[h + 2:h + 2 + m] = y
        o = h + 2 + m
        b[o] = k >> 8
        b[o + 1] = k & 0xFF
        if n < 128:
            b[o + 2] = n
        else:
            b[o + 2] = n & 0x7F | 0x80
            b[o + 3] = n >> 7
        n = x - h
        t = h - (2 if n < 128 else 3 if n < 16384 else 4)
        b[t] = f
        m = t + 1
        while n > 127:
            b[m] = n & 0x7F | 0x80
            n >>= 7
            m += 1
        b[m] = n
        b[s + 1] = t - s
        n = x - t
        b[s + 2] = n >> 8
        b[s + 3] = n & 0xFF
        return False
