# Telemetry that survives a reboot, on the telemetry profile
# (frugalmqtt.telem.Telemetry: publish-only, outbound topic aliases, the
# outbox): every QoS 1 reading goes into an outbox file before it is sent and
# leaves it when the broker has it. A device that is reset (or loses power)
# resends what was unacknowledged when it starts again; readings beyond the
# client's slots wait in the file (publish() returns outbox.STORED) instead
# of blocking.
#
#   .venv/bin/python examples/telemetry_outbox.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/telemetry_outbox.py [HOST [PORT]]
# The file is outbox.bin in the current directory (the root of a board's flash).
import sys
import time

from frugalmqtt.telem import Telemetry
from frugalmqtt.outbox import Outbox, STORED

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883
READINGS = 5
PERIOD_S = 0.2
TOPIC = b"examples/outbox/temp"


def main():
    box = Outbox("outbox.bin", 16384)
    # clean=False: the broker keeps the session, so a reboot resumes it
    c = Telemetry("example-outbox", BROKER, PORT, version=5, clean=False, outbox=box)
    print("%d stored readings to resend" % (c.pending() + box.backlog))
    c.connect()
    for n in range(READINGS):
        # a packet id, or STORED; OSError only when the file is full (not stored)
        if c.publish(TOPIC, b"%d" % (20 + n), qos=1) == STORED:
            print("reading %d waits in the outbox" % n)
        time.sleep(PERIOD_S)
        c.poll(0)
    c.flush(5000)
    print("all acknowledged; outbox has room for %d bytes" % box.free())
    c.disconnect()
    box.close()


main()
