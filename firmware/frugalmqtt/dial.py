# frugalmqtt.dial: a connect attempt that resumes across calls, for
# client.MQTTClient.ensure_connected() and poll(): TCP connect (non-blocking:
# EINPROGRESS, then writable), TLS handshake, CONNECT sent, CONNACK awaited,
# each call advancing it for at most its own time. The attempt as a whole
# is bounded by the client's timeout_ms. Imported at the first reconnect
# only: a client that only ever calls connect() (blocking, lite's) never
# holds it.
#
# TLS: CPython's handshake goes by do_handshake() on the non-blocking
# socket (SSLWantReadError/SSLWantWriteError say which way to wait).
# MicroPython's ssl (mbedTLS; the unix port and ESP32) has no do_handshake():
# wrapped with do_handshake_on_connect=False, its socket does the handshake
# inside the first write, which returns None while the handshake waits for
# the server (polling the TLS socket then waits in the direction mbedTLS
# asked for): the CONNECT's write drives it. One mbedTLS step (a signature
# check, the key exchange) runs in one call: a call can overrun its time by
# that much, never by a network wait. The name lookup (getaddrinfo) blocks:
# give an address, or a name the resolver caches, where that matters.
import select
import socket
from errno import EINPROGRESS, ECONNREFUSED, ETIMEDOUT
from sys import implementation
from .core import ticks_ms, ticks_diff

# what the attempt waits for
_TCP = 0  # the TCP connect (writable)
_TLS = 1  # CPython's handshake: the way do_handshake() asked for
_SEND = 2  # the CONNECT's write (MicroPython TLS: the handshake too)
_ACK = 3  # the CONNACK (readable)


class Dial:
    """One connect attempt of client c, started here (the name looked up,
    the TCP connect begun) and advanced by step()."""

    def __init__(self, c):
        self.t0 = ticks_ms()
        ai = socket.getaddrinfo(c.server, c.port, 0, socket.SOCK_STREAM)[0]
        self.addr = ai[-1]
        self.raw = self.s = socket.socket(ai[0], socket.SOCK_STREAM)
        self.o = self.n = 0  # what is left of the CONNECT in c.img[-1]
        self.p = select.poll()
        try:
            self.raw.setblocking(False)
            try:
                self.raw.connect(self.addr)
            except OSError as e:
                if e.args[0] != EINPROGRESS:
                    raise
            self.at = _TCP
            self.p.register(self.raw, select.POLLOUT)
        except BaseException:
            self.raw.close()
            raise

    def write(self, b, o, n):
        """begin() writes the CONNECT here: its place in b is kept, step()
        sends it."""
        self.o = o
        self.n = o + n
        return n

    def close(self):
        self.s.close()

    def step(self, c, ms):
        """Advance the attempt for up to ms (-1: as long as it may take, 0:
        without waiting). True when the CONNACK is there to read (the
        socket back in blocking mode, with timeout_ms for its reads and
        writes), False when ms ran out first. OSError on failure, and
        ETIMEDOUT once the attempt has taken the client's timeout_ms."""
        t0 = ticks_ms()
        while True:
            if self.at == _TCP:
                mask = select.POLLOUT
            elif self.at == _TLS:
                try:
                    self.s.do_handshake()
                    self._sending(c)
                    continue
                except OSError as e:  # SSLWantReadError/SSLWantWriteError
                    mask = _want(e)
            elif self.at == _SEND:
                try:
                    k = self.w.write(c.img[-1], self.o, self.n - self.o)
                    mask = select.POLLIN | select.POLLOUT  # mbedTLS's socket polls its way
                except OSError as e:  # CPython: would block
                    k = 0
                    mask = _want(e)
                if k:
                    self.o += k
                    if self.o < self.n:
                        continue
                    c.last_tx = c.clock()  # as Core._send
                    self.at = _ACK
                    self.p.register(self.s, select.POLLIN)  # (again: a new mask)
                    continue
            else:
                mask = select.POLLIN
            # the wait: what is left of ms and of the attempt's timeout_ms
            t = c.timeout - ticks_diff(ticks_ms(), self.t0)
            if t <= 0:
                raise OSError(ETIMEDOUT)  # the attempt took timeout_ms
            if ms >= 0:
                k = ms - ticks_diff(ticks_ms(), t0)
                if k < t:
                    t = k if k > 0 else 0
            if self.at == _TLS or self.at == _SEND:
                self.p.register(self.s, mask)
            ev = self.p.poll(t)
            if not ev:
                if ms < 0 or ticks_diff(ticks_ms(), t0) < ms:
                    continue  # woken early, or the attempt's end (raised above)
                return False
            if self.at == _TCP:
                if ev[0][1] & (select.POLLERR | select.POLLHUP):  # the connect failed:
                    self.raw.connect(self.addr)  # its error (Linux raises it here)
                    raise OSError(ECONNREFUSED)
                try:  # as core.tcp(): every packet in one write
                    self.raw.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
                except OSError:
                    pass
                self.p.unregister(self.raw)
                if c.ssl:
                    self.s = c.ssl.wrap_socket(self.raw, server_hostname=c.server,
                                               do_handshake_on_connect=False)
                if c.ssl and hasattr(self.s, "do_handshake"):  # CPython
                    self.at = _TLS
                else:
                    self.p.register(self.s, select.POLLIN | select.POLLOUT)
                    self._sending(c)
            elif self.at == _ACK:
                # MicroPython's TLS socket has no settimeout: it goes through the raw one
                getattr(self.s, "settimeout", self.raw.settimeout)(c.timeout / 1000)
                return True

    def _sending(self, c):
        """The link is ready for the CONNECT: begin() builds it (and resets
        the connection's state), written from here."""
        c.begin(self, c.clean)
        c.sock = None  # not the link yet: step() sends the CONNECT
        c.connected = False
        self.w = self.s
        if implementation.name != "micropython":
            from ._cpython import Stream
            self.w = Stream(self.s, self.p)  # stream and poller, as lite's connect()
        self.at = _SEND

    def link(self, c):
        """Make the attempt's socket c's link, its CONNACK next to read."""
        c.sock = self.w
        c.poller = self.w if self.w is not self.s else self.p
        c.connected = True


def _want(e):
    """The poll mask a CPython would-block error asks for; raises any
    other error."""
    n = type(e).__name__
    if n == "BlockingIOError":
        return select.POLLOUT
    if n == "SSLWantReadError":
        return select.POLLIN
    if n == "SSLWantWriteError":
        return select.POLLOUT
    raise e
