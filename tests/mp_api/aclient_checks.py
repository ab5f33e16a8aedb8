"""frugalmqtt.aclient.AMQTTClient against a real broker. Every function runs
unchanged under CPython (called in-process by tests/test_aclient_mosquitto.py)
and under the MicroPython unix port (via mp_run.py); each asserts what it can
see itself and returns facts for the host to compare with its independent
paho-mqtt observer. Plain asserts only; no f-strings."""
import sys
import gc
import asyncio

from frugalmqtt.aclient import AMQTTClient
from frugalmqtt.err import ServerError

MP = sys.implementation.name == "micropython"


def _ms(ms):
    return asyncio.sleep_ms(ms) if MP else asyncio.sleep(ms / 1000)


def _client(host, port, cid, version, **kw):
    kw.setdefault("timeout_ms", 5000)
    kw.setdefault("backoff_ms", (50, 500))
    return AMQTTClient(cid, host, port, version, **kw)


async def _until(cond, ms=8000):
    """Wait until cond() holds (checked every 10 ms); False after ms."""
    waited = 0
    while not cond():
        if waited >= ms:
            return False
        await _ms(10)
        waited += 10
    return True


def _recorder(c, out):
    def on_message(m):
        out.append((bytes(m.topic), bytes(m.payload), m.qos, bool(m.retain)))
    c.on_message = on_message


def _payloads(got, topic):
    t = topic.encode()
    return [(g[1], g[2]) for g in got if g[0] == t]


def _break(c):
    """Make the server drop the connection, keeping the session: packet type 0
    is reserved, forbidden on the wire (mosquitto closes the link; a second
    CONNECT [MQTT-3.1.0-2] would also make it discard the session)."""
    c.sock.write(b"\x00\x00", 0, 2)


def _text(items):
    return [[x.decode() if isinstance(x, bytes) else x for x in i] for i in items]


# ---- publish and receive at QoS 0/1/2 ---------------------------------------------

def pubsub(host, port, tag, version, n=5):
    return asyncio.run(_pubsub(host, port, tag, version, n))


async def _pubsub(host, port, tag, version, n):
    got = []
    # a: publishes through a window of only 2 slots (publish() waits for one)
    # and receives with on_message; b: receives through messages().
    a = _client(host, port, tag + "-a", version, slots=2)
    _recorder(a, got)
    b = _client(host, port, tag + "-b", version)
    assert await a.connect() is False
    assert await b.connect() is False
    codes = [await a.subscribe(tag + "/ps/#", 2), await a.subscribe(tag + "/ctl", 1),
             await b.subscribe(tag + "/it/#", 1)]
    assert codes == [2, 1, 1], codes
    it_got = []
    it = b.messages()

    async def consume():
        async for m in it:
            it_got.append((m.topic, m.payload, m.retain))
            if m.payload == b"it-end":
                return

    task = asyncio.create_task(consume())
    pids = []
    most_pending = 0
    for q in (0, 1, 2):
        for i in range(n):
            pids.append(await a.publish(tag + "/ps/q%d" % q, b"%d-%d" % (q, i), q))
            most_pending = max(most_pending, a.pending())
            await a.publish(tag + "/it/q%d" % q, b"it%d-%d" % (q, i), q)
            most_pending = max(most_pending, a.pending())
    await a.publish(tag + "/it/end", b"it-end", 2)
    await a.flush()
    assert a.pending() == 0
    assert most_pending <= 2, most_pending
    assert pids[:n] == [0] * n
    assert all(p > 0 for p in pids[n:]), pids
    assert await _until(lambda: len(got) == 3 * n), got
    await asyncio.wait_for(task, 8)
    for q in (0, 1, 2):
        want = [(b"%d-%d" % (q, i), q) for i in range(n)]
        assert _payloads(got, tag + "/ps/q%d" % q) == want, (q, got)
        it_want = [((tag + "/it/q%d" % q).encode(), b"it%d-%d" % (q, i), False)
                   for i in range(n)]
        assert [m for m in it_got if m[0] == it_want[0][0]] == it_want, (q, it_got)
    # After UNSUBACK nothing more arrives on the filter: "after" would come
    # before "marker" (same publisher, same QoS, one subscriber).
    unsub = await a.unsubscribe(tag + "/ps/#")
    assert unsub == 0
    await a.publish(tag + "/ps/after", b"after", 1)
    await a.publish(tag + "/ctl", b"marker", 1)
    assert await _until(lambda: len(got) == 3 * n + 1), got
    assert got[-1] == ((tag + "/ctl").encode(), b"marker", 1, False), got[-1]
    await a.disconnect()
    await b.disconnect()
    assert not a.connected and not b.connected
    try:
        await a.publish(tag + "/ps/late", b"late", 0)
        late = "published"
    except OSError:
        late = "OSError"
    assert late == "OSError"
    return {"codes": codes, "unsub": unsub, "received": len(got), "iterated": len(it_got)}


