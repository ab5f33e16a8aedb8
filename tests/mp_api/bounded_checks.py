"""A connect attempt made inside poll(t) / ensure_connected(t) is cut to the
time left of t, also against a host that does not answer (it accepts TCP and
says nothing, or never accepts); the socket then has the client's timeout_ms
again for its reads. The blocking client (its attempt bound) and the asyncio
client (one connect() within timeout_ms). Runs unchanged under CPython
(tests/test_bounded_connect.py) and the MicroPython unix port (mp_run.py).
Plain asserts only; no f-strings."""
from frugalmqtt.client import MQTTClient, ticks_ms, ticks_diff

TIMEOUT_MS = 5000  # the client's: far above every bound tried here


def _client(host, port, cid, version, ca=None):
    """ca: the CA's file, for TLS (a path: the unix port takes no long argv)."""
    return MQTTClient(cid, host, port, version=version, timeout_ms=TIMEOUT_MS,
                      backoff_ms=(50, 200), ssl={"cafile": ca} if ca else None)


def _took(fn, *a):
    t0 = ticks_ms()
    r = fn(*a)
    return r, ticks_diff(ticks_ms(), t0)


def _until_up(c, t, ms=10000):
    """poll(t) until connected (each attempt cut to t); the number of polls."""
    n = 0
    t0 = ticks_ms()
    while not c.up:
        assert ticks_diff(ticks_ms(), t0) < ms, "not connected: %r" % (c.last_error,)
        c.poll(t)
        n += 1
    return n


def _wait_msgs(c, got, n, ms=8000):
    t0 = ticks_ms()
    while len(got) < n and ticks_diff(ticks_ms(), t0) < ms:
        c.poll(50)
    return got


def blocking(host, port, tag, version, dead, ca=None):
    """The full client, connected once, then pointed at each port of dead
    (hosts that do not answer): poll(300) and ensure_connected(400) return
    within their time. Pointed back at the broker, it reconnects inside
    poll(100), so with a 100 ms attempt: a QoS 1 message to its own
    subscription goes and comes back. Returns the longest each call took."""
    t = tag.encode() + b"/d"
    c = _client(host, port, tag + "-d", version, ca)
    got = []
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.connect()
    c.subscribe(t, 1)
    c.close()
    out = {}
    for d in dead:
        c.port = d
        worst = 0
        for _ in range(3):
            r, ms = _took(c.poll, 300)
            assert r == 0 and not c.up, r
            worst = max(worst, ms)
        ok, ms = _took(c.ensure_connected, 400)
        assert ok is False and c.last_error is not None
        out[str(d)] = [worst, ms]
    c.port = port
    _until_up(c, 100)
    c.publish(t, b"after", 1)
    _wait_msgs(c, got, 1)
    c.disconnect()
    out["got"] = [g.decode() for g in got]
    return out


def split_read(host, port, tag, version, ca=None):
    """Connected inside poll(300) (a 300 ms attempt) to a server that sends
    a PUBLISH in two parts 800 ms apart: it is read whole, so the socket
    has timeout_ms again after the attempt (with ca: under TLS)."""
    c = _client(host, port, tag + "-s", version, ca)
    got = []
    c.on_message = lambda m: got.append(bytes(m.payload))
    _until_up(c, 300)
    _wait_msgs(c, got, 1, 5000)
    up = c.up
    c.close()
    return {"got": [g.decode() for g in got], "connects": c.connects, "up": up,
            "error": repr(c.last_error) if c.last_error else None}


def asyncio_connect(host, port, tag, version, dead, ms):
    """The asyncio client (timeout_ms=ms): connect() to each port of dead
    raises OSError within ms; then to the broker, a QoS 1 message to its own
    subscription goes and comes back."""
    import asyncio
    from frugalmqtt.aclient import AMQTTClient
    t = tag.encode() + b"/a"
    out = {}

    async def main():
        c = AMQTTClient(tag + "-a", host, port, version, timeout_ms=ms, reconnect=False)
        for d in dead:
            c.port = d
            t0 = ticks_ms()
            try:
                await c.connect()
                err = None
            except OSError as e:
                err = type(e).__name__
            out[str(d)] = [err, ticks_diff(ticks_ms(), t0)]
        c.port = port
        await c.connect()
        msgs = c.messages()
        await c.subscribe(t, 1)
        await c.publish(t, b"after", 1)
        async for m in msgs:
            out["got"] = [m.payload.decode()]
            break
        await c.disconnect()

    asyncio.new_event_loop().run_until_complete(main())
    return out


def slow_connack(host, port, tag, version):
    """A server whose CONNACK comes 300 ms after the CONNECT and which drops
    the first connection on the first PUBLISH: flush(5000) reconnects and
    the message is acknowledged (the waiting calls poll with all their time
    left, so a reconnect inside them is not cut to a short slice)."""
    c = _client(host, port, tag + "-f", version)
    c.connect()
    c.publish(tag + "/f", b"once", 1)
    flushed, ms = _took(c.flush, 5000)
    out = {"flushed": flushed, "connects": c.connects, "left": c.n}
    c.disconnect()
    return out
