# A blocking publisher: READINGS temperature readings, one every PERIOD_S
# seconds, at QoS 1 with MQTT 5 properties (content type, a unit, an expiry);
# on_done reports when the broker has each one. Then it waits for the last
# acknowledgements and disconnects.
#
#   .venv/bin/python examples/publisher.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/publisher.py [HOST [PORT]]
import sys
import time

from frugalmqtt.client import MQTTClient
from frugalmqtt import props as P

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883
READINGS = 3
PERIOD_S = 1
TOPIC = b"examples/publisher/temp"
# Built once and reused: publishing with it allocates nothing
PROPS = [(P.CONTENT_TYPE, "application/json"), (P.USER_PROPERTY, ("unit", "C")),
         (P.MESSAGE_EXPIRY, 300)]


def on_done(pid, reason):
    print("reading %d acknowledged, reason 0x%02x" % (pid, reason))


def main():
    c = MQTTClient("example-publisher", BROKER, port=PORT, version=5, keepalive=30)
    c.on_done = on_done
    c.connect()
    for n in range(READINGS):
        value = 21.0 + n / 10
        pid = c.publish(TOPIC, b'{"n": %d, "value": %.1f}' % (n, value), qos=1, props=PROPS)
        print("published reading", pid)
        time.sleep(PERIOD_S)
        c.poll(0)  # handle the acknowledgements that came meanwhile
    c.flush(5000)  # wait for the last ones
    c.disconnect()
    print("done")


main()
