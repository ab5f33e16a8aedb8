# Runs connect + N QoS 1 publishes (5.0, 32-byte payload) and exits 0 with
# "@@ ok" only if all were acknowledged. bench/client_bench.py runs it with
# smaller and smaller `micropython -X heapsize=` to find the least heap that
# completes it. Kept small: its own code counts, as a device's main.py would.
#   micropython -m heap HOST PORT PROFILE N [VERSION]  (VERSION: 5 unless 4)
# PROFILE pub: publish only (inbound=1, no inbound topic aliases, no
#   subscription). PROFILE full: also subscribed to the topic at QoS 1, so
#   every message comes back and is dispatched to on_message.
# The publish-only profile (lite.Publisher) has its own script, heap_lite.py.
# pub and full: slots=8 slot_size=128 max_packet=256 tx_size=256. Also prints the
# heap the client object takes with its buffers, and all heap held at the end.
# Other libraries have their own scripts, as small as this one (`make
# compare`): heap_umqtt.py, heap_simple2.py, heap_mqttas.py.
import gc
import sys

host = sys.argv[1]
port = int(sys.argv[2])
full = sys.argv[3] == "full"
n = int(sys.argv[4])
version = int(sys.argv[5]) if len(sys.argv) > 5 else 5
got = [0]


def on_message(msg):
    got[0] += 1


topic = b"bench/heap"
payload = bytes(32)
from frugalmqtt.client import MQTTClient
gc.collect()
before = gc.mem_alloc()
c = MQTTClient("b-heap", host, port, version, reconnect=False, timeout_ms=5000, slots=8,
               slot_size=128, max_packet=256, tx_size=256, inbound=8 if full else 1,
               aliases_in=4 if full else 0)
gc.collect()
built = gc.mem_alloc() - before  # the client object with all its buffers
c.connect()
if full:
    c.on_message = on_message
    if c.subscribe(topic, 1) != 1:
        sys.exit(3)
i = 0
while i < n:
    c.publish(topic, payload, 1)
    i += 1
if not c.flush(10000):
    sys.exit(4)
if full:
    k = 0
    while got[0] < n and k < 100:
        c.poll(100)
        k += 1
    if got[0] != n:
        sys.exit(5)
c.disconnect()
gc.collect()
print("@@ ok", n)
print("@@ client", built)
print("@@ held", gc.mem_alloc())  # everything still referenced at the end
