# heap_lite.py's run for umqtt.simple2 (`make compare`), as small as a
# device's main.py: connect, N QoS 1 publishes (32-byte payload) with at most
# 8 in flight (as frugalmqtt's slots; check_msg() takes the PUBACKs), then
# "@@ ok" if none timed out.
#   micropython -m heap_simple2 HOST PORT N
import gc
import sys
from umqtt.simple2 import MQTTClient

lost = [0]


def status(pid, ok):
    if ok == 0:  # no PUBACK within message_timeout
        lost[0] += 1


c = MQTTClient("b-heap-simple2", sys.argv[1], int(sys.argv[2]), keepalive=60)
c.set_callback_status(status)
c.connect()
payload = bytes(32)
for i in range(int(sys.argv[3])):
    while len(c.rcv_pids) >= 8:
        c.check_msg()
    c.publish(b"bench/heap", payload, False, 1)
while c.rcv_pids:
    c.check_msg()
if lost[0]:
    sys.exit(4)
c.disconnect()
gc.collect()
print("@@ ok", sys.argv[3])
print("@@ held", gc.mem_alloc())
