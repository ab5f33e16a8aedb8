# A device with an outbox, for tests/test_outbox_mosquitto.py and
# tests/outbox_reboot.py. Plain MicroPython (also runs on CPython):
#   MICROPYPATH=firmware micropython tests/mp_client/outbox_device.py MODE PARAMS
# PARAMS: JSON, or a file of it (name ending in .json)
# Prints "@@ ..." lines, flushed as they happen (the host may SIGKILL us).
#
# MODE "publish": reload the outbox, connect (persistent session), publish
# messages start..count-1 at QoS 2 (even) / QoS 1 (odd), payload
# "<boot>:<n>", polling after every 8th publish (a burst beyond the 4 slots
# goes into the outbox's file); "@@ reloaded SLOTS BACKLOG" (what
# the outbox gave back) first, "@@ pub N QOS RESULT" once each
# publish() has returned, then flush and "@@ flushed". Killed at any point,
# a rerun with the next start resumes from the outbox. PARAMS "driver":
# "client" (client.MQTTClient, the default) or "telem" (telem.Telemetry,
# the publish-only telemetry profile).
#
# MODE "offline": publish n QoS 1 messages online and flush; "@@ online";
# wait for a line "down" on stdin (the broker is stopped), publish m more
# ("@@ pub N 1 RESULT" each, none may block), "@@ offline"; wait for "up",
# flush (reconnects, drains in order), "@@ flushed".
#
# MODE "receive": reload the outbox, connect (persistent session), subscribe
# at QoS 2 unless the session was resumed, "@@ got PAYLOAD" from on_message
# for every message (which then works work_ms before returning), until the
# payload "end".
import sys

try:
    import json
except ImportError:
    import ujson as json

from frugalmqtt.client import MQTTClient, sleep_ms
from frugalmqtt.outbox import Outbox
from frugalmqtt.telem import Telemetry


def say(line):
    print("@@ " + line)
    try:
        sys.stdout.flush()
    except AttributeError:
        pass


def device(p, on_message=None):
    ob = Outbox(p["path"], p["size"])
    if p.get("driver") == "telem":
        c = Telemetry(p["cid"], p["host"], p["port"], version=5, clean=False, outbox=ob,
                      timeout_ms=5000, slots=p.get("slots", 4))
        say("reloaded %d %d" % (c.pending(), ob.backlog))
        c.connect()
        return c, ob
    c = MQTTClient(p["cid"], p["host"], p["port"], version=5, clean=False, outbox=ob,
                   backoff_ms=(20, 200), timeout_ms=5000, slots=p.get("slots", 4),
                   inbound=p.get("inbound", 8))
    say("reloaded %d %d" % (c.pending(), ob.backlog))  # in slots, in the backlog
    c.on_message = on_message  # before connecting: a resumed session delivers at once
    c.ensure_connected()
    return c, ob


def publish(p):
    c, ob = device(p)
    topic = p["topic"]
    boot = p["boot"]
    for n in range(p["start"], p["count"]):
        qos = 1 if n % 2 else 2
        r = c.publish(topic, b"%d:%d" % (boot, n), qos)
        say("pub %d %d %d" % (n, qos, r))
        if n % 8 == 7:  # acks are read between bursts: a kill finds messages in the outbox
            c.poll(0)
    c.flush()
    say("flushed")
    c.disconnect()
    ob.close()


def offline(p):
    c, ob = device(p)
    topic = p["topic"]
    n = 0
    while n < p["n"]:
        say("pub %d 1 %d" % (n, c.publish(topic, b"%d" % n, 1)))
        n += 1
    c.flush()
    say("online")
    sys.stdin.readline()  # "down"
    # MQTTClient.publish() reconnects after storing a message while the link
    # is down (reconnect=True): off here, so that offline publishing is seen
    # not to wait; the outbox takes what the slots cannot
    c.reconnect = False
    while n < p["n"] + p["m"]:
        say("pub %d 1 %d" % (n, c.publish(topic, b"%d" % n, 1)))
        n += 1
    say("offline %d" % c.connects)
    sys.stdin.readline()  # "up"
    c.reconnect = True
    c.flush()
    say("flushed %d" % c.connects)
    c.disconnect()
    ob.close()


def receive(p):
    done = []

    work = p.get("work_ms", 0)

    def on_message(m):
        pl = bytes(m.payload)
        say("got " + str(pl, "utf-8"))
        if pl == b"end":
            done.append(1)
        if work:
            sleep_ms(work)  # the application at work: its PUBREC goes out after this

    c, ob = device(p, on_message)
    if not c.sp:
        c.subscribe(p["topic"], 2)
    say("subscribed")
    while not done:
        c.poll(100)
    c.disconnect()
    ob.close()


if __name__ == "__main__":
    arg = sys.argv[2]
    if arg.endswith(".json"):  # a file (tests/outbox_reboot.py), or the JSON inline
        with open(arg) as f:
            arg = f.read()
    {"publish": publish, "offline": offline, "receive": receive}[sys.argv[1]](json.loads(arg))
