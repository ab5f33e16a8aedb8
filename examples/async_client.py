# The asyncio client: one task publishes readings (each awaited until the
# broker acknowledged it) while the main task reads them back through
# messages(); on_connect reports every (re)connect. Ends when it has
# received its READINGS messages.
#
#   .venv/bin/python examples/async_client.py [HOST [PORT]]
#   MICROPYPATH=firmware:.frozen .venv/bin/micropython examples/async_client.py [HOST [PORT]]
import sys
import asyncio

from frugalmqtt.aclient import AMQTTClient

BROKER = sys.argv[1] if len(sys.argv) > 1 else "broker.local"
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 1883
READINGS = 3
TOPIC = b"examples/async/temp"


async def publish_readings(c):
    for n in range(READINGS):
        code = await c.publish(TOPIC, b"%d" % (20 + n), qos=1, wait=True)
        print("acknowledged, reason code", code)
        await asyncio.sleep(0.2)


async def main():
    c = AMQTTClient("example-async", BROKER, port=PORT, version=5, keepalive=30)
    c.on_connect = lambda present: print("connected, session present:", present)
    async with c:  # connects; disconnects at the end of the block
        await c.subscribe(TOPIC, qos=1)
        pub = asyncio.create_task(publish_readings(c))
        n = 0
        async for m in c.messages():
            n += 1
            print("received", m.topic.decode(), m.payload.decode(), "qos", m.qos)
            if n == READINGS:
                break
        await pub  # its last acknowledgement
    print("done")


asyncio.run(main())
