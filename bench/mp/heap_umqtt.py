# heap_lite.py's run for umqtt.simple and umqtt.robust (`make compare`), as
# small as a device's main.py: connect, N QoS 1 publishes (32-byte payload),
# each blocking for its PUBACK, then "@@ ok".
#   micropython -m heap_umqtt HOST PORT N MODULE  (MODULE: simple or robust)
import gc
import sys
if sys.argv[4] == "robust":
    from umqtt.robust import MQTTClient
else:
    from umqtt.simple import MQTTClient

c = MQTTClient("b-heap-" + sys.argv[4], sys.argv[1], int(sys.argv[2]), keepalive=60)
c.connect()
payload = bytes(32)
for i in range(int(sys.argv[3])):
    c.publish(b"bench/heap", payload, False, 1)
c.disconnect()
gc.collect()
print("@@ ok", sys.argv[3])
print("@@ held", gc.mem_alloc())
