# Heap bytes allocated per operation by the client, MicroPython unix port.
#   micropython -m alloc HOST PORT VERSION CASE N
# CASE: pub0 pub1 pub2 (publish; for QoS 1/2 also the acknowledgements
# handled), recv0 recv1 recv2 (received PUBLISH dispatched to on_message,
# with the acks it takes), idle (connected, blocking poll(1000) loop; N = ms).
# Counted with gc.mem_alloc() deltas while the collector is disabled, over N
# operations; then the same operation is run again under
# micropython.heap_lock(), where any allocation raises MemoryError.
# On 5.0 each publish carries a user property and, from the second publish
# of the topic on, a topic alias (the broker allows aliases).
# CASE lpub0 lpub1 lpub2: the same publish cases with the publish-only
# profile, lite.Publisher (its MQTT 5 properties: the same user property).
# CASE tpub0 tpub1 tpub2: the same with the telemetry profile, telem.Telemetry
# with an outbox (mqttlibs.telemetry).
# CASE calib checks the instrument: bytearray(100) per operation must show.
import gc
import micropython
from time import ticks_ms, ticks_diff

from bcommon import (HOST, PORT, ARGS, TOPIC, PAYLOAD, PROPS5, SLOTS, SLOT_SIZE, out, fail,
                     client, Counter, inbound_busy, LIB)


class Bench:
    def __init__(self, c, q, props, w):
        self.c = c
        self.q = q
        self.props = props
        self.w = w  # operations per round
        self.ok = True  # a wait timed out when False
        self.b = None  # receiver (recv cases)
        self.rx = None
        self.target = 0
        self.ms = 0

    def pub_round(self):
        c = self.c
        q = self.q
        p = self.props
        k = 0
        while k < self.w:
            c.publish(TOPIC, PAYLOAD, q, False, p)
            k += 1

    def lib_round(self):
        # Another library (`make compare`): its own publish(topic, msg,
        # retain, qos) called from here, no adapter frame in between
        pub = self.c.sync_publish
        q = self.q
        k = 0
        while k < self.w:
            pub(TOPIC, PAYLOAD, False, q)
            k += 1

    def async_round(self):
        # An asyncio library: the round runs as one coroutine on the loop
        self.c.publish_many(TOPIC, PAYLOAD, self.q, None, self.w)

    def round(self):
        """This library's publish round."""
        if LIB == "frugalmqtt":
            return self.pub_round
        return self.lib_round if self.c.sync_publish else self.async_round

    def ack_round(self):
        # Handle the acknowledgements of one round (PUBACK; PUBREC + PUBCOMP)
        if not self.c.flush(10000):
            self.ok = False

    def send_round(self):  # the sender's part of a recv round: not measured
        self.pub_round()
        if self.q:
            self.ack_round()
        self.target += self.w

    def recv_round(self):
        b = self.b
        t0 = ticks_ms()
        while self.rx.n < self.target or inbound_busy(b):
            if ticks_diff(ticks_ms(), t0) > 10000:
                self.ok = False
                return
            b.poll(100)

    def calib(self):  # the instrument's self-check: allocates on purpose
        k = 0
        while k < self.w:
            self.c = bytearray(100)
            k += 1

    def idle(self):
        c = self.c
        t0 = ticks_ms()
        while ticks_diff(ticks_ms(), t0) < self.ms:
            c.poll(1000)


def measure(fn, rounds):
    """Bytes allocated by `rounds` calls of fn, with the collector off."""
    gc.collect()
    gc.disable()
    total = 0
    r = 0
    while r < rounds:
        a = gc.mem_alloc()
        fn()
        total += gc.mem_alloc() - a
        r += 1
    gc.enable()
    return total


def measure_pair(first, second, rounds):
    """Like measure() for two alternating steps, counted separately."""
    gc.collect()
    gc.disable()
    t1 = t2 = 0
    r = 0
    while r < rounds:
        a = gc.mem_alloc()
        first()
        b = gc.mem_alloc()
        second()
        t2 += gc.mem_alloc() - b
        t1 += b - a
        r += 1
    gc.enable()
    return t1, t2


