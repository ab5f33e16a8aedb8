# A program written for micropython-lib's umqtt.simple, in the style of its
# examples: it reports a reading every few seconds, answers commands on
# demo/cmd, keeps a retained online/offline status with a last will, and stops
# on the command "stop". The only line changed to run it on frugalmqtt is the
# import:
#     from umqtt.simple import MQTTClient
from frugalmqtt.simple import MQTTClient
import time

CLIENT_ID = b"umqtt_style_demo"
TOPIC = b"demo"

client = None
running = True
answered = 0


def sub_cb(topic, msg):
    global running, answered
    print((topic, msg))
    if msg == b"stop":
        running = False
    else:
        answered += 1
        # QoS 1: publish() returns once the broker has it
        client.publish(TOPIC + b"/echo", b"%d:" % answered + msg, qos=1)


def main(server="localhost", port=0, period=0.2):
    global client
    client = MQTTClient(CLIENT_ID, server, port, keepalive=30)
    client.set_callback(sub_cb)
    client.set_last_will(TOPIC + b"/status", b"offline", retain=True)
    client.connect()
    client.subscribe(TOPIC + b"/cmd", qos=1)
    client.publish(TOPIC + b"/status", b"online", retain=True)
    print("Connected to %s, subscribed to %s topic" % (server, TOPIC + b"/cmd"))
    reading = 0
    try:
        while running:
            reading += 1
            client.publish(TOPIC + b"/reading", str(reading))
            # Non-blocking check for commands, then sleep (a real program
            # would do useful work here)
            client.check_msg()
            time.sleep(period)
        client.publish(TOPIC + b"/status", b"stopped", retain=True)
    finally:
        client.disconnect()
    print("Stopped after %d answers" % answered)


if __name__ == "__main__":
    # python examples/umqtt_style.py [HOST [PORT]]
    import sys
    main(sys.argv[1] if len(sys.argv) > 1 else "localhost",
         int(sys.argv[2]) if len(sys.argv) > 2 else 0)