# ---- last will ----------------------------------------------------------------------

def will(host, port, tag, version):
    return asyncio.run(_will(host, port, tag, version))


async def _will(host, port, tag, version):
    got = []
    o = _client(host, port, tag + "-o", version)
    _recorder(o, got)
    await o.connect()
    assert await o.subscribe(tag + "/will", 1) == 1
    w = _client(host, port, tag + "-w", version, will=(tag + "/will", b"w-gone", 1, False))
    await w.connect()
    await w.publish(tag + "/will", b"w-alive", 1)
    await w.flush()
    w.close()  # drop without DISCONNECT: the server publishes the will
    assert await _until(lambda: len(got) == 2), got
    assert got == [((tag + "/will").encode(), b"w-alive", 1, False),
                   ((tag + "/will").encode(), b"w-gone", 1, False)], got
    assert not w.connected and w.connects == 1  # close() does not reconnect
    await o.disconnect()
    return {"got": _text(got)}


# ---- reconnect and session resume ------------------------------------------------

def resume(host, port, tag, version):
    return asyncio.run(_resume(host, port, tag, version))


async def _resume(host, port, tag, version):
    got = []
    sp = []
    a = _client(host, port, tag + "-a", version, clean=False, backoff_ms=(500, 1000))
    _recorder(a, got)
    a.on_connect = lambda present: sp.append(bool(present))
    p = _client(host, port, tag + "-p", version)
    await a.connect()
    await p.connect()
    assert await a.subscribe(tag + "/rs", 1) == 1
    await p.publish(tag + "/rs", b"before", 1)
    assert await _until(lambda: len(got) == 1), got
    # The server drops the connection; a SUBSCRIBE sent after the violation
    # is never answered and fails with the connection.
    _break(a)
    try:
        await a.subscribe(tag + "/late", 1)
        sub = "answered"
    except OSError:
        sub = "OSError"
    assert sub == "OSError"
    assert not a.connected
    # While a is away (backoff 500 ms): the server queues for its session;
    # a's own QoS 1/2 messages wait in its session.
    await p.publish(tag + "/rs", b"while-down", 1)
    await p.flush()
    pid1 = await a.publish(tag + "/out", b"a-q1", 1)
    pid2 = await a.publish(tag + "/out", b"a-q2", 2)
    assert pid1 and pid2 and a.pending() == 2
    assert not a.connected
    assert await _until(lambda: a.connects == 2), a.last_error
    assert sp == [False, True], sp
    await a.flush()
    assert await _until(lambda: len(got) == 2), got
    assert got[1] == ((tag + "/rs").encode(), b"while-down", 1, False), got
    # The subscription survived (no resubscribe); the lost SUBSCRIBE's packet
    # id was freed, so subscribing works again.
    code = await asyncio.wait_for(a.subscribe(tag + "/late", 1), 5)
    assert code == 1
    await p.publish(tag + "/rs", b"after", 1)
    await p.publish(tag + "/late", b"late", 1)
    assert await _until(lambda: len(got) == 4), got
    assert sorted(g[1] for g in got[2:]) == [b"after", b"late"], got
    await a.disconnect()
    await p.disconnect()
    return {"sp": sp, "connects": a.connects, "got": _text(got)}


# ---- reconnect without a session: subscriptions made again --------------------------------

def resubscribe(host, port, tag, version):
    return asyncio.run(_resubscribe(host, port, tag, version))


async def _resubscribe(host, port, tag, version):
    """A clean-start client loses its link; the server has no session for
    it after the reconnect, so the client subscribes again by itself: the
    retained message comes to the new subscription (retain flag set)."""
    got = []
    sp = []
    a = _client(host, port, tag + "-a", version)
    _recorder(a, got)
    a.on_connect = lambda present: sp.append(bool(present))
    p = _client(host, port, tag + "-p", version)
    await a.connect()
    await p.connect()
    assert await a.subscribe(tag + "/rt", 1) == 1
    await p.publish(tag + "/rt", b"kept", 1, True)
    await p.flush()
    assert await _until(lambda: len(got) == 1), got
    _break(a)
    assert await _until(lambda: len(got) == 2), (got, a.last_error)
    await p.publish(tag + "/rt", b"", 1, True)  # clear the retained message
    await p.flush()
    await a.disconnect()
    await p.disconnect()
    return {"sp": sp, "connects": a.connects, "got": _text(got)}


