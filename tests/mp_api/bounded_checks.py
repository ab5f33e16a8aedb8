"""poll(t) / ensure_connected(t) return within t, also while a connect
attempt is under way: the attempt (TCP connect, TLS handshake, CONNECT,
CONNACK) runs without blocking and carries over from call to call, so calls
shorter than an attempt still connect; the attempt as a whole is bounded by
the client's timeout_ms, also against a host that does not answer (it
accepts TCP and says nothing, or never accepts); the socket then has the
client's timeout_ms again for its reads. The blocking client and the asyncio
client (one connect() within timeout_ms). Runs unchanged under CPython
(tests/test_bounded_connect.py) and the MicroPython unix port (mp_run.py).
Plain asserts only; no f-strings."""
from frugalmqtt.client import MQTTClient, ticks_ms, ticks_diff, sleep_ms

TIMEOUT_MS = 5000  # the client's: far above every bound tried here
ATTEMPT_MS = 1500  # the client's timeout_ms where an attempt is to run out


def _client(host, port, cid, version, ca=None, timeout_ms=TIMEOUT_MS):
    """ca: the CA's file, for TLS (a path: the unix port takes no long argv)."""
    return MQTTClient(cid, host, port, version=version, timeout_ms=timeout_ms,
                      backoff_ms=(50, 200), ssl={"cafile": ca} if ca else None)


def _took(fn, *a):
    t0 = ticks_ms()
    r = fn(*a)
    return r, ticks_diff(ticks_ms(), t0)


def _until_up(c, t, ms=10000, pause=0):
    """poll(t) until connected (the attempt carried from poll to poll);
    [polls, the longest poll in ms]. pause: ms slept between polls."""
    n = worst = 0
    t0 = ticks_ms()
    while not c.up:
        assert ticks_diff(ticks_ms(), t0) < ms, "not connected: %r" % (c.last_error,)
        r, took = _took(c.poll, t)
        assert r == 0 or c.up, r
        worst = max(worst, took)
        n += 1
        if pause and not c.up:
            sleep_ms(pause)
    return [n, worst]


def _wait_msgs(c, got, n, ms=8000):
    t0 = ticks_ms()
    while len(got) < n and ticks_diff(ticks_ms(), t0) < ms:
        c.poll(50)
    return got


def blocking(host, port, tag, version, dead, ca=None):
    """The full client (timeout_ms ATTEMPT_MS), connected once, then pointed
    at each port of dead (hosts that do not answer): each poll(300) and
    ensure_connected(400) returns within its time, while one attempt goes
    on across them until it has taken ATTEMPT_MS and fails (ETIMEDOUT).
    Pointed back at the broker, it reconnects in poll(100) calls: a QoS 1
    message to its own subscription goes and comes back. Returns, per dead
    port, the longest poll, the ensure_connected()'s time and the errno
    of last_error."""
    t = tag.encode() + b"/d"
    c = _client(host, port, tag + "-d", version, ca, ATTEMPT_MS)
    got = []
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.connect()
    c.subscribe(t, 1)
    out = {}
    for d in dead:
        c.close()  # (also drops an attempt under way)
        c.last_error = None
        c.state[13] = d  # lite state[_PORT]
        worst = 0
        t0 = ticks_ms()
        while ticks_diff(ticks_ms(), t0) < ATTEMPT_MS + 500:
            r, ms = _took(c.poll, 300)
            assert r == 0 and not c.up, r
            worst = max(worst, ms)
        ok, ms = _took(c.ensure_connected, 400)
        assert ok is False and not c.up
        e = c.last_error
        out[str(d)] = [worst, ms, e.args[0] if isinstance(e, OSError) else repr(e)]
    c.close()
    c.state[13] = port  # lite state[_PORT]
    _until_up(c, 100)
    c.publish(t, b"after", 1)
    _wait_msgs(c, got, 1)
    c.disconnect()
    out["got"] = [g.decode() for g in got]
    return out


def split_read(host, port, tag, version, ca=None):
    """Connected in poll(300) calls (the attempt non-blocking) to a server
    that sends a PUBLISH in two parts 1.2 s apart: it is read whole, so the
    socket has timeout_ms again after the attempt (with ca: under TLS)."""
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
            c.state[13] = d  # lite state[_PORT]
            t0 = ticks_ms()
            try:
                await c.connect()
                err = None
            except OSError as e:
                err = type(e).__name__
            out[str(d)] = [err, ticks_diff(ticks_ms(), t0)]
        c.state[13] = port  # lite state[_PORT]
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


def late(host, port, tag, version, t, ca=None, pause=0):
    """A server slow to answer (its handshake, its CONNACK: tests'
    LatePeer) that drops the first connection after its CONNACK: the
    client, polled with poll(t) (pause ms between polls), reconnects, each
    poll within t, then a QoS 1 message goes (acknowledged) and the
    server's echo comes back. Returns [polls, longest poll] for the
    reconnect, what came back, the acks and connects."""
    c = _client(host, port, tag + "-l", version, ca)
    got = []
    acked = []
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.on_done = lambda pid, reason: acked.append(reason)
    c.connect()
    t0 = ticks_ms()
    while c.up:  # until the server drops the link
        assert ticks_diff(ticks_ms(), t0) < 5000
        c.poll(t)
    out = {"reconnect": _until_up(c, t, 10000, pause)}
    c.publish(tag + "/l", b"after", 1)
    t0 = ticks_ms()
    while (not got or not acked) and ticks_diff(ticks_ms(), t0) < 5000:
        c.poll(t)
    out["got"] = [g.decode() for g in got]
    out["acked"] = acked
    out["connects"] = c.connects
    c.disconnect()
    return out


def resubscribed(host, port, tag, version, t, ca=None):
    """The broker (ca: over TLS): connected and subscribed, the link
    closed, then reconnected in poll(t) calls; the subscription is made
    again (no session) and a QoS 1 message to it comes back."""
    topic = tag.encode() + b"/r"
    c = _client(host, port, tag + "-r", version, ca)
    got = []
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.connect()
    c.subscribe(topic, 1)
    c.close()
    out = {"reconnect": _until_up(c, t)}
    c.publish(topic, b"after", 1)
    _wait_msgs(c, got, 1)
    out["got"] = [g.decode() for g in got]
    out["connects"] = c.connects
    c.disconnect()
    return out


def poll0(host, port, tag, version, ms):
    """poll(0) calls against a host that does not answer, for ms: each
    returns at once (the longest, in ms, returned) and the client stays
    down; the attempt runs out after the client's timeout_ms."""
    c = _client(host, port, tag + "-z", version, None, ATTEMPT_MS)
    worst = n = 0
    t0 = ticks_ms()
    while ticks_diff(ticks_ms(), t0) < ms:
        r, took = _took(c.poll, 0)
        assert r == 0 and not c.up
        worst = max(worst, took)
        n += 1
        sleep_ms(2)
    e = c.last_error
    c.close()
    return {"worst": worst, "polls": n, "error": e.args[0] if isinstance(e, OSError) else repr(e)}
