# frugalmqtt.lconn: what runs once per connection, in a module loaded for it
# and dropped again: open() opens the TCP (TLS) stream (every driver's),
# start() sends the CONNECT on an open stream (any driver), recv() takes the
# CONNACK (the core's input() calls it, so an asyncio driver gets it as any
# packet) and resumes the session; connect() is lite.Publisher's blocking
# connect (stream, CONNECT, poll until the CONNACK). The module drops itself
# after the CONNACK, or when connect() fails.
# Nothing of lite: lite imports this module (an import circle otherwise), so
# the core hands recv() MQTTError, and a refusal's code goes back to input().
# Written for the heap a connect finds, the client's built (measured with
# lite's heap run): recv() comes first, its code the largest block, loaded
# first into the largest hole; no global `const` on a device (a smaller
# globals dict: the last block loading this module needs).

if __import__("sys").implementation.name != "micropython":
    from .time import const  # CPython's (MicroPython's compiler knows const)

# lite.py's state[...] indices and slot states
_N = const(0)
_QUOTA = const(1)
_KA = const(3)
_RX = const(4)
_TX = const(5)
_SMAX = const(6)
_MQOS = const(7)
_RET = const(8)
_PING = const(9)
_V = const(10)
_CLEAN = const(11)
_TMO = const(12)
_PORT = const(13)
_T = const(14)
_SP = const(15)  # the last CONNACK's session present
_STRIDE = const(16)
_ACK = const(1)
_REC = const(2)
_COMP = const(3)
_HOLD = const(4)
_F = const(18)
_AMAX = const(20)
_EARLY = const(22)
_AL = const(23)
_ALN = const(24)
_FRECV = const(1)
_SESSION_LOST = const(-3)  # lite.SESSION_LOST
_ORD = const(26)
_HELLO = const(27)
_SERVER = const(29)
_SSL = const(30)


def recv(self, n, MQTTError):
    """The first packet of a connection, for core.input(): first byte
    state[_T], n body bytes in data. Check it, take the server's limits,
    resume the session. A protocol error raises MQTTError (input() answers
    it); a refusal returns its reason code (input() closes and raises
    ServerError)."""
    a = self.state
    v = a[_V]
    h = a[_HELLO]
    e = MQTTError  # (lite's: this module imports nothing of lite)
    try:
        r = self.data
        t = a[_T]
        if t != 0x20:
            raise e(0x82)  # [MQTT-3.2.0-1]
        if n < 2 or v == 4 and n != 2 or r[0] & 0xFE:
            raise e(0x81)  # [MQTT-3.2.2-1]
        d = a[_ORD]
        q = len(d)  # the quota (3.1.1: no Receive Maximum)
        a[_SMAX] = 268435460
        a[_MQOS] = 2
        a[_RET] = 1
        a[_KA] = (h[13] << 8 | h[14]) * 1000  # our Keep Alive
        a[_AMAX] = 0  # no aliases unless the server allows them [MQTT-3.2.2-17]
        if v == 5:  # its property block: the limits that bind us (the core's walker)
            q = self.parse(n)
        if r[1]:
            return r[1]  # refused: CONNACK reason / return code [MQTT-4.13.2-1]
        p = r[0] & 1
        if p and a[_CLEAN]:
            raise e(0x82)  # session present after clean start [MQTT-3.2.2-4]
        a[_QUOTA] = q  # the connection is up
        a[_PING] = -1
        a[_RX] = a[_TX]
        # Resend the table in order [MQTT-4.4.0-1], a PUBLISH sent before
        # with DUP=1 [MQTT-3.3.1-1]. Without a session they go again as new
        # messages, and a QoS 2 flow past PUBREC ends as SESSION_LOST
        # [MQTT-3.2.2-5]. PUBLISHes beyond the server's quota wait [MQTT-4.9.0-2].
        b = self.buf
        t = a[_STRIDE]
        k = 0
        n = 0  # the quota the PUBREL flows hold: they count [U-4.9-a]
        while k < a[_N]:
            s = d[k] * t
            if b[s] == _COMP:
                if not p:
                    self.done(d[k], _SESSION_LOST)  # the flow ends, the slot is free
                    if k < a[_EARLY]:
                        a[_EARLY] -= 1
                    continue
                n += 1
            k += 1
        if a[_F] & _FRECV:
            self.recv(2, p)  # a new connection for the receiving side
        if a[_AL]:
            a[_AL].get(None)  # aliases are per connection [MQTT-3.3.2-7]
        k = 0
        while k < a[_N]:
            s = d[k] * t
            if k < a[_EARLY]:  # sent after our CONNECT: the server has it [MQTT-3.1.4-5]
                if b[s] != _COMP:
                    n += 1
            elif b[s] == _COMP:
                self.send(0x62, b[s + 4] << 8 | b[s + 5])  # PUBREL again
            else:
                o = s + b[s + 1]
                if not p:
                    b[o] &= 0xF7  # a new message again
                b[s] = _HOLD
                if a[_AL] and a[_AL].update(d[k]):
                    continue  # dropped (expired)
                if n < q:
                    o = s + b[s + 1]  # (update() made it plain: it may start elsewhere)
                    b[s] = _REC if b[o] & 4 else _ACK
                    try:
                        self.send(o, b[s + 2] << 8 | b[s + 3], 0, b)
                    finally:
                        b[o] |= 8
                    n += 1
            k += 1
        a[_SP] = p
    finally:
        import sys  # this module drops itself
        if sys.implementation.name == "micropython":  # (CPython: threads may import it)
            del sys.modules[__name__]
            delattr(sys.modules["frugalmqtt"], "lconn")


