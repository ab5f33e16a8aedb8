# Publish throughput, MicroPython unix port, 32-byte payload.
#   micropython -m speed HOST PORT VERSION CASE MS [SLOTS]
# CASE raw: the ceiling. A plain blocking socket writes one pre-encoded QoS 0
#   PUBLISH per sock.write() (the same bytes the client sends: on 5.0 the
#   topic alias after the first one), no client code in the loop.
# CASE q0/q1/q2: MQTTClient.publish() in a loop at that QoS; QoS 1/2 run with
#   an in-flight window of SLOTS messages (publish() waits for acks when the
#   window is full).
# Messages are sent in batches of 1000 until MS milliseconds have passed; the
# clock stops when the broker has everything: after QoS 0 (raw or client) a
# QoS 1 PUBLISH is sent and its PUBACK awaited (TCP keeps order, so the broker
# has read every earlier message), after QoS 1/2 when flush() returns.
# CASE l0/l1/l2: the same with the publish-only profile, lite.Publisher
#   (SLOTS slots, each holding one encoded PUBLISH for a resend).
# CASE lat: latency, not throughput: a QoS 0 publish immediately followed by
#   a QoS 1 publish, timed until its PUBACK; MS rounds 20 ms apart ("@@ lat
#   MEDIAN_US MAX_US"). Without TCP_NODELAY, Nagle holds the second packet
#   until the broker's (delayed) ACK of the first.
import socket
from time import ticks_us, ticks_diff, sleep_ms

from bcommon import HOST, PORT, ARGS, TOPIC, PAYLOAD, BATCH, out, fail, client, flush, publish_n
from frugalmqtt.control import encode_connect, decode
from frugalmqtt.publish import Packet
from frugalmqtt.codec import Framer, CONNACK, PUBACK
from frugalmqtt import props as _p
from frugalmqtt_host.codec import encode_publish, read_from

_BATCH = 1000


def raw(v, ms):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(socket.getaddrinfo(HOST, PORT, 0, socket.SOCK_STREAM)[0][-1])
    s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY, as the client's Transport
    buf = bytearray(256)
    n = encode_connect(buf, 0, v, "b-raw", 60, True, None)
    s.write(buf, 0, n)
    f = Framer(256)
    pkt = Packet()
    s.setblocking(True)
    while not read_from(f, s):
        pass
    if decode(pkt, f.first, f.buf, 0, f.rl, v) != CONNACK or pkt.reason:
        fail("raw: no CONNACK")
    alias = 0
    if v >= 5 and pkt.props.get_int(_p.TOPIC_ALIAS_MAXIMUM, 0) >= 1:
        alias = 1
        n = encode_publish(buf, 0, v, TOPIC, PAYLOAD, 0, 0, False, False, None, alias)
        s.write(buf, 0, n)  # sets the alias
        n = encode_publish(buf, 0, v, b"", PAYLOAD, 0, 0, False, False, None, alias)
    else:
        n = encode_publish(buf, 0, v, TOPIC, PAYLOAD, 0, 0, False, False, None)
    msg = bytes(buf[:n])
    n = encode_publish(buf, 0, v, TOPIC, PAYLOAD, 1, 1, False, False, None)
    last = bytes(buf[:n])
    w = s.write
    count = 0
    t0 = ticks_us()
    while ticks_diff(ticks_us(), t0) < ms * 1000:
        i = 0
        while i < _BATCH:
            w(msg)
            i += 1
        count += _BATCH
    w(last)
    while True:
        while not read_from(f, s):
            pass
        if decode(pkt, f.first, f.buf, 0, f.rl, v) == PUBACK and pkt.pid == 1:
            break
    dt = ticks_diff(ticks_us(), t0)
    out("packet_bytes", len(msg))
    out("rate", "raw", count, dt)
    s.close()


def run(v, q, ms, slots):
    c = client("b-speed", v, slots=slots)
    out("receive_max", c.s.server_receive_max)
    out("window", min(slots, c.s.server_receive_max))
    out("alias_max", c.s.a_out_max)
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


def run_lite(v, q, ms, slots):
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
    out("rate", "l%d" % q, count, dt)
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
    elif case[0] == "l":
        run_lite(v, int(case[-1]), ms, slots)
    else:
        run(v, int(case[-1]), ms, slots)


main()
