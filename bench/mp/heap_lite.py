# heap.py for the publish-only profiles, as small as a device's main.py:
# connect, N QoS 1 publishes (32-byte payload) all acknowledged, then "@@ ok".
# bench/client_bench.py runs it with smaller and smaller -X heapsize.
#   micropython -m heap_lite HOST PORT N [VERSION [telem]]  (VERSION: 5 unless 4)
# With "telem": the telemetry profile, telem.Telemetry with an outbox (a
# fresh 8 KB file), instead of lite.Publisher.
import gc
import sys

host, port = sys.argv[1], int(sys.argv[2])
version = int(sys.argv[4]) if len(sys.argv) > 4 else 5
if sys.argv[5:] == ["telem"]:
    import os
    from frugalmqtt.telem import Telemetry as Publisher
    from frugalmqtt.outbox import Outbox
    path = "%s/bench-heap-telem-%d.bin" % (os.getenv("TMPDIR") or "/tmp", port)
    try:
        os.remove(path)
    except OSError:
        pass
    gc.collect()
    before = gc.mem_alloc()
    c = Publisher("b-heap-telem", host, port, version, timeout_ms=5000, slots=8,
                  max_packet=128, rx_size=64, outbox=Outbox(path, 8192))
else:
    from frugalmqtt.lite import Publisher
    gc.collect()
    before = gc.mem_alloc()
    c = Publisher("b-heap-lite", host, port, version, timeout_ms=5000, slots=8, max_packet=128,
                  rx_size=64)
gc.collect()
built = gc.mem_alloc() - before  # the client object with all its buffers (and the outbox)
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
