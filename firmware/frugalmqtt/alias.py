# frugalmqtt.alias: outbound topic aliases (MQTT 5), a mixin over core.Core
# (listed before the driver in the client class, as recv.Receiver is).
#
# The first topics published get the aliases and keep them: alias k stands
# for the same topic on every connection, and only which of them the server
# knows is per connection [MQTT-3.3.2-7]. A topic's first PUBLISH on a
# connection carries it with its alias, later ones the alias alone. A stored
# QoS 1/2 message that went out with an alias is made plain again before it
# is resent on a new connection (prepare()). Only immutable topics (str,
# bytes) get one: a bytearray may change under the same object.
try:
    from micropython import const
except ImportError:  # CPython
    from ._cpython import const

_HEAD = const(5)  # core._HEAD
EXPIRED = const(-2)  # on_done reason: the Message Expiry Interval passed while stored


class Aliases:
    _prep = True  # core.Core calls prepare()

    def ainit(self, aliases_out=8):
        """aliases_out: topics that may get an alias (the server's Topic Alias
        Maximum, when smaller, bounds what a connection uses)."""
        self.aliases = aliases_out
        self.a_out = [None] * aliases_out  # alias k's topic at k - 1
        self.a_known = bytearray(aliases_out)  # ... sent with it on this connection
        self.t0 = [0] * self.slots  # clock() when slot i's message was stored

    def alias(self, topic):
        """The alias for topic on this connection: k > 0 when the server knows
        it, -k when this PUBLISH is to carry the topic and k, 0 for none.
        alias(k), k an int: the PUBLISH carrying alias k goes, the server will
        know it. alias(None) starts a connection: the server knows none."""
        t = self.a_out
        k = self.a_known
        i = 0
        if topic is None:
            while i < self.aliases:
                k[i] = 0
                i += 1
            return 0
        if type(topic) is int:
            k[topic - 1] = 1
            return 0
        if type(topic) is bytearray:
            return 0
        while i < self.amax:  # never above the server's maximum [MQTT-3.3.2-9]
            x = t[i]
            if x is None:
                t[i] = topic
                x = topic
            if x is topic or type(x) is type(topic) and x == topic:
                return i + 1 if k[i] else -1 - i
            i += 1
        return 0

    def prepare(self, i):
        """Before slot i's PUBLISH goes again: drop it when its Message Expiry
        Interval passed while it was stored, else lower the interval by the time
        it waited (QoS 1; a QoS 2 message keeps it once sent [MQTT-4.3.3-7]); and
        put its topic back in place of an alias this connection does not know.
        Returns True when dropped."""
        if self.v != 5:
            return False
        b = self.img[i]
        s = self.start[i]
        o = s + 1
        while b[o] & 0x80:  # the remaining length
            o += 1
        o += 1
        tn = b[o] << 8 | b[o + 1]
        p = o + 4 + tn  # the property length, after the topic and packet id
        n = b[p]
        q = p + 1
        if n & 0x80:
            n = n & 0x7F | b[p + 1] << 7
            q += 1
        e = q + n
        if not n:
            return False
        a = 0
        if b[q] == 0x23:  # the alias the core wrote first
            a = b[q + 1] << 8 | b[q + 2]
        k = q + (3 if a else 0)
        while k < e:  # the Message Expiry Interval, if any
            if b[k] == 0x02:
                left = (b[k + 1] << 24 | b[k + 2] << 16 | b[k + 3] << 8 | b[k + 4])
                gone = (self.clock() - self.t0[i]) // 1000
                if b[s] & 4 and b[s] & 8:
                    break  # QoS 2 already sent: unchanged
                if left <= gone:
                    self._free(i, EXPIRED)
                    return True
                left -= gone
                self.t0[i] += gone * 1000
                b[k + 1] = left >> 24
                b[k + 2] = left >> 16 & 0xFF
                b[k + 3] = left >> 8 & 0xFF
                b[k + 4] = left & 0xFF
                break
            # the next property (those a client sends)
            x = b[k]
            if x == 0x01:
                k += 2
            elif x == 0x23:
                k += 3
            else:  # a string or binary data, a user property's name and value
                k += 3 + (b[k + 1] << 8 | b[k + 2])
                if x == 0x26:
                    k += 2 + (b[k] << 8 | b[k + 1])
        if not a:
            return False
        # Rewrite the image without the alias, with its topic.
        pid = b[p - 2] << 8 | b[p - 1]
        tail = bytes(b[q + 3:s + self.size[i]])  # the other properties and the payload
        first = b[s]
        o = self._text(b, _HEAD + 2, self.a_out[a - 1])
        n = o - _HEAD - 2
        b[_HEAD] = n >> 8
        b[_HEAD + 1] = n & 0xFF
        b[o] = pid >> 8
        b[o + 1] = pid & 0xFF
        o += 2
        p = e - q - 3  # the properties left
        if p < 128:
            b[o] = p
            o += 1
        else:
            b[o] = p & 0x7F | 0x80
            b[o + 1] = p >> 7
            o += 2
        b[o:o + len(tail)] = tail
        o += len(tail)
        s = self._seal(b, o, first)
        self.start[i] = s
        self.size[i] = o - s
        return False

