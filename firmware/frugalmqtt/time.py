# frugalmqtt.time: what MicroPython has built in (micropython.const, the
# ticks of its time module, its stream calls), for the device modules running
# on CPython (host tests and the host simulator). Never installed on a
# device. The device modules fall back to it (`from .time import ...`): the
# name "time" is one MicroPython has built in, so the fallback costs a
# device no name of its own (a module's every name is interned when its .mpy
# loads, even on a branch that never runs).
from time import monotonic


def const(x):
    return x


def ticks_ms():
    return int(monotonic() * 1000)


def ticks_diff(a, b):
    return a - b


class Stream:
    """A CPython socket with the MicroPython stream calls lite.Publisher uses
    (readinto, write with an offset) and its poller (ipoll)."""

    def __init__(self, sock, poller):
        self.sock = sock
        self.poller = poller

    def readinto(self, buf, n):
        return self.sock.recv_into(buf, n)

    def write(self, b, o, n):
        return self.sock.send(memoryview(b)[o:o + n])

    def close(self):
        self.sock.close()

    def ipoll(self, ms):
        pending = getattr(self.sock, "pending", None)  # TLS holds decrypted bytes
        if pending and pending() or self.poller.poll(ms):
            yield self.sock


class Ahead(Stream):
    """A Stream whose first read gives byte b, read ahead (dial.py reads
    one to tell the CONNACK from TLS 1.3's session tickets, after which a
    socket is readable with nothing for the application)."""

    def __init__(self, sock, poller, b):
        Stream.__init__(self, sock, poller)
        self.b = b

    def readinto(self, buf, n):
        buf[0] = self.b
        self.readinto = self.sock.recv_into  # then the plain Stream's read
        return 1


class File:
    """A CPython binary file with the MicroPython stream calls the outbox
    uses (write and readinto with an offset and a length); flush() also
    syncs to the disk, as MicroPython's does on the unix port and a commit
    does on littlefs and FAT."""

    def __init__(self, f):
        self.f = f
        self.seek = f.seek
        self.tell = f.tell
        self.fileno = f.fileno
        self.close = f.close

    def write(self, buf, off=0, n=-1):
        return self.f.write(memoryview(buf)[off:off + n if n >= 0 else len(buf)])

    def readinto(self, buf, n=-1):
        return self.f.readinto(memoryview(buf)[:n if n >= 0 else len(buf)])

    def flush(self):
        from os import fsync
        self.f.flush()
        fsync(self.f.fileno())


def print_exception(e):
    """MicroPython's sys.print_exception: the traceback, as Python prints it."""
    import traceback
    traceback.print_exception(type(e), e, e.__traceback__)
