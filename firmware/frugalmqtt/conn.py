# frugalmqtt.conn: what runs once per connection, in a module of its own:
# opening the stream (tcp(), and lite's blocking connect()) and the CONNACK
# (connack()), with the session's resume. The core imports it at the
# CONNACK and drops it again (core._drop): a device holds its code only
# while it connects. It does not import the core (no import circle): the
# core hands connack() its class.
import errno
import select
from sys import implementation

try:
    from micropython import const
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython
    from ._cpython import const, ticks_ms, ticks_diff

# core.Core's slot states, and core.SESSION_LOST
_COMP = const(3)  # PUBREL sent, waiting for PUBCOMP
_HOLD = const(4)  # not sent on this connection yet
_SESSION_LOST = const(-3)


def tcp(server, port, timeout_ms, ssl, ms=0):
    """Open a TCP connection to server:port (IPv4 or IPv6, as the name
    resolves) with Nagle's delay off, wrapped in TLS when ssl is a context:
    the one way the drivers open their stream (the Core itself does no
    I/O). The connect and the TLS handshake block up to ms (0:
    timeout_ms); the socket then has timeout_ms for its reads and writes."""
    import socket
    ai = socket.getaddrinfo(server, port, 0, socket.SOCK_STREAM)[0]
    s = socket.socket(ai[0], socket.SOCK_STREAM)
    try:
        s.settimeout((ms or timeout_ms) / 1000)
        s.connect(ai[-1])
        try:  # every packet leaves in one write: Nagle must not hold it
            s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY (no names on the unix port)
        except OSError:
            pass  # a stack without TCP_NODELAY: it still works (tests/test_conn_tcp.py)
        r = s
        if ssl:
            s = ssl.wrap_socket(s, server_hostname=server)
        # MicroPython's TLS socket has no settimeout: it reads and writes through r
        getattr(s, "settimeout", r.settimeout)(timeout_ms / 1000)
    except BaseException:
        s.close()
        raise
    return s


def connect(c, clean, sock, timeout_ms):
    """lite.Publisher.connect(): open the stream (unless sock is given),
    send CONNECT, handle the CONNACK."""
    if clean is None:
        clean = c.clean
    timeout_ms = timeout_ms or c.timeout
    t0 = ticks_ms()
    c.close()
    try:
        if sock is None:
            sock = c.sock = tcp(c.server, c.port, c.timeout, c.ssl, timeout_ms)
            c.poller = select.poll()
            c.poller.register(sock, select.POLLIN)
            if implementation.name != "micropython":
                from ._cpython import Stream
                sock = c.poller = Stream(sock, c.poller)
        c.begin(sock, clean)
        if not c._wait(max(0, timeout_ms - ticks_diff(ticks_ms(), t0))):
            raise OSError(errno.ETIMEDOUT)  # no CONNACK
        c.packet(c._read())
        return bool(c.sp)
    except BaseException:
        c.close()
        raise


def connack(c, rl, Core):
    """The first packet of a connection, in c.rx (rl body bytes), for
    core.Core.packet() (Core: that class): check it, take the server's
    limits, resume the session. Returns the reason code of a refusal (the
    core raises ServerError), else 0."""
    r = c.rx
    if c.first != 0x20:
        raise c._fail(0x82)  # [MQTT-3.2.0-1]
    if rl < 2 or c.v == 4 and rl != 2 or r[0] & 0xFE:
        raise c._fail(0x81)  # [MQTT-3.2.2-1]
    sp = r[0] & 1
    c.quota = c.slots
    c.server_max = 268435460
    c.max_qos = 2
    c.retain_ok = True
    h = c.hello
    c.ka_ms = (h[8] << 8 | h[9]) * 1000  # our Keep Alive
    if c.aliases:
        c.amax = 0  # no aliases unless the server allows them [MQTT-3.2.2-17]
    if c.v == 5:
        Core._props(c, 2, rl)
    if r[1]:
        return r[1]  # refused: CONNACK reason / return code [MQTT-4.13.2-1]
    if sp and c.clean:
        raise c._fail(0x82)  # session present after clean start [MQTT-3.2.2-4]
    c.up = True
    c.sp = sp
    c.ping_t = None
    c.last_rx = c.last_tx
    # Resend the table in order [MQTT-4.4.0-1], a PUBLISH sent before
    # with DUP=1 [MQTT-3.3.1-1]. Without a session they go again as new
    # messages, and a QoS 2 flow past PUBREC ends as SESSION_LOST
    # [MQTT-3.2.2-5]. PUBLISHes beyond the server's quota wait [MQTT-4.9.0-2].
    k = 0
    u = 0  # the quota the PUBREL flows hold: never held back, they count [U-4.9-a]
    while k < c.n:
        i = c.order[k]
        if c.state[i] == _COMP:
            if not sp:
                c._free(i, _SESSION_LOST)
                if k < c.early:
                    c.early -= 1
                continue
            u += 1
        k += 1
    c.inbound(2, sp)  # a new connection for the receiving side
    if c.aliases:
        c.alias(None)  # aliases are per connection [MQTT-3.3.2-7]
    k = 0
    while k < c.n:
        i = c.order[k]
        if k < c.early:  # sent after our CONNECT: the server has it [MQTT-3.1.4-5]
            if c.state[i] != _COMP:
                u += 1
        elif c.state[i] == _COMP:
            Core._ack(c, 0x62, c.pid[i])  # PUBREL again
        else:
            if not sp:
                c.img[i][c.start[i]] &= 0xF7  # a new message again
            c.state[i] = _HOLD
            if c._prep and c.prepare(i):
                continue  # dropped
            if u < c.quota:
                Core._go(c, i)
                u += 1
        k += 1
    return 0
