# heap_lite.py's run for the telemetry profile: telem.Telemetry with an
# outbox (a fresh 8 KB file), connect, N QoS 1 publishes (32-byte payload)
# all acknowledged, then "@@ ok".
#   micropython -m heap_telem HOST PORT N [VERSION]  (VERSION: 5 unless 4)
import gc
import os
import sys
from frugalmqtt.telem import Telemetry
from frugalmqtt.outbox import Outbox

path = "%s/bench-heap-telem-%s.bin" % (os.getenv("TMPDIR") or "/tmp", sys.argv[2])
try:
    os.remove(path)
except OSError:
    pass
gc.collect()
before = gc.mem_alloc()
c = Telemetry("b-heap-telem", sys.argv[1], int(sys.argv[2]),
              int(sys.argv[4]) if len(sys.argv) > 4 else 5, timeout_ms=5000, slots=8,
              max_packet=128, rx_size=64, outbox=Outbox(path, 8192))
gc.collect()
built = gc.mem_alloc() - before  # the client object with its buffers and the outbox
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
