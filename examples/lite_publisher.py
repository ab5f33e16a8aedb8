# The publish-only profile (frugalmqtt.lite, about a fifth of the full
# client's RAM): READINGS readings, one every PERIOD_S seconds, at QoS 1 with
# properties built once. lite does not reconnect by itself: when the link
# fails, close, wait and connect again; connect() resends what was not yet
# acknowledged, so nothing publish() accepted is lost.
#
#   .venv/bin/python examples/lite_publisher.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/lite_publisher.py [HOST [PORT]]
import sys
import time

from frugalmqtt.lite import Publisher
from frugalmqtt.liteprops import props

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883
READINGS = 3
PERIOD_S = 1
RETRY_S = 5
TOPIC = b"examples/lite/temp"


def main():
    p = Publisher("example-lite", BROKER, port=PORT, clean=False, slots=4, max_packet=256,
                  will=(b"examples/lite/status", b"offline", 1, True))
    p.on_done = lambda pid, reason: print("reading %d acknowledged" % pid)
    units = props(content_type="application/json", user=(("unit", "C"),))
    n = 0
    while n < READINGS:
        try:
            if not p.connected:
                p.connect()  # resends what is unacknowledged
            p.publish(TOPIC, b'{"n": %d, "value": %d}' % (n, 20 + n), qos=1, props=units)
            n += 1
            p.poll(0)  # acknowledgements and keep-alive
            time.sleep(PERIOD_S)
        except OSError as e:  # link down: nothing stored is lost
            print("link down:", e)
            p.close()
            time.sleep(RETRY_S)
    p.flush(5000)
    p.disconnect()
    print("done")


main()
