# Telemetry that survives a reboot: every QoS 1 reading goes into an outbox
# file before it is sent and leaves it when the broker has it. A device that
# is reset (or loses power) resends what was unacknowledged when it starts
# again; while the link is down, readings beyond the client's slots wait in
# the file (publish() returns session.STORED) instead of blocking.
#
#   .venv/bin/python examples/telemetry_outbox.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/telemetry_outbox.py [HOST [PORT]]
# The file is outbox.bin in the current directory (the root of a board's flash).
import sys
import time

from frugalmqtt.client import MQTTClient
from frugalmqtt.outbox import Outbox
from frugalmqtt import session

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883
READINGS = 5
PERIOD_S = 0.2
TOPIC = b"examples/outbox/temp"


def main():
    box = Outbox("outbox.bin", 16384)
    # clean=False: the broker keeps the session, so a reboot resumes it
    c = MQTTClient("example-outbox", BROKER, port=PORT, version=5, clean=False, outbox=box)
    c.ensure_connected()  # retries with backoff until the broker answers
    print("resending %d stored readings" % c.s.pending())
    for n in range(READINGS):
        r = c.publish(TOPIC, b"%d" % (20 + n), qos=1)
        if r == session.STORED:
            print("reading %d waits in the outbox" % n)
        elif r == session.OUTBOX_FULL:
            print("outbox full: reading %d not taken" % n)
        time.sleep(PERIOD_S)
        c.poll(0)
    c.flush(5000)
    print("all acknowledged; outbox has room for %d bytes" % box.free())
    c.disconnect()
    box.close()


main()
