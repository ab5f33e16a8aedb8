# Publish throughput, MicroPython unix port, 32-byte payload.
#   micropython -m speed HOST PORT VERSION CASE MS [SLOTS]
# CASE raw: the ceiling. The connected client's socket writes one pre-encoded
#   QoS 0 PUBLISH per sock.write() (the bytes the client sends, captured: on
#   5.0 the topic alias after the first one), no client code in the loop.
# CASE q0/q1/q2: MQTTClient.publish() in a loop at that QoS; QoS 1/2 run with
#   an in-flight window of SLOTS messages (publish() waits for acks when the
#   window is full).
# Messages are sent in batches of 1000 until MS milliseconds have passed; the
# clock stops when the broker has everything: after QoS 0 (raw or client) a
# QoS 1 PUBLISH is sent and its PUBACK awaited (TCP keeps order, so the broker
# has read every earlier message), after QoS 1/2 when flush() returns.
# CASE l0/l1/l2: the same with the publish-only profile, lite.Publisher
#   (SLOTS slots, each holding one encoded PUBLISH for a resend).
# CASE t0/t1/t2: the same with the telemetry profile, telem.Telemetry with an
#   outbox (mqttlibs.telemetry: 8 slots, an 8 KB file).
# CASE lat: latency, not throughput: a QoS 0 publish immediately followed by
#   a QoS 1 publish, timed until its PUBACK; MS rounds 20 ms apart ("@@ lat
#   MEDIAN_US MAX_US"). Without TCP_NODELAY, Nagle holds the second packet
#   until the broker's (delayed) ACK of the first.
from time import ticks_us, ticks_diff, sleep_ms

from bcommon import HOST, PORT, ARGS, TOPIC, PAYLOAD, BATCH, out, fail, client, flush, publish_n

_BATCH = 1000


class _Capture:
    """A stream that keeps what the client writes instead of sending it."""

    def write(self, b, o, n):
        self.got = bytes(b[o:o + n])
        return n


def _encoded(c, topic, q):
    """The bytes c sends for one PUBLISH of PAYLOAD to topic (not sent)."""
    sock = c.sock
    c.sock = cap = _Capture()
    c.publish(topic, PAYLOAD, q)
    c.sock = sock
    return cap.got


def raw(v, ms):
    c = client("b-raw", v)  # connects; the loop below writes to its socket
    if c.amax:
        c.publish(TOPIC, PAYLOAD, 0)  # sets the alias: the loop sends what the client would
    msg = _encoded(c, TOPIC, 0)
    s = c.sock
    w = s.write
    count = 0
    t0 = ticks_us()
    while ticks_diff(ticks_us(), t0) < ms * 1000:
        i = 0
        while i < _BATCH:
            w(msg)
            i += 1
        count += _BATCH
    c.publish(TOPIC, PAYLOAD, 1)  # its PUBACK: the broker has read everything before it
    flush(c)
    dt = ticks_diff(ticks_us(), t0)
    out("packet_bytes", len(msg))
    out("rate", "raw", count, dt)
    c.disconnect()


def run(v, q, ms, slots):
    c = client("b-speed", v, slots=slots)
    out("receive_max", c.quota)
    out("window", min(slots, c.quota))
    out("alias_max", c.amax)
    count = 0
    t0 = ticks_us()
    while ticks_diff(ticks_us(), t0) < ms * 1000:
        publish_n(c, TOPIC, PAYLOAD, q, None, BATCH)
        count += BATCH
    if q == 0:
        c.publish(TOPIC, PAYLOAD, 1)
    flush(c)
    dt = ticks_diff(ticks_us(), t0)
    out("rate", "q%d" % q, count, dt)
    c.disconnect()


def run_lite(v, q, ms, slots, telem):
    if telem:  # the telemetry profile (sized as lite, 8 slots): Telemetry with an outbox
        from mqttlibs import telemetry
        c = telemetry("b-telem", HOST, PORT, v)
    else:
        from frugalmqtt.lite import Publisher
        c = Publisher("b-lite", HOST, PORT, v, keepalive=60, timeout_ms=5000, slots=slots,
                      max_packet=128)
        c.connect()
    out("receive_max", c.quota)
    out("window", c.quota)
    pub = c.publish
    count = 0
    t0 = ticks_us()
    while ticks_diff(ticks_us(), t0) < ms * 1000:
        i = 0
        while i < _BATCH:
            pub(TOPIC, PAYLOAD, q)
            i += 1
        count += _BATCH
    if q == 0:
        pub(TOPIC, PAYLOAD, 1)
    if not c.flush(10000):
        fail("no acknowledgement within 10 s")
    dt = ticks_diff(ticks_us(), t0)
    out("rate", "%s%d" % ("t" if telem else "l", q), count, dt)
    c.disconnect()


def lat(v, rounds):
    c = client("b-lat", v)
    ts = []
    i = 0
    while i < rounds:
        sleep_ms(20)
        t0 = ticks_us()
        c.publish(TOPIC, PAYLOAD, 0)
        c.publish(TOPIC, PAYLOAD, 1)
        flush(c)
        ts.append(ticks_diff(ticks_us(), t0))
        i += 1
    ts.sort()
    out("lat", ts[len(ts) // 2], ts[-1])
    c.disconnect()


def main():
    v = int(ARGS[0])
    case = ARGS[1]
    ms = int(ARGS[2])
    slots = int(ARGS[3]) if len(ARGS) > 3 else 8
    if case == "raw":
        raw(v, ms)
    elif case == "lat":
        lat(v, ms)
    elif case[0] in "lt":
        run_lite(v, int(case[-1]), ms, slots, case[0] == "t")
    else:
        run(v, int(case[-1]), ms, slots)


main()
