# One wake of a battery device: connect, publish this wake's readings,
# disconnect, exit (the process ending is the deep sleep; the next run is the
# next wake). For host_sim/wake.py (`make compare`'s deep-sleep table, the
# wake fault sweep and tests), on the unix port and CPython:
#   wake.py LIB HOST PORT CID STORE PAYLOADS QOS [DEADLINE_MS [RESET_AT [VERSION]]]
# LIB: "frugalmqtt" (wake.Wake, its state in STORE: a file standing in for
# RTC memory), "umqtt.simple" or "mqtt_as", each used as its documentation
# shows. PAYLOADS: comma-separated, one message each on topic wake/CID, at
# QOS or, written PAYLOAD:Q, at QoS Q.
# RESET_AT n > 0 (frugalmqtt; -1 counts the steps): the device resets (exits at once, no
# DISCONNECT) before its nth step, a step being a write of the store, a
# write to the socket or a packet read from it.
# Prints "@@ stored P Q" once message P is kept (frugalmqtt: in the store),
# "@@ ended PID REASON" per acknowledged flow, "@@ steps N", "@@ pending N".
import sys

try:
    from time import ticks_ms, ticks_diff
except ImportError:  # CPython
    from frugalmqtt.time import ticks_ms, ticks_diff


def say(line):
    print("@@ " + line)
    try:
        sys.stdout.flush()
    except AttributeError:
        pass


def frugal(host, port, cid, store, payloads, deadline, reset_at, version):
    from frugalmqtt.lite import core
    from frugalmqtt.wake import Wake, Store, _Burst
    steps = [0]

    def step():
        steps[0] += 1
        if steps[0] == reset_at:
            say("reset %d" % reset_at)
            sys.exit(3)

    def hook(cls, name):
        f = getattr(cls, name)

        def g(*a):
            step()
            return f(*a)
        setattr(cls, name, g)

    if reset_at:  # -1: count the steps, never reset
        # (the core's send(), and input(): each packet the driver framed)
        for cls, name in ((Store, "flush"), (_Burst, "send"), (core, "send"), (core, "input")):
            hook(cls, name)
    w = Wake(cid, host, port, version, store=Store(2048, store), slots=4, max_packet=128)
    for p, q in payloads:
        core.publish(w, "wake/" + cid, p, q)
        say("stored %s %d" % (p, q))
    for pid, reason in w.cycle((), deadline):
        say("ended %d %d" % (pid, reason))
    say("steps %d" % steps[0])
    say("pending %d" % w.pending())


def umqtt(host, port, cid, payloads):
    from umqtt.simple import MQTTClient
    c = MQTTClient(cid, host, port)
    c.connect()
    for p, q in payloads:
        say("stored %s %d" % (p, q))
        c.publish(b"wake/" + cid.encode(), p.encode(), qos=q)
    c.disconnect()


def mqtt_as(host, port, cid, payloads):
    import asyncio
    from mqtt_async import MQTTClient, config
    config.server = host
    config.port = port
    config.client_id = cid
    config.ssid = "lab"  # joins the unix port's `network` stand-in
    config.wifi_pw = "x"
    c = MQTTClient(config)
    # the unix port's getaddrinfo() gives a raw sockaddr where a board's gives
    # the (ip, port) tuple mqtt_async unpacks (as bench/mp/mqttlibs.py)
    c._addr = (host, port)
    c._dns_lookup = lambda: None

    async def main():
        await c.connect()
        for p, q in payloads:
            say("stored %s %d" % (p, q))
            await c.publish("wake/" + cid, p, qos=q)
        await c.disconnect()
    asyncio.run(main())


def main(a):
    lib, host, port, cid, store, payloads, qos = a[:7]
    port = int(port)
    payloads = [(p.split(":")[0], int(p.split(":")[1]) if ":" in p else int(qos))
                for p in payloads.split(",") if p]
    deadline = int(a[7]) if len(a) > 7 else 5000
    reset_at = int(a[8]) if len(a) > 8 else 0
    version = int(a[9]) if len(a) > 9 else 4
    t0 = ticks_ms()
    if lib == "frugalmqtt":
        frugal(host, port, cid, store, payloads, deadline, reset_at, version)
    elif lib == "umqtt.simple":
        umqtt(host, port, cid, payloads)
    else:
        mqtt_as(host, port, cid, payloads)
    say("wall_ms %d" % ticks_diff(ticks_ms(), t0))


main(sys.argv[1:])
