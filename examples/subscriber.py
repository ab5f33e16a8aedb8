# A blocking subscriber: prints every message on examples/subscriber/# until
# one says "stop". poll() handles messages, acknowledgements and keep-alive,
# and reconnects (resuming the session, clean=False) if the link breaks.
#
#   .venv/bin/python examples/subscriber.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/subscriber.py [HOST [PORT]]
# then, from another shell:
#   mosquitto_pub -h HOST -t examples/subscriber/hello -m hi
#   mosquitto_pub -h HOST -t examples/subscriber/x -m stop
import sys

from frugalmqtt.client import MQTTClient

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883

running = True


def on_message(msg):
    global running
    # msg is reused for the next message: copy what you keep
    print("%s %s qos=%d retain=%d" % (bytes(msg.topic).decode(), bytes(msg.payload).decode(),
                                      msg.qos, msg.retain))
    if msg.payload == b"stop":
        running = False


def main():
    c = MQTTClient("example-subscriber", BROKER, port=PORT, version=5, clean=False,
                   keepalive=30)
    c.on_message = on_message  # before connecting: a resumed session delivers at once
    c.connect()
    code = c.subscribe(b"examples/subscriber/#", qos=1)
    print("subscribed, granted QoS", code)
    while running:
        c.poll(1000)
    c.disconnect()
    print("stopped")


main()
