# heap.py for the telemetry profile (telem.Telemetry with an outbox), as
# small as a device's main.py: a fresh 4 KB outbox file, connect, N QoS 1
# publishes (32-byte payload) all acknowledged, then "@@ ok". Same sizes as
# heap_lite.py, so the two compare.
#   micropython -m heap_telem HOST PORT N [VERSION]  (VERSION: 5 unless 4)
import gc
import os
import sys
from frugalmqtt.telem import Telemetry
from frugalmqtt.outbox import Outbox

PATH = "heap_telem.bin"
try:
    os.remove(PATH)
except OSError:
    pass
gc.collect()
before = gc.mem_alloc()
c = Telemetry("b-heap-telem", sys.argv[1], int(sys.argv[2]),
              int(sys.argv[4]) if len(sys.argv) > 4 else 5, timeout_ms=5000, slots=8,
              max_packet=128, rx_size=64, outbox=Outbox(PATH, 4096))
gc.collect()
built = gc.mem_alloc() - before  # the client object with its buffers and the outbox
c.connect()
payload = bytes(32)
for i in range(int(sys.argv[3])):
    c.publish(b"bench/heap", payload, 1)
if not c.flush(10000):
    sys.exit(4)
c.disconnect()
c.ob.close()
os.remove(PATH)
gc.collect()
print("@@ ok", sys.argv[3])
print("@@ client", built)
print("@@ held", gc.mem_alloc())  # everything still referenced at the end
