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
# asked for): the CONNECT's write drives it. Its mbedTLS speaks TLS 1.2,
# after whose handshake the first bytes to read are the CONNACK's; CPython's
# TLS 1.3 sends session tickets first, so step() reads a byte ahead there.
# One mbedTLS step (a signature check, the key exchange) runs in one call:
# a call can overrun its time by that much, never by a network wait. The
# name lookup (getaddrinfo) blocks: give an address, or a name the resolver
# caches, where that matters.
import select
import socket
from errno import EINPROGRESS, ECONNREFUSED, ETIMEDOUT
from sys import implementation
from .lite import ticks_ms, ticks_diff

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

# what the attempt is at
_AT_TCP = const(0)  # the TCP connect: waits until writable
_AT_TLS = const(1)  # CPython's handshake: waits the way do_handshake() asked
_AT_HELLO = const(2)  # the link is ready: lconn.start() sends the CONNECT
_AT_SEND = const(3)  # the CONNECT's write (MicroPython TLS: the handshake too)
_AT_ACK = const(4)  # the CONNACK: waits until readable
# lite.py's state[...] indices
_TX = const(5)
_CLEAN = const(11)
_TMO = const(12)
_PORT = const(13)
_CLOCK = const(28)
_SERVER = const(29)
_SSL = const(30)


class Dial:
    """One connect attempt of client c, started here (the name looked up,
    the TCP connect begun) and advanced by step(). c closes its socket `s`
    to drop it."""

    def __init__(self, c):
        self.t0 = ticks_ms()
        ai = socket.getaddrinfo(c.state[_SERVER], c.state[_PORT], 0, socket.SOCK_STREAM)[0]
        self.addr = ai[-1]
        self.raw = self.s = socket.socket(ai[0], socket.SOCK_STREAM)
        self.at = _AT_TCP
        self.p = select.poll()
        try:
            self.raw.setblocking(False)
            try:
                self.raw.connect(self.addr)
            except OSError as e:
                if e.args[0] != EINPROGRESS:
                    raise
            self.p.register(self.raw, select.POLLOUT)
        except BaseException:
            self.raw.close()
            raise

    def write(self, b, o, n):
        """lconn.start() writes the CONNECT here: its place in b is kept (b,
        o, n), step() sends it."""
        self.b = b
        self.o = o
        self.n = o + n
        return n

    def step(self, c, ms):
        """Advance the attempt for up to ms (-1: as long as it may take, 0:
        without waiting). True when the CONNACK is there to read: the
        socket is then c's link (back in blocking mode, with timeout_ms for
        its reads and writes). False when ms ran out first. OSError on
        failure, ETIMEDOUT once the attempt has taken c's timeout_ms."""
        t0 = ticks_ms()
        s = self.s
        p = self.p
        a = c.state
        while True:
            at = self.at
            mask = select.POLLIN  # _AT_ACK
            if at == _AT_TCP:
                mask = select.POLLOUT
            elif at == _AT_TLS:
                try:
                    s.do_handshake()
                    self.at = _AT_HELLO
                    continue
                except OSError as e:  # SSLWantReadError/SSLWantWriteError
                    mask = _want(e)
            elif at == _AT_HELLO:
                from . import lconn  # (it drops itself after the CONNACK)
                lconn.start(c, self, a[_CLEAN])  # the CONNECT, the connection's state reset
                c.sock = None  # not the link yet: written from here
                if implementation.name != "micropython":
                    from .time import Stream
                    self.w = Stream(s, p)  # stream and poller, as lite's connect()
                else:
                    self.w = s
                self.at = _AT_SEND
                continue
            elif at == _AT_SEND:
                try:
                    k = self.w.write(self.b, self.o, self.n - self.o)
                    mask = select.POLLIN | select.POLLOUT  # mbedTLS's socket polls its way
                except OSError as e:  # CPython: would block
                    k = 0
                    mask = _want(e)
                if k:
                    self.o += k
                    if self.o == self.n:
                        a[_TX] = a[_CLOCK]()  # as the core's send()
                        self.at = _AT_ACK
                        p.register(s, select.POLLIN)  # (again: a new mask)
                    continue
            # the wait: what is left of ms and of the attempt's timeout_ms
            t = a[_TMO] - ticks_diff(ticks_ms(), self.t0)
            if t <= 0:
                raise OSError(ETIMEDOUT)  # the attempt took timeout_ms
            if ms >= 0:
                k = ms - ticks_diff(ticks_ms(), t0)
                if k < t:
                    t = k if k > 0 else 0
            if at == _AT_TLS or at == _AT_SEND:
                p.register(s, mask)
            ev = p.poll(t)
            if not ev:
                if ms < 0 or ticks_diff(ticks_ms(), t0) < ms:
                    continue  # woken early, or the attempt's end (raised above)
                return False
            if at == _AT_TCP:
                if ev[0][1] & (select.POLLERR | select.POLLHUP):  # the connect failed:
                    s.connect(self.addr)  # its error (Linux raises it here)
                    raise OSError(ECONNREFUSED)
                try:  # as conn.tcp(): every packet in one write
                    s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
                except OSError:
                    pass
                p.unregister(s)
                self.at = _AT_HELLO
                if a[_SSL]:
                    s = self.s = a[_SSL].wrap_socket(s, server_hostname=a[_SERVER],
                                                     do_handshake_on_connect=False)
                    if hasattr(s, "do_handshake"):  # CPython
                        self.at = _AT_TLS
                    p.register(s, select.POLLIN | select.POLLOUT)
                else:
                    p.register(s, select.POLLOUT)
            elif at == _AT_ACK:
                if self.w is not s:  # CPython: TLS 1.3's session tickets make the
                    try:  # socket readable with nothing for us: read a byte to know
                        k = s.recv(1)
                    except OSError as e:
                        _want(e)  # (SSLWantReadError: tickets only)
                        continue
                    if k:
                        from .time import Ahead
                        self.w = Ahead(s, p, k[0])  # gives that byte to the first read
                # MicroPython's TLS socket has no settimeout: it goes through the raw one
                getattr(s, "settimeout", self.raw.settimeout)(a[_TMO] / 1000)
                c.sock = self.w
                c.poller = p if self.w is s else self.w
                return True


def _want(e):
    """The poll mask a CPython would-block error asks for; raises any
    other error."""
    n = type(e).__name__
    if n == "SSLWantWriteError" or n == "BlockingIOError":
        return select.POLLOUT
    if n == "SSLWantReadError":
        return select.POLLIN
    raise e