# ---- refused connection -------------------------------------------------------------

def refused(host, port, tag, version):
    return asyncio.run(_refused(host, port, tag, version))


async def _refused(host, port, tag, version):
    c = _client(host, port, tag + "-r", version)
    try:
        await c.connect()
        code = 0
    except ServerError as e:
        code = e.args[0]
    assert not c.connected
    await _ms(700)  # no reconnect attempts after a failed first connect
    assert c.sock is None and c.connects == 0
    return {"code": code}


# ---- idle and keep-alive --------------------------------------------------------------

def idle(host, port, tag, version):
    return asyncio.run(_idle(host, port, tag, version))


async def _idle(host, port, tag, version):
    got = []
    c = _client(host, port, tag + "-idle", version, keepalive=60)
    _recorder(c, got)
    await c.connect()
    await c.subscribe(tag + "/idle", 1)
    await c.publish(tag + "/idle", b"x", 1)
    assert await _until(lambda: got)
    await c.flush()
    await _ms(100)
    delta = None
    if MP:  # idle: the reader sleeps in poll(), the pinger until its deadline
        gc.collect()
        before = gc.mem_alloc()
        await asyncio.sleep_ms(1500)
        delta = gc.mem_alloc() - before
        assert delta == 0, delta
    # Keep-alive 1 s on a quiet link: the pinger sends PINGREQ, the link stays up.
    k = _client(host, port, tag + "-ka", version, keepalive=1)
    await k.connect()
    await _ms(2600)
    assert k.connected and k.connects == 1 and k.last_error is None
    await k.disconnect()
    await c.disconnect()
    return {"idle_alloc": delta}


# ---- the broker restarts ----------------------------------------------------------------

def restart(host, port, tag, version):
    return asyncio.run(_restart(host, port, tag, version))


async def _restart(host, port, tag, version):
    """The host restarts mosquitto (persistence on) after seeing "ready":
    reconnect attempts are refused until it is back, then the session
    resumes."""
    got = []
    sp = []
    a = _client(host, port, tag + "-a", version, clean=False, backoff_ms=(50, 400))
    _recorder(a, got)
    a.on_connect = lambda present: sp.append(bool(present))
    await a.connect()
    assert await a.subscribe(tag + "/in", 1) == 1
    await a.publish(tag + "/out", b"ready", 1)
    await a.flush()
    assert await _until(lambda: not a.connected, 20000), "the broker never went away"
    pid = await a.publish(tag + "/in", b"offline", 1)  # stored; sent after the reconnect
    assert pid and not a.connected
    assert await _until(lambda: a.connects == 2, 20000), a.last_error
    await a.flush()
    await a.publish(tag + "/in", b"back", 1)
    # both come back through the subscription the server kept
    assert await _until(lambda: len(got) == 2), got
    t = (tag + "/in").encode()
    assert got == [(t, b"offline", 1, False), (t, b"back", 1, False)], got
    await a.disconnect()
    return {"sp": sp, "connects": a.connects}


# ---- TLS --------------------------------------------------------------------------------

def _ctx(der_path):
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.verify_mode = ssl.CERT_REQUIRED
    with open(der_path, "rb") as f:
        ctx.load_verify_locations(cadata=f.read())
    return ctx


def tls(host, port, tag, version, ca_der, other_der):
    return asyncio.run(_tls(host, port, tag, version, ca_der, other_der))


async def _tls(host, port, tag, version, ca_der, other_der):
    """Over TLS (the server's certificate checked against our CA): QoS 0/1/2
    both ways; a server certificate from another CA is refused."""
    got = []
    c = _client(host, port, tag + "-t", version, ssl=_ctx(ca_der))
    _recorder(c, got)
    assert await c.connect() is False
    assert await c.subscribe(tag + "/tls", 2) == 2
    n = 12
    for i in range(n):
        await c.publish(tag + "/tls", b"t%d" % i, i % 3)
    await c.flush()
    assert await _until(lambda: len(got) == n), got
    for q in (0, 1, 2):  # in order per QoS (QoS 2 reaches us later, after PUBREL)
        assert [g[1] for g in got if g[2] == q] == [b"t%d" % i for i in range(q, n, 3)], got
    await c.disconnect()
    bad = _client(host, port, tag + "-bad", version, ssl=_ctx(other_der))
    try:
        await bad.connect()
        refused = None
    except Exception as e:  # CPython ssl.SSLCertVerificationError, MicroPython ValueError
        refused = type(e).__name__
    assert refused and not bad.connected and bad.sock is None
    return {"received": len(got), "refused": refused}


