# Heap held by one client instance, per sizing argument (bench/sizing.py).
# Prints "@@ <class> <argument> <value> <bytes held by the instance>" for the
# defaults ("-" "-") and for each argument changed alone. Construction is
# where every buffer is allocated; nothing connects.
import gc
from frugalmqtt.client import MQTTClient
from frugalmqtt.lite import Publisher

# Each argument raised well above its default, so that the 16-byte granularity
# of the GC heap hardly shows in the cost per unit.
FULL = {"max_packet": 2048, "tx_size": 1536, "slots": 16, "slot_size": 512, "inbound": 72,
        "aliases_out": 72, "aliases_in": 12, "alias_topic_max": 128}
LITE = {"max_packet": 512, "slots": 8, "rx_size": 320}


def held(make, kw):
    gc.collect()
    before = gc.mem_alloc()
    obj = make(kw)
    gc.collect()
    n = gc.mem_alloc() - before
    del obj
    return n


def full(kw):
    return MQTTClient("sizing", "127.0.0.1", **kw)


def lite(kw):
    return Publisher("sizing", "127.0.0.1", **kw)


for name, make, changes in (("MQTTClient", full, FULL), ("Publisher", lite, LITE)):
    held(make, {})  # warm-up: first-call allocations are not the instance's
    print("@@", name, "-", "-", held(make, {}))
    for arg in changes:
        print("@@", name, arg, changes[arg], held(make, {arg: changes[arg]}))
