"""The scripted peer for lite.Publisher tests: the broker end of the
connection, with scripted bytes in and every sent byte recorded, and a
Publisher whose readiness comes from the script. Runs on CPython and
MicroPython."""
from frugalmqtt.lite import Publisher


class Peer:
    """The broker end of the connection: scripted bytes in, sent bytes recorded.
    Has both the MicroPython stream calls and the CPython socket calls lite uses."""

    def __init__(self):
        self.inb = bytearray(4096)
        self.rpos = 0
        self.rend = 0
        self.out = bytearray(8192)
        self.olen = 0
        self.closed = False
        self.ready = (self,)

    def give(self, *packets):
        for p in packets:
            self.inb[self.rend:self.rend + len(p)] = p
            self.rend += len(p)

    def readinto(self, buf, n):
        k = min(n, self.rend - self.rpos)
        i = 0
        while i < k:
            buf[i] = self.inb[self.rpos + i]
            i += 1
        self.rpos += k
        return k

    def recv_into(self, buf, n):
        return self.readinto(buf, n)

    def write(self, b, o, n):
        i = 0
        while i < n:
            self.out[self.olen + i] = b[o + i]
            i += 1
        self.olen += n
        return n

    def sendall(self, mv):
        return self.write(mv, 0, len(mv))

    def close(self):
        self.closed = True

    def ipoll(self, ms):
        """The poller's call: the peer is readable while its script has bytes
        (a tuple made once: no allocation, as MicroPython's poll.ipoll)."""
        return self.ready if self.rpos < self.rend else ()

    def sent(self):
        """The packets sent since the last call, as a list of bytes."""
        res = []
        o = 0
        while o < self.olen:
            k = o + 1
            rl = 0
            s = 0
            while True:
                c = self.out[k]
                k += 1
                rl |= (c & 0x7F) << s
                s += 7
                if c < 128:
                    break
            res.append(bytes(self.out[o:k + rl]))
            o = k + rl
        self.olen = 0
        return res


class Lite(Publisher):
    """A Publisher whose readiness comes from the peer's script: poll() asks
    poller.ipoll(), and the peer is its own poller."""

    def connect(self, clean=None, sock=None, timeout_ms=0):
        if sock is not None:
            self.poller = sock
        return Publisher.connect(self, clean, sock, timeout_ms)


# lite.py's state[...] indices the tests read (its _TX, _PING: a const
# with a leading underscore is no module attribute on MicroPython)
TX = 5  # when the last packet went out
PING = 9  # when the PINGREQ due a PINGRESP went, -1: none
