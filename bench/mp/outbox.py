# Outbox measurements on the MicroPython unix port (run by bench/outbox_bench.py):
#   micropython -m outbox HOST PORT CASE DIR
# CASE mem: heap of `import frugalmqtt.outbox` after the client, and of one
#   Outbox (16 KB file) attached to a default-sized session.Session (the
#   client's engine).
# CASE telem: heap of importing the telemetry profile (telem.Telemetry, the
#   outbox, liteprops) in a fresh process.
# CASE fill QOS: offline, publish 48-byte PUBLISHes into a fresh 16 KB outbox
#   until OUTBOX_FULL: how many fit, microseconds per publish(); then the time
#   to reopen and reload the full file.
# CASE speed N OB: N QoS 1 publishes to the broker and flush, with (OB 1) or
#   without (0) an outbox, client.MQTTClient; OB 2: telem.Telemetry with an
#   outbox; messages per second.
import gc
import sys
import time

host, port, case, d = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
SIZE = 16384
TOPIC = b"sensors/dev1/temp"  # with a 24-byte payload: a 48-byte PUBLISH (5.0)
PAY = b"x" * 24


def path(name):
    p = d + "/" + name
    try:
        import os
        os.remove(p)
    except OSError:
        pass
    return p


if case == "mem":
    from frugalmqtt.client import MQTTClient  # noqa: F401  (the baseline)
    from frugalmqtt.session import Session
    gc.collect()
    a = gc.mem_alloc()
    from frugalmqtt.outbox import Outbox
    gc.collect()
    b = gc.mem_alloc()
    s = Session("m", 5)
    gc.collect()
    c = gc.mem_alloc()
    ob = Outbox(path("mem.bin"), SIZE)
    ob.attach(s)
    gc.collect()
    print("@@ import", b - a)
    print("@@ instance", gc.mem_alloc() - c)
elif case == "telem":
    gc.collect()
    a = gc.mem_alloc()
    from frugalmqtt.telem import Telemetry  # noqa: F401
    from frugalmqtt.outbox import Outbox  # noqa: F401
    from frugalmqtt.liteprops import props  # noqa: F401
    gc.collect()
    print("@@ telem", gc.mem_alloc() - a)
elif case == "fill":
    from frugalmqtt.outbox import Outbox, OUTBOX_FULL
    from frugalmqtt.session import Session
    qos = int(sys.argv[5])
    p = path("fill.bin")
    s = Session("f", 5)
    ob = Outbox(p, SIZE)
    ob.attach(s)
    n = 0
    t0 = time.ticks_us()
    while s.publish(TOPIC, PAY, qos) != OUTBOX_FULL:
        n += 1
    dt = time.ticks_diff(time.ticks_us(), t0)
    ob.close()
    t1 = time.ticks_us()
    s2 = Session("f", 5)
    ob = Outbox(p, SIZE)
    ob.attach(s2)
    reload_us = time.ticks_diff(time.ticks_us(), t1)
    print("@@ fill", qos, n, dt // (n + 1), reload_us, s2.pending() + ob.backlog)
elif case == "speed":
    from frugalmqtt.client import MQTTClient
    from frugalmqtt.outbox import Outbox
    n = int(sys.argv[5])
    ob = Outbox(path("speed.bin"), SIZE) if sys.argv[6] != "0" else None
    if sys.argv[6] == "2":
        from frugalmqtt.telem import Telemetry
        c = Telemetry("bench-ob2", host, port, slots=8, max_packet=256, outbox=ob)
    else:
        c = MQTTClient("bench-ob%s" % sys.argv[6], host, port, outbox=ob)
    c.connect()
    t0 = time.ticks_ms()
    for i in range(n):
        c.publish(TOPIC, PAY, 1)
        c.poll(0)
    c.flush()
    dt = time.ticks_diff(time.ticks_ms(), t0)
    c.disconnect()
    print("@@ speed", sys.argv[6], n, n * 1000 // max(dt, 1))
else:
    print("@@ error unknown case", case)