# ---- framing a packet split across TCP segments (a scripted broker) ------------------

def framing(host, port, tag, version):
    return asyncio.run(_framing(host, port, tag, version))


async def _framing(host, port, tag, version):
    """The scripted broker sends a PUBLISH in pieces with pauses between
    them, then a fixed header announcing a packet larger than max_packet.
    The loop keeps running while the pieces come (a ticker task counts),
    the message arrives whole, the oversized one ends the connection."""
    got = []
    c = _client(host, port, tag + "-f", version, reconnect=False, max_packet=300)
    _recorder(c, got)
    ticks = [0]

    async def ticker():
        while True:
            await _ms(10)
            ticks[0] += 1

    t = asyncio.create_task(ticker())
    await c.connect()
    assert await _until(lambda: got or not c.connected), "no message"
    during = ticks[0]
    assert await _until(lambda: not c.connected), "the oversized packet was taken"
    t.cancel()
    e = c.last_error
    return {"got": _text(got), "ticks": during, "error": type(e).__name__,
            "reason": getattr(e, "reason", None)}


# ---- what receiving allocates (MicroPython) ----------------------------------------------

def dispatch_alloc(host, port, tag, version, n=200, spaced=20):
    return asyncio.run(_dispatch_alloc(host, port, tag, version, n, spaced))


async def _dispatch_alloc(host, port, tag, version, n, spaced):
    """on_message notes gc.mem_alloc() and the reader's waits for
    readability so far at each message (into lists made before): the
    difference between two messages is what was allocated between them.
    First n QoS 1 messages queued for a persistent session arrive after the
    reconnect in bursts: between messages handled at one wake-up, framing,
    dispatch and PUBACK allocate nothing. Then, after "ready", the host
    sends `spaced` QoS 0 messages with pauses, each a wake-up of its own:
    what one wait allocates. The waits are counted by wrapping the
    module's _readable (the same wait, and on MicroPython the same
    allocation: one generator)."""
    import frugalmqtt.aclient as A
    waits = [0]
    wait = A._readable
    if MP:
        def counted(link):
            waits[0] += 1
            yield A._core._io_queue.queue_read(link.sock)
    else:
        async def counted(link):
            waits[0] += 1
            await wait(link)
    A._readable = counted
    try:
        return await _receive_bursts(host, port, tag, version, n, spaced, waits)
    finally:
        A._readable = wait


async def _receive_bursts(host, port, tag, version, n, spaced, waits):
    c = _client(host, port, tag + "-s", version, clean=False)
    await c.connect()
    assert await c.subscribe(tag + "/al", 1) == 1
    await c.disconnect()
    p = _client(host, port, tag + "-p", version, slots=16)
    await p.connect()
    for i in range(n):
        await p.publish(tag + "/al", b"m%04d" % i, 1)
    await p.flush()
    await p.disconnect()
    seen = [0] * (n + spaced)
    woke = [0] * (n + spaced)
    count = [0]
    mem = gc.mem_alloc if MP else (lambda: 0)

    def on_message(m):
        i = count[0]
        if i < n + spaced:
            seen[i] = mem()
            woke[i] = waits[0]
        count[0] = i + 1

    c.on_message = on_message
    await c.connect()
    assert await _until(lambda: count[0] >= n), count
    await c.publish(tag + "/ready", b"ready", 1)
    assert await _until(lambda: count[0] >= n + spaced), count
    await c.disconnect()
    # [bytes allocated, waits] between message i and i + 1
    d = [[seen[i + 1] - seen[i], woke[i + 1] - woke[i]] for i in range(n + spaced - 1)]
    return {"count": count[0], "burst": d[:n - 1], "spaced": d[n:]}


# ---- the application's API: async with, events, awaited publish, Message ---------------

def api(host, port, tag, version):
    return asyncio.run(_api(host, port, tag, version))


