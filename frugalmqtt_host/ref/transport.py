# A TCP or TLS connection with the two calls the session needs: write a whole
# packet from buf[off:off+n], and readinto() that returns None when nothing
# is available now. Runs on MicroPython (socket.write(buf, off, n), ipoll:
# no allocation) and on CPython (send/recv_into).
import socket
import select
import sys

_MP = sys.implementation.name == "micropython"
_EAGAIN = (11, 35, 115)  # EAGAIN/EWOULDBLOCK on Linux, macOS/BSD, lwIP EINPROGRESS


class Transport:
    def __init__(self, host, port, ssl_context=None, timeout_ms=10000):
        addr = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0][-1]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock = s
        try:
            s.settimeout(timeout_ms / 1000)
            s.connect(addr)
            try:  # every packet leaves in one write: don't let Nagle hold it
                # IPPROTO_TCP, TCP_NODELAY by number: the unix port's socket
                # module lacks the names; 6 and 1 on Linux, BSD, lwIP, Windows
                s.setsockopt(6, 1, 1)
            except (AttributeError, OSError):
                pass  # a port without TCP_NODELAY
            if ssl_context is not None:
                s = ssl_context.wrap_socket(s, server_hostname=host)
                self.sock = s
            s.setblocking(False)
        except Exception:
            self.close()
            raise
        self.poller = select.poll()
        self.poller.register(s, select.POLLIN)
        self.wpoller = select.poll()
        self.wpoller.register(s, select.POLLOUT)

    def readinto(self, buf, n=0):
        """Read up to n bytes (len(buf) if 0) into buf; None: nothing now; 0: closed."""
        try:
            if _MP:
                return self.sock.readinto(buf, n or len(buf))
            return self.sock.recv_into(buf, n or len(buf))
        except OSError as e:
            if _would_block(e):
                return None
            raise

    def write(self, buf, off, n):
        """Write all of buf[off:off+n] or raise OSError."""
        try:  # the whole packet at once, as almost always
            if _MP:
                k = self.sock.write(buf, off, n)
            else:
                k = self.sock.send(memoryview(buf)[off:off + n])
        except OSError as e:
            if not _would_block(e):
                raise
            k = None
        if k != n:
            self._rest(buf, off, n, k)

    def _rest(self, buf, off, n, k):
        """The rest of a packet the socket took k bytes of (None: none, busy)."""
        end = off + n
        while True:
            if k is None:
                if not self._ready(self.wpoller, 5000):
                    raise OSError("write timed out")
            elif k == 0:
                raise OSError("connection closed")
            else:
                off += k
                if off >= end:
                    return
            try:
                if _MP:
                    k = self.sock.write(buf, off, end - off)
                else:
                    k = self.sock.send(memoryview(buf)[off:end])
            except OSError as e:
                if not _would_block(e):
                    raise
                k = None

    def wait_readable(self, timeout_ms):
        """Block up to timeout_ms (-1: forever) for data; True if readable."""
        if not _MP:
            try:
                if self.sock.pending():  # CPython TLS may hold decrypted bytes
                    return True
            except AttributeError:
                pass
        return self._ready(self.poller, timeout_ms)

    def _ready(self, poller, timeout_ms):
        if _MP:
            for _ in poller.ipoll(timeout_ms):
                return True
            return False
        return bool(poller.poll(timeout_ms))

    def close(self):
        try:
            self.sock.close()
        except Exception:
            pass


def _would_block(e):
    if e.args and e.args[0] in _EAGAIN:
        return True
    # CPython TLS: SSLWantReadError / SSLWantWriteError
    return type(e).__name__.startswith("SSLWant")