def locked(fn):
    """1 if fn() runs with the heap locked (allocates nothing), else 0."""
    gc.collect()
    micropython.heap_lock()
    try:
        fn()
        ok = 1
    except MemoryError:
        ok = 0
    finally:
        micropython.heap_unlock()
    return ok


def main():
    v = int(ARGS[0])
    case = ARGS[1]
    n = int(ARGS[2])
    props = PROPS5 if v == 5 else None
    if case == "calib":
        b = Bench(None, 0, None, 10)
        out("alloc", case, measure(b.calib, n // 10), n)
        out("lock", case, locked(b.calib))
        return
    if case == "idle":
        c = client("b-idle", v)
        b = Bench(c, 0, None, 0)
        b.ms = n
        total = measure(b.idle, 1)
        out("alloc", case, total, n)
        b.ms = 1000
        out("lock", case, locked(b.idle))
        c.disconnect()
        return
    q = int(case[-1])
    if case[1:4] == "pub" or case.startswith("pub"):
        if case[0] == "t":  # the telemetry profile: Telemetry with an outbox
            from mqttlibs import telemetry
            from frugalmqtt.liteprops import props as lprops
            c = telemetry("b-tpub", HOST, PORT, v)
            props = lprops(user=(("k", "v"),)) if v == 5 else None
            out("alias_max", c.state[20])  # lite's state[_AMAX]
        elif case[0] == "l":
            from frugalmqtt.lite import Publisher
            from frugalmqtt.liteprops import props as lprops
            c = Publisher("b-lpub", HOST, PORT, v, timeout_ms=5000, slots=SLOTS,
                          max_packet=SLOT_SIZE)
            c.connect()
            props = lprops(user=(("k", "v"),)) if v == 5 else None
            out("alias_max", 0)
        else:
            c = client("b-pub", v)
            out("alias_max", c.amax)
        w = SLOTS if q else 100
        b = Bench(c, q, props, w)
        pub_round = b.round()
        rounds = n // w
        # warm up: the first publish of the topic assigns its alias
        pub_round()
        b.ack_round()
        if q == 0:
            out("alloc", case, measure(pub_round, rounds), rounds * w)
        else:
            tp, ta = measure_pair(pub_round, b.ack_round, rounds)
            out("alloc", case, tp, rounds * w)
            out("alloc", case.replace("pub", "ack"), ta, rounds * w)
        out("lock", case, locked(pub_round))
        if q:
            lock_ack = locked(b.ack_round)
            out("lock", case.replace("pub", "ack"), lock_ack)
        b.ack_round()
        if not b.ok:
            fail("acknowledgements did not arrive")
        c.disconnect()
        return
    if case.startswith("recv"):
        rcv = client("b-rcv", v)
        rx = Counter()
        rcv.on_message = rx.cb
        code = rcv.subscribe(TOPIC, q)
        if code != q:
            fail("SUBACK %d" % code)
        snd = client("b-snd", v)
        b = Bench(snd, q, props, SLOTS)
        b.b = rcv
        b.rx = rx
        rounds = n // SLOTS
        b.send_round()  # warm up
        b.recv_round()
        gc.collect()
        gc.disable()
        total = 0
        r = 0
        while r < rounds:
            b.send_round()
            a = gc.mem_alloc()
            b.recv_round()
            total += gc.mem_alloc() - a
            r += 1
        gc.enable()
        out("alloc", case, total, rounds * SLOTS)
        b.send_round()
        ok = locked(b.recv_round)  # a MemoryError in on_message leaves poll()
        out("lock", case, ok)
        if ok:  # (a MemoryError may have cut a round short)
            if not b.ok:
                fail("messages did not arrive")
            if rx.n != b.target:
                fail("received %d of %d" % (rx.n, b.target))
            rcv.disconnect()
        snd.disconnect()
        return
    fail("unknown case " + case)


main()