async def _api(host, port, tag, version):
    """`async with` connects and disconnects; up_event/down_event and
    isconnected() follow the connection (a task waiting on up_event before
    the connect resumes); publish(wait=True) returns the final reason code;
    messages() yields Message copies that stay valid while more arrive;
    on_disconnect hears the application's own disconnect (0)."""
    t = tag + "/api"
    c = _client(host, port, tag + "-api", version)
    seen = []
    c.on_connect = lambda present: seen.append(("connect", bool(present)))
    c.on_disconnect = lambda reason, props: seen.append(("disconnect", reason, props))
    assert c.down_event.is_set() and not c.up_event.is_set() and not c.isconnected()

    async def waiter():
        await c.up_event.wait()
        seen.append(("up", c.isconnected()))

    w = asyncio.create_task(waiter())
    await _ms(10)
    assert seen == []
    msgs = []
    async with c as entered:
        assert entered is c and c.isconnected()
        assert c.up_event.is_set() and not c.down_event.is_set()
        await asyncio.wait_for(w, 2)
        assert seen == [("connect", False), ("up", True)], seen
        it = c.messages(8)  # room for all: the reader holds while it is full
        # a retained message comes with the subscription, retain set
        assert await c.publish(t, b"kept", 1, True, wait=True) == (0x10 if version == 5 else 0)
        assert await c.subscribe(t, 2) == 2
        props = None
        if version == 5:
            from frugalmqtt import props as P
            props = P.build([(P.CONTENT_TYPE, "text/plain"), (P.USER_PROPERTY, ("k", "v"))])
        codes = [await c.publish(t, b"q0", 0, wait=True),
                 await c.publish(t, b"q1", 1, True, props, wait=True),
                 await c.publish(t, b"q2", 2, wait=True),
                 await c.publish(tag + "/nobody", b"n", 1, wait=True)]
        async for m in it:
            msgs.append(m)
            if len(msgs) == 4:
                break
        assert c.pending() == 0
        await c.publish(t, b"", 1, True, wait=True)  # clear the retained message
    assert not c.isconnected() and c.down_event.is_set() and not c.up_event.is_set()
    assert seen[2:] == [("disconnect", 0, None)], seen
    out = []
    for m in msgs:  # kept after the client went on: copies
        p = m.props
        out.append([m.topic.decode(), m.payload.decode(), m.qos, m.retain, m.dup,
                    p.get_str(0x03) if p else None,
                    [list(u) for u in p.user_properties()] if p else None])
    await _ms(10)
    return {"codes": codes, "msgs": out}


def events(host, port, tag, version):
    return asyncio.run(_events(host, port, tag, version))


async def _events(host, port, tag, version):
    """A connection lost (the server closes it): down_event, on_disconnect
    (5.0: the server's reason, 3.1.1: 0x80, the network), then the reconnect: up_event, the subscription
    made again, a message on it. The application's disconnect() and
    connect() again: the subscription made again there too. Another client
    taking the client id over (reconnect=False): the link closes (0x80), no
    reconnect."""
    got = []
    downs = []
    t = tag + "/ev"
    c = _client(host, port, tag + "-e", version)
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.on_disconnect = lambda reason, props: downs.append([reason, props is None])
    p = _client(host, port, tag + "-p", version)
    await c.connect()
    await p.connect()
    assert await c.subscribe(t, 1) == 1
    c.up_event.clear()  # mqtt_as style: wait for the next connect
    _break(c)
    await asyncio.wait_for(c.down_event.wait(), 5)
    assert not c.isconnected()
    await asyncio.wait_for(c.up_event.wait(), 5)
    assert c.isconnected() and c.connects == 2 and not c.down_event.is_set()
    await p.publish(t, b"after-reconnect", 1)
    assert await _until(lambda: got == [b"after-reconnect"]), got
    await c.disconnect()
    assert await c.connect() is False
    await p.publish(t, b"after-connect", 1)
    assert await _until(lambda: len(got) == 2), got
    assert got[1] == b"after-connect"
    await c.disconnect()
    # take-over: the same client id connects again elsewhere
    a = _client(host, port, tag + "-t", version, reconnect=False)
    a.on_disconnect = lambda reason, props: downs.append([reason, props is None])
    await a.connect()
    b = _client(host, port, tag + "-t", version, reconnect=False)
    await b.connect()
    await asyncio.wait_for(a.down_event.wait(), 5)
    await _ms(20)  # on_disconnect runs in a task of its own
    assert not a.isconnected() and b.isconnected()
    await b.disconnect()
    await p.disconnect()
    return {"downs": downs, "connects": c.connects}


# ---- the server's DISCONNECT with properties (a scripted broker) -------------------------

def server_disconnect(host, port, tag, version):
    return asyncio.run(_server_disconnect(host, port, tag, version))


async def _server_disconnect(host, port, tag, version):
    """The server ends the connection with DISCONNECT, a reason and
    properties: on_disconnect gets both (props readable during the call)."""
    seen = []

    def on_disconnect(reason, props):
        seen.append([reason, props.get_str(0x1F), [list(u) for u in props.user_properties()]])

    c = _client(host, port, tag + "-d", version, reconnect=False)
    c.on_disconnect = on_disconnect
    await c.connect()
    await asyncio.wait_for(c.down_event.wait(), 5)
    assert await _until(lambda: seen), c.last_error
    return {"seen": seen, "error": type(c.last_error).__name__}