def start(self, sock, clean):
    """Start a connection on the open stream sock: send CONNECT. The session
    resumes when the CONNACK comes (core.input() calls recv())."""
    a = self.state
    h = a[_HELLO]
    if a[_V] == 4 and not clean and not h[15] | h[16]:
        from .why import why
        raise why("user", ())  # 3.1.1: a persistent session needs one [MQTT-3.1.3-7]
    self.sock = sock
    a[_EARLY] = 0
    h[12] = h[12] & 0xFD | (2 if clean else 0)
    a[_CLEAN] = clean
    self.send(h[0], len(h) - h[0], 0, h)


def open(self, ms):
    """The TCP (TLS) stream to the server, self.sock, Nagle's delay off: the
    connect and the handshake bounded by ms, then timeout_ms for each read
    and write."""
    import socket
    a = self.state
    r = socket.getaddrinfo(a[_SERVER], a[_PORT], 0, socket.SOCK_STREAM)[0]
    s = socket.socket(r[0], socket.SOCK_STREAM)
    try:
        s.settimeout(ms / 1000)
        s.connect(r[-1])
        try:  # every packet leaves in one write: Nagle must not hold it
            s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
        except OSError:
            pass  # a stack without TCP_NODELAY: it still works (tests/test_conn_tcp.py)
        r = s
        if a[_SSL]:
            s = a[_SSL].wrap_socket(s, server_hostname=a[_SERVER])
        # MicroPython's TLS socket has no settimeout: it reads and writes through r
        getattr(s, "settimeout", r.settimeout)(a[_TMO] / 1000)
    except BaseException:
        s.close()
        raise
    self.sock = s
    return s


def connect(self, clean, sock, timeout_ms, ticks_ms, ticks_diff):
    """Publisher.connect(): open the stream (unless sock is given), send
    CONNECT, poll until the CONNACK; returns session present."""
    a = self.state
    if clean is None:
        clean = a[_CLEAN]
    timeout_ms = timeout_ms or a[_TMO]
    t0 = ticks_ms()
    self.close()
    try:
        if sock is None:
            import select
            import sys
            sock = open(self, timeout_ms)
            r = self.poller = select.poll()
            r.register(sock, select.POLLIN)
            if sys.implementation.name != "micropython":
                from .time import Stream
                sock = self.poller = Stream(sock, r)
        start(self, sock, clean)
        while not a[_QUOTA]:  # poll() frames the CONNACK, core.input() hands it to recv()
            if not self.poll(max(0, timeout_ms - ticks_diff(ticks_ms(), t0))):
                raise OSError(110)  # ETIMEDOUT: no CONNACK
        return bool(a[_SP])
    except BaseException:
        self.close()
        raise
    finally:  # dropped by recv(), unless it never came
        import sys
        if sys.implementation.name == "micropython" and __name__ in sys.modules:
            del sys.modules[__name__]
            delattr(sys.modules["frugalmqtt"], "lconn")
