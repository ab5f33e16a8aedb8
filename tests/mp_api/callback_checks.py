"""An exception raised in an application callback, in the blocking client
(frugalmqtt.client) and the asyncio client (frugalmqtt.aclient), against a
real broker. Each function runs unchanged under CPython and the MicroPython
unix port (a subprocess either way: tests/test_callback_errors.py reads what
it printed, the tracebacks) and returns facts for the host to check.
Plain asserts only; no f-strings."""
import sys
import asyncio

from frugalmqtt.client import MQTTClient
from frugalmqtt.aclient import AMQTTClient

MP = sys.implementation.name == "micropython"


def _ms(ms):
    return asyncio.sleep_ms(ms) if MP else asyncio.sleep(ms / 1000)


def _raiser(kind, text):
    def cb(*a):
        raise kind(text)
    return cb


# ---- the blocking client ----------------------------------------------------------------

def _poll_until_raises(c, ms=5000):
    """poll() until it raises; the exception (None if none came)."""
    waited = 0
    while waited < ms:
        try:
            c.poll(50)
        except Exception as e:
            return e
        waited += 50
    return None


def blocking(host, port, tag, version):
    """Default: an exception from on_message or on_done comes out of poll()
    (also an OSError, not taken for a broken link), after the message was
    acknowledged; the connection stays up. callback_errors="log": printed,
    dispatch goes on."""
    got = []
    c = MQTTClient(tag + "-b", host, port, version, timeout_ms=5000)
    c.connect()
    t = tag + "/b"
    assert c.subscribe(t, 1) == 1

    def on_message(m):
        p = bytes(m.payload)
        got.append(p)
        if p == b"bad":
            raise ValueError("boom-msg")
        if p == b"oserr":
            raise OSError(5)
    c.on_message = on_message
    c.publish(t, b"bad", 1)
    e = _poll_until_raises(c)
    assert type(e) is ValueError and e.args[0] == "boom-msg", repr(e)
    assert c.up and c.connects == 1
    c.publish(t, b"oserr", 1)
    e = _poll_until_raises(c)
    assert type(e) is OSError and e.args[0] == 5, repr(e)
    assert c.up and c.connects == 1  # not taken for a link error: no reconnect
    # on_done: raised once the flow is freed (nothing left pending)
    assert c.flush(5000)  # the earlier PUBACKs
    c.on_done = _raiser(RuntimeError, "boom-done")
    c.on_message = lambda m: got.append(bytes(m.payload))
    c.publish(t, b"q1", 1)
    e = _poll_until_raises(c)
    assert type(e) is RuntimeError and e.args[0] == "boom-done", repr(e)
    assert c.pending() == 0 and c.up
    c.on_done = None
    # log: printed, and the next messages still come
    c.callback_errors = "log"
    c.on_message = on_message
    c.publish(t, b"bad", 1)
    c.publish(t, b"good", 1)
    waited = 0
    while got[-1:] != [b"good"] and waited < 5000:
        c.poll(50)  # never raises now
        waited += 50
    c.disconnect()
    assert got == [b"bad", b"oserr", b"q1", b"bad", b"good"], got
    return {"got": len(got)}


# ---- the asyncio client -----------------------------------------------------------------

def async_raise(host, port, tag, version):
    return asyncio.run(_async_raise(host, port, tag, version))


