# heap_lite.py's run for mqtt_as (PyPI micropython-mqtt, mqtt_async.py; `make
# compare`), as small as a device's main.py: connect, N QoS 1 publishes
# (32-byte payload), each awaiting its PUBACK, then "@@ ok". As in
# mqttlibs.py, the broker address goes in as the (ip, port) tuple a board's
# getaddrinfo gives (the unix port gives a raw sockaddr).
#   micropython -m heap_mqttas HOST PORT N
import asyncio
import gc
import sys
import mqtt_async

cfg = mqtt_async.config
cfg.server = sys.argv[1]
cfg.port = int(sys.argv[2])
cfg.client_id = "b-heap-mqttas"
cfg.ssid = "lab"  # joins the unix port's `network` stand-in
cfg.wifi_pw = "x"
cfg.clean = True
c = mqtt_async.MQTTClient(cfg)
c._addr = (cfg.server, cfg.port)
c._dns_lookup = lambda: None


async def main(n):
    await c.connect()
    payload = bytes(32)
    for i in range(n):
        await c.publish(b"bench/heap", payload, False, 1)
    await c.disconnect()


asyncio.run(main(int(sys.argv[3])))
gc.collect()
print("@@ ok", sys.argv[3])
print("@@ held", gc.mem_alloc())
