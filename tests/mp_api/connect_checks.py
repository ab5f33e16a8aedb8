"""How each profile connects: lite.Publisher, telem.Telemetry,
client.MQTTClient, aclient.AMQTTClient and the umqtt facade, with the same
arguments. Runs unchanged under CPython (tests/test_connect_options.py) and
the MicroPython unix port (mp_run.py). Plain asserts only; no f-strings."""
import sys

from frugalmqtt.client import Will

PROFILES = ("lite", "telemetry", "full", "asyncio", "simple")
MP = sys.implementation.name == "micropython"


class _Async:
    """The asyncio client behind the blocking calls these checks make: each
    call runs on one event loop of its own."""

    def __init__(self, *a, **kw):
        import asyncio
        from frugalmqtt.aclient import AMQTTClient
        self.loop = asyncio.new_event_loop()

        async def made():
            return AMQTTClient(*a, **kw)
        self.c = self._run(made())

    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    @property
    def sock(self):
        return self.c.sock

    def connect(self):
        return self._run(self.c.connect())

    def publish(self, topic, payload, qos=0):
        async def go():
            await self.c.publish(topic, payload, qos)
            await self.c.flush()
        self._run(go())

    def disconnect(self):
        self._run(self.c.disconnect())

    def close(self):
        async def go():
            self.c.close()
        self._run(go())


def make(profile, cid, host, port, version, will=None, ssl=None):
    """A client of `profile`, not connected yet; kw as every profile takes them."""
    kw = {"will": will, "ssl": ssl, "timeout_ms": 5000}
    if profile == "lite":
        from frugalmqtt.lite import Publisher
        return Publisher(cid, host, port, version, **kw)
    if profile == "telemetry":
        from frugalmqtt.telem import Telemetry
        return Telemetry(cid, host, port, version, **kw)
    if profile == "full":
        from frugalmqtt.client import MQTTClient
        return MQTTClient(cid, host, port, version, reconnect=False, **kw)
    if profile == "asyncio":
        return _Async(cid, host, port, version, reconnect=False, **kw)
    from frugalmqtt.simple import MQTTClient  # umqtt's way: ssl=True and ssl_params
    c = MQTTClient(cid, host, port, version=version, ssl=bool(ssl),
                   ssl_params=ssl if type(ssl) is dict else {})
    if will:
        c.set_last_will(will[0], will[1], will[3], will[2])
    return c


def publish_each(host, port, tag, version, ssl=None):
    """Each profile connects (to host: a name, an IPv4 or IPv6 literal) and
    publishes its name at QoS 1 on tag/<profile>."""
    done = []
    for p in PROFILES:
        c = make(p, tag + "-" + p, host, port, version, ssl=ssl)
        c.connect()
        c.publish((tag + "/" + p).encode(), p.encode(), qos=1)
        c.disconnect()
        done.append(p)
    return {"done": done}


def publish_each_v6_name(host, port, tag, version):
    """publish_each() to a name that resolves to IPv6 addresses only (an
    AAAA name): getaddrinfo() says so first."""
    import socket
    fams = [ai[0] for ai in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)]
    assert fams and [f for f in fams if f != socket.AF_INET6] == [], fams
    r = publish_each(host, port, tag, version)
    r["addresses"] = len(fams)
    return r


def wills(host, port, tag, version):
    """Each profile with a will given as a plain tuple and as client.Will():
    the link drops without DISCONNECT, the broker publishes the will."""
    for p in PROFILES:
        for kind in ("tuple", "Will"):
            t = (tag + "/" + p + "/" + kind).encode()
            w = (t, b"gone", 1, False) if kind == "tuple" else Will(t, b"gone", 1)
            c = make(p, tag + "-" + p + "-" + kind, host, port, version, will=w)
            c.connect()
            if p == "simple":
                c.sock.close()
            else:
                c.close()
    return {"ok": True}


def tls(host, port, tag, version, ca_pem, ca_der, other_pem):
    """ssl={"cadata": ...} on every profile: a PEM CA (converted to DER on
    MicroPython), a PEM bundle, a DER CA; a bundle without the broker's CA
    is refused; ssl=True without a CA names what to pass."""
    import ssl as ssl_mod
    pem = open(ca_pem, "rb").read()
    other = open(other_pem, "rb").read()
    der = open(ca_der, "rb").read()
    done = []
    for p in PROFILES:
        for ca in (pem, pem + other, der):
            c = make(p, tag + "-" + p, host, port, version, ssl={"cadata": ca})
            c.connect()
            c.publish((tag + "/" + p).encode(), b"%d" % len(ca), qos=1)
            c.disconnect()
        try:
            make(p, tag + "-bad", host, port, version, ssl={"cadata": other}).connect()
            refused = None
        except Exception as e:  # CPython ssl.SSLCertVerificationError, MicroPython ValueError
            refused = type(e).__name__
        assert refused, p
        try:
            make(p, tag + "-none", host, port, version, ssl=True)
            said = ""
        except ValueError as e:
            said = str(e)
        assert "cadata" in said and "cafile" in said, (p, said)
        done.append(p)
    # an explicit CERT_NONE encrypts without verifying (documented as unsafe)
    c = make("lite", tag + "-nv", host, port, version, ssl={"cert_reqs": ssl_mod.CERT_NONE})
    c.connect()
    c.disconnect()
    return {"done": done}


def publish_before_connect(host, port, tag, version):
    """reconnect=False: a publish at any QoS before connect() raises OSError
    and nothing is stored; after connect() it goes. The blocking client and
    the asyncio client."""
    from frugalmqtt.client import MQTTClient
    out = {}
    for p, c in (("full", MQTTClient(tag + "-b", host, port, version, reconnect=False)),
                 ("asyncio", _Async(tag + "-a", host, port, version, reconnect=False))):
        raised = []
        for q in (0, 1, 2):
            try:
                c.publish(tag + "/" + p, b"early", q)
            except OSError:
                raised.append(q)
        assert (c.c if p == "asyncio" else c).pending() == 0
        c.connect()
        c.publish(tag + "/" + p, b"late", 1)
        c.disconnect()
        try:
            c.publish(tag + "/" + p, b"after", 1)  # after disconnect(), the same
        except OSError:
            raised.append(-1)
        out[p] = raised
    return out
