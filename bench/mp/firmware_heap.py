# The telemetry firmware's publish loop for tools/heap_report.py, run on the
# unix port from a board-like directory (lib/frugalmqtt/ with one install
# profile, the firmware's modules, boards/unix's board and network):
#   micropython -X heapsize=N -m firmware_heap MODULE...
# Imports the profile's modules (a device that installs them loads them),
# then runs firmware/app/telemetry.py's main() (Wi-Fi stand-in, client,
# samples) with ./config.json. Prints "@@ ok SEQ"
# only when every sample was published and every QoS 1 message acknowledged.
import gc
import sys

for m in sys.argv[1:]:
    __import__("frugalmqtt." + m)
import telemetry

t = telemetry.main()
gc.collect()
if t.dropped or t.client.pending():
    print("@@ error dropped", t.dropped, "pending", t.client.pending())
    sys.exit(4)
print("@@ ok", t.seq)
print("@@ held", gc.mem_alloc())