async def _async_raise(host, port, tag, version):
    """Default: on_message raises. The message is acknowledged, then the
    client stops as a failed program would: the link closes without
    DISCONNECT (the server publishes the will), nothing reconnects, the
    exception leaves the client's task, every wait of the application
    raises it (publish, messages(), the end of `async with`), and
    on_disconnect hears 0x80. An exception in on_connect comes out of
    connect()."""
    w_got = []
    w = AMQTTClient(tag + "-w", host, port, version, timeout_ms=5000)
    w.on_message = lambda m: w_got.append(bytes(m.payload))
    await w.connect()
    assert await w.subscribe(tag + "/will", 1) == 1
    t = tag + "/a"
    c = AMQTTClient(tag + "-a", host, port, version, timeout_ms=5000, backoff_ms=(50, 100),
                    will=(tag + "/will", b"gone", 1, False))
    c.on_message = _raiser(ValueError, "boom-msg")
    downs = []
    c.on_disconnect = lambda reason, props: downs.append(reason)
    caught = []
    try:
        async with c:
            assert await c.subscribe(t, 1) == 1
            await c.publish(t, b"x", 1)
            await asyncio.wait_for(c.down_event.wait(), 5)
            assert not c.isconnected() and not c.up_event.is_set()
            try:
                await c.publish(t, b"y", 1)
            except ValueError as e:
                caught.append(e)
            try:
                async for m in c.messages():
                    pass
            except ValueError as e:
                caught.append(e)
            await _ms(300)  # no reconnect attempt
            assert c.connects == 1 and not c.isconnected()
    except ValueError as e:
        caught.append(e)
    assert len(caught) == 3 and caught[0] is caught[1] is caught[2], caught
    assert caught[0].args[0] == "boom-msg"
    assert downs == [0x80], downs
    for _ in range(100):
        if w_got:
            break
        await _ms(20)
    assert w_got == [b"gone"], w_got
    # on_connect raising: out of connect(), the client stopped
    k = AMQTTClient(tag + "-k", host, port, version, timeout_ms=5000)
    k.on_connect = _raiser(KeyError, "boom-connect")
    try:
        await k.connect()
        out = None
    except KeyError as e:
        out = e.args[0]
    assert out == "boom-connect" and not k.isconnected()
    await w.disconnect()
    return {"caught": len(caught)}


def async_log(host, port, tag, version):
    return asyncio.run(_async_log(host, port, tag, version))


async def _async_log(host, port, tag, version):
    """callback_errors="log": on_connect, on_message, on_done and
    on_disconnect each raise; each traceback is printed and the client goes
    on (the next message arrives, publish(wait=True) returns)."""
    got = []
    c = AMQTTClient(tag + "-l", host, port, version, timeout_ms=5000)
    c.callback_errors = "log"
    c.on_connect = _raiser(IndexError, "boom-connect")
    c.on_done = _raiser(RuntimeError, "boom-done")
    c.on_disconnect = _raiser(TypeError, "boom-disconnect")

    def on_message(m):
        got.append(bytes(m.payload))
        if len(got) == 1:
            raise ValueError("boom-msg")
    c.on_message = on_message
    t = tag + "/l"
    async with c:
        assert c.isconnected()
        assert await c.subscribe(t, 1) == 1
        assert await c.publish(t, b"1", 1, wait=True) < 0x80
        assert await c.publish(t, b"2", 1, wait=True) < 0x80
        for _ in range(100):
            if len(got) == 2:
                break
            await _ms(20)
        assert c.isconnected()
    assert got == [b"1", b"2"], got
    assert not c.isconnected() and c.down_event.is_set()
    return {"got": len(got)}


# ---- the publish-only profiles: lite.Publisher, telem.Telemetry ----------------------------

def publishers(host, port, tag, version):
    """on_done raising, in lite and telemetry. callback_errors "raise" (the
    default): it comes out of poll(), the flow ended and the link up. "log":
    printed with its traceback, flush() goes on to the end."""
    from frugalmqtt.lite import Publisher
    from frugalmqtt.telem import Telemetry
    out = {}
    for name, cls in (("lite", Publisher), ("telemetry", Telemetry)):
        c = cls(tag + "-" + name, host, port, version)
        t = (tag + "/" + name).encode()
        c.on_done = _raiser(ValueError, "boom-raised")
        c.connect()
        default = c.callback_errors
        c.publish(t, b"r", 1)
        e = _poll_until_raises(c)
        raised = [type(e).__name__, str(e), c.pending(), c.sock is not None]
        c.callback_errors = "log"
        c.on_done = _raiser(ValueError, "boom-logged")
        c.publish(t, b"l1", 1)
        c.publish(t, b"l2", 2)
        flushed = c.flush(5000)
        c.disconnect()
        out[name] = {"default": default, "raised": raised, "flushed": flushed, "left": c.pending()}
    return out
