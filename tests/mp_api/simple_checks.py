"""frugalmqtt.simple (the umqtt.simple facade) against a real broker, written
the way umqtt programs use it. Every function runs unchanged under CPython
(in-process, tests/test_simple_mosquitto.py) and the MicroPython unix port
(mp_run.py), asserts what it sees and returns facts for the host's paho
observer. Plain asserts only; no f-strings."""
import time

from frugalmqtt.simple import MQTTClient, MQTTException

try:
    from time import ticks_ms, ticks_diff, sleep_ms
except ImportError:  # CPython
    from frugalmqtt_host.ref.session import ticks_ms, ticks_diff

    def sleep_ms(ms):
        time.sleep(ms / 1000)


def _pump(c, cond, ms=8000):
    """check_msg() until cond() holds; False after ms."""
    t0 = ticks_ms()
    while not cond():
        if ticks_diff(ticks_ms(), t0) > ms:
            return False
        c.check_msg()
        sleep_ms(5)
    return True


def _raises(exc, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except exc as e:
        return e
    raise AssertionError("%r did not raise %r" % (fn, exc))


def _text(items):
    return [[x.decode() if isinstance(x, bytes) else x for x in i] for i in items]


# ---- publish and receive at QoS 0/1/2 -------------------------------------------

def pubsub(host, port, tag, version=4, n=4):
    got = []
    base = tag.encode()
    echo = base + b"/echo"

    def sub_cb(topic, msg):
        got.append((topic, msg))
        if topic == echo:
            # umqtt programs answer from the callback; QoS 1 waits for PUBACK
            c.publish(base + b"/reply", b"re:" + msg, qos=1)

    c = MQTTClient(tag + "-c", host, port, keepalive=30, version=version)
    c.set_callback(sub_cb)
    assert c.connect() == 0
    assert c.check_msg() is None  # nothing yet
    for q in (0, 1, 2):
        c.subscribe(base + b"/q%d" % q, q)
    c.subscribe(echo, 1)
    c.subscribe(tag + "/reply", qos=1)  # str topics work too
    c.publish(echo, "hello", qos=1)  # str message, as umqtt allows
    # QoS 1/2 publish() waits for the acks, meanwhile messages reach the callback
    for q in (1, 2, 0):
        for i in range(n):
            c.publish(base + b"/q%d" % q, b"%d-%d" % (q, i), qos=q)
    # ... QoS 0 does not wait: wait_msg() takes what is left
    kinds = []
    while len(got) < 3 * n + 2:
        kinds.append(c.wait_msg())
    # umqtt's: the packet's first byte, 0x30 | QoS << 1 for a PUBLISH (at
    # least the last QoS 0 one), maybe 0x62 PUBREL of a QoS 2 one completing
    assert 0x30 in kinds and all(k in (0x30, 0x32, 0x34, 0x62) for k in kinds), kinds
    for q in (0, 1, 2):
        assert [m for t, m in got if t == base + b"/q%d" % q] == \
            [b"%d-%d" % (q, i) for i in range(n)], got
    reply = (base + b"/reply", b"re:hello")
    assert (echo, b"hello") in got and reply in got, got
    assert got.index((echo, b"hello")) < got.index(reply)
    assert all(type(t) is bytes and type(m) is bytes for t, m in got)
    # ping(): the PINGRESP is what wait_msg() takes next; it returns None
    c.ping()
    assert c.wait_msg() is None
    retained = base + b"/retained"
    c.publish(retained, b"kept", retain=True, qos=1)
    c.disconnect()
    # A new client gets the retained message on subscribing
    got2 = []
    d = MQTTClient(tag + "-d", host, port, version=version)
    d.set_callback(lambda t, m: got2.append((t, m)))
    d.connect()
    d.subscribe(retained, 1)
    assert _pump(d, lambda: got2), got2
    assert got2 == [(retained, b"kept")]
    d.publish(retained, b"", retain=True)  # clear it
    d.disconnect()
    return {"got": _text(got), "kinds": kinds}


# ---- sessions ---------------------------------------------------------------------

def session(host, port, tag, version=4):
    got = []
    topic = (tag + "/s").encode()
    c = MQTTClient(tag + "-s", host, port, version=version)
    c.set_callback(lambda t, m: got.append((t, m)))
    c.connect()  # clean: no session from an earlier run
    c.disconnect()
    assert c.connect(clean_session=False) == 0
    c.subscribe(topic, 1)
    c.disconnect()
    p = MQTTClient(tag + "-p", host, port, version=version)
    p.connect()
    p.publish(topic, b"while-away", qos=1)
    p.publish(topic, b"while-away-2", qos=2)
    p.disconnect()
    assert c.connect(clean_session=False) == 1  # session present
    while len(got) < 2:
        c.wait_msg()
    assert got == [(topic, b"while-away"), (topic, b"while-away-2")], got
    c.disconnect()
    assert c.connect() == 0  # clean session: the old one is gone
    c.disconnect()
    return {"got": _text(got)}


# ---- last will ----------------------------------------------------------------------

def will(host, port, tag, version=4):
    got = []
    topic = (tag + "/will").encode()
    o = MQTTClient(tag + "-o", host, port, version=version)
    o.set_callback(lambda t, m: got.append((t, m)))
    o.connect()
    o.subscribe(topic, 1)
    w = MQTTClient(tag + "-w", host, port, keepalive=60, version=version)
    w.set_last_will(topic, b"w-gone", qos=1)
    w.connect()
    w.publish(topic, b"w-alive", qos=1)
    w.sock.close()  # drop without DISCONNECT, as a crashed device would
    assert _pump(o, lambda: len(got) == 2), got
    assert got == [(topic, b"w-alive"), (topic, b"w-gone")], got
    # The closed client raises OSError, as umqtt does on a dead socket
    _raises(OSError, w.publish, topic, b"x")
    o.disconnect()
    return {"got": _text(got)}


# ---- errors ---------------------------------------------------------------------------

def errors(host, port, tag, version=4):
    c = MQTTClient(tag + "-e", host, port, version=version)
    _raises(ValueError, c.set_last_will, b"t", b"m", qos=3)
    _raises(ValueError, c.set_last_will, b"", b"m")
    _raises(OSError, c.publish, b"t", b"m")  # not connected
    c.connect()
    _raises(ValueError, c.subscribe, b"t")  # no callback set (umqtt asserts)
    c.set_callback(lambda t, m: None)
    c.subscribe(b"t")
    # The server closes the link (a forbidden packet type 0 is malformed):
    # check_msg() raises OSError, like umqtt on a closed socket
    c.sock.send(b"\x00\x00")  # the socket itself, on both runtimes
    e = _raises((OSError, MQTTException), _pump, c, lambda: False)
    kind = type(e).__name__
    _raises(OSError, c.check_msg)
    _raises(OSError, c.publish, b"t", b"m")
    assert c.connect() == 0  # connect() again after an error, as umqtt programs do
    c.publish(b"t", b"again", qos=1)
    c.disconnect()
    return {"closed": kind}


def refused(host, port, tag, version=4):
    c = MQTTClient(tag + "-r", host, port, version=version)
    e = _raises(MQTTException, c.connect)
    return {"code": e.args[0]}


# ---- TLS, the older umqtt way: ssl=True with ssl_params ---------------------------------

def tls(host, port, tag, version, ca_der, other_der):
    import ssl
    with open(ca_der, "rb") as f:
        ca = f.read()
    with open(other_der, "rb") as f:
        other = f.read()
    got = []
    c = MQTTClient(tag + "-t", host, port, ssl=True, version=version,
                   ssl_params={"cert_reqs": ssl.CERT_REQUIRED, "cadata": ca})
    c.set_callback(lambda t, m: got.append((t, m)))
    assert c.connect() == 0
    topic = (tag + "/tls").encode()
    c.subscribe(topic, 2)
    for q in (0, 1, 2):
        c.publish(topic, b"tls%d" % q, qos=q)
    assert _pump(c, lambda: len(got) == 3), got
    assert sorted(got) == [(topic, b"tls0"), (topic, b"tls1"), (topic, b"tls2")], got
    c.disconnect()
    bad = MQTTClient(tag + "-bad", host, port, ssl=True, version=version,
                     ssl_params={"cert_reqs": ssl.CERT_REQUIRED, "cadata": other})
    try:
        bad.connect()
        refused = None
    except Exception as e:  # CPython ssl.SSLCertVerificationError, MicroPython ValueError
        refused = type(e).__name__
    assert refused
    return {"received": len(got), "refused": refused}


# ---- what umqtt.simple takes with its defaults ------------------------------------------

def umqtt_defaults(host, port, tag, version=4, lib="frugalmqtt.simple"):
    """Default-sized clients, umqtt.simple's API only, so the same function
    runs against micropython-lib's umqtt.simple (lib="umqtt.simple", on the
    unix port): messages bigger than the facade's buffers both ways, the
    return values, and c.sock in select.poll()."""
    import select
    import sys
    __import__(lib)
    Client = sys.modules[lib].MQTTClient
    kw = {} if lib == "umqtt.simple" else {"version": version}
    base = tag.encode()
    big = bytes(range(256)) * 19 + b"0123456789abcdef"  # 4880 bytes
    got = []
    p = Client(tag + "-p", host, port, **kw)
    assert p.connect() == 0
    # a QoS 1 message over a slot (and a retained one over the receive
    # buffer, below): written from this buffer, publish() waits for PUBACK
    assert p.publish(base + b"/big", big, retain=True, qos=1) is None
    s = Client(tag + "-s", host, port, **kw)
    s.set_callback(lambda t, m: got.append((t, m)))
    assert s.connect() == 0
    assert s.check_msg() is None
    assert s.subscribe(base + b"/big", 1) is None
    kinds = [s.wait_msg()]  # the retained message: 0x30 | QoS 1 << 1 | retain
    assert got == [(base + b"/big", big)], [(t, len(m)) for t, m in got]
    assert s.subscribe(base + b"/live", 1) is None
    assert p.publish(base + b"/live", b"q" * 300, qos=1) is None
    kinds.append(s.wait_msg())
    assert p.publish(base + b"/live", b"z" * 600) is None  # over the facade's tx_size
    kinds.append(s.wait_msg())
    assert got[1:] == [(base + b"/live", b"q" * 300), (base + b"/live", b"z" * 600)]
    # c.sock is the socket: an application polls it beside its other streams
    poller = select.poll()
    poller.register(s.sock, select.POLLIN)
    p.publish(base + b"/live", b"polled")
    assert poller.poll(5000), "no POLLIN for a message"
    kinds.append(s.check_msg())
    assert got[-1] == (base + b"/live", b"polled"), got[-1]
    s.ping()
    kinds.append(s.wait_msg())  # PINGRESP: None
    assert s.check_msg() is None
    p.publish(base + b"/big", b"", retain=True)  # clear it
    p.disconnect()
    s.disconnect()
    return {"kinds": kinds, "sizes": [len(m) for t, m in got]}


# ---- frugalmqtt.robust: reconnect after a broker restart and dropped links ----------------

def robust_restart(host, port, tag, version=4):
    """umqtt.robust usage: wait_msg() while the host stops the broker and
    starts it again (persistence on: the session and its subscriptions
    survive), then publish() and subscribe() on a dropped link; log() and
    DEBUG as umqtt.robust."""
    from frugalmqtt.robust import MQTTClient as Robust
    logged = []
    got = []

    class Client(Robust):
        DELAY = 0.2

        def log(self, in_reconnect, e):
            logged.append(in_reconnect)
            Robust.log(self, in_reconnect, e)

    base = tag.encode()
    c = Client(tag + "-r", host, port, keepalive=10, version=version)
    c.DEBUG = True
    c.set_callback(lambda t, m: got.append((t, m)))
    c.connect(False)
    c.subscribe(base + b"/in", 1)
    c.subscribe(base + b"/out", 1)
    c.publish(base + b"/out", b"ready", qos=1)
    while (base + b"/in", b"stop") not in got:
        c.wait_msg()  # the broker goes away meanwhile: reconnect() every DELAY
    restart = list(logged)
    # a dropped link: publish() and subscribe() reconnect and go on
    c.sock.close()
    assert c.publish(base + b"/out", b"after-drop", qos=1) is None
    c.sock.close()
    assert c.subscribe(base + b"/more", 1) is None
    c.publish(base + b"/more", b"more", qos=1)
    while (base + b"/more", b"more") not in got:
        c.wait_msg()
    c.sock.close()
    assert c.check_msg() is None  # reconnects, then nothing waiting
    c.disconnect()
    return {"restart": restart, "logged": logged, "got": _text(got)}


def last_message(host, link_port, broker_port, tag, version=4):
    """A QoS 1 message the client reads together with the end of its link
    (the host's link cuts right after forwarding it): the callback has it
    before wait_msg() raises OSError, and it is not lost when the program
    connects again, as umqtt.simple hands each message over as it reads it.
    It was acknowledged: with a clean session nobody sends it again."""
    base = tag.encode()
    got = []
    c = MQTTClient(tag + "-l", host, link_port, version=version)
    c.set_callback(lambda t, m: got.append((t, m)))
    c.connect()
    c.subscribe(base + b"/last", 1)
    p = MQTTClient(tag + "-p", host, broker_port, version=version)
    p.connect()
    p.publish(base + b"/last", b"last", qos=1)
    p.disconnect()
    time.sleep(0.5)  # the message and the link's end wait in the socket together
    try:
        c.wait_msg()
    except OSError:
        got.append(("OSError", ""))
    c.connect()  # as a umqtt program does after an OSError
    c.check_msg()
    c.disconnect()
    return {"got": _text(got)}


def big_messages(host, port, tag, version=4):
    """Messages over the facade's buffers at every QoS, both versions: out
    from the caller's buffer (QoS 2 through PUBREC/PUBREL/PUBCOMP), in
    through a buffer of their own (3.1.1; on 5.0 the receiver sizes its
    max_packet, which it advertises)."""
    base = tag.encode()
    got = []
    kw = {"max_packet": 4096} if version == 5 else {}
    s = MQTTClient(tag + "-s", host, port, version=version, **kw)
    s.set_callback(lambda t, m: got.append((t, m)))
    s.connect()
    s.subscribe(base + b"/big", 2)
    p = MQTTClient(tag + "-p", host, port, version=version)
    p.connect()
    for t in (b"a/#", b"", b"a\xc0\xaf"):  # a wildcard, empty, an overlong UTF-8 sequence
        _raises(ValueError, p.publish, t, b"x" * 1500, qos=1)
    sent = []
    for q in (0, 1, 2):
        m = bytes([0x41 + q]) * (1500 + q)
        assert p.publish(base + b"/big", m, qos=q) is None
        sent.append((base + b"/big", m))
    assert p.publish(tag + "/big", "small", qos=2) is None  # the table again, after those
    sent.append((base + b"/big", b"small"))
    assert _pump(s, lambda: len(got) == 4), [(t, len(m)) for t, m in got]
    assert got == sent, [(t, len(m)) for t, m in got]
    p.disconnect()
    s.disconnect()
    return {"sizes": [len(m) for t, m in got]}
