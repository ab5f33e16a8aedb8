# heap.py for the publish-only profile, as small as a device's main.py (and
# as heap_umqtt.py, its peers' run): connect, N QoS 1 publishes (32-byte
# payload) all acknowledged, then "@@ ok". bench/client_bench.py runs it with
# smaller and smaller -X heapsize. The telemetry profile has its own script,
# heap_telem.py: a branch for it here would count against lite.
#   micropython -m heap_lite HOST PORT N [VERSION]  (VERSION: 5 unless 4)
import gc
import sys
from frugalmqtt.lite import Publisher

gc.collect()
before = gc.mem_alloc()
c = Publisher("b-heap-lite", sys.argv[1], int(sys.argv[2]),
              int(sys.argv[4]) if len(sys.argv) > 4 else 5, timeout_ms=5000, slots=8,
              max_packet=128, rx_size=64)
gc.collect()
built = gc.mem_alloc() - before  # the client object with all its buffers
c.connect()
payload = bytes(32)
for i in range(int(sys.argv[3])):
    c.publish(b"bench/heap", payload, 1)
if not c.flush(10000):
    sys.exit(4)
c.disconnect()
gc.collect()
print("@@ ok", sys.argv[3])
print("@@ client", built)
print("@@ held", gc.mem_alloc())  # everything still referenced at the end
