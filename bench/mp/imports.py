# Heap held after importing the client's modules, MicroPython unix port.
#   micropython -m imports PROFILE [MODULE...]
# PROFILE full: the client's modules, given in dependency order, imported one
#   at a time, printing the heap each one adds ("@@ module NAME BYTES") and
#   the total.
# PROFILE pub: what a device that only publishes imports:
#   `from frugalmqtt.client import MQTTClient`.
# PROFILE lite: the publish-only profile, `from frugalmqtt.lite import Publisher`;
#   liteprops: the same and `from frugalmqtt.liteprops import props`.
# PROFILE session: the full engine without a driver, `from frugalmqtt.session
#   import Session` (the core with receiving and aliases, sans-I/O).
# PROFILE telemetry: the telemetry profile, `from frugalmqtt.telem import
#   Telemetry` and `from frugalmqtt.outbox import Outbox` (as the heap run
#   and a 3.1.1 device import it); telemprops: the same and liteprops, as a
#   5.0 device that sends PUBLISH properties imports it.
# PROFILE mods MODULE...: those modules (another library, for `make compare`).
# PROFILE connect LIB HOST PORT MODULE...: the library's modules imported and
#   a client connected (mqttlibs.connect; the adapter's own code not counted).
# Heap = gc.mem_alloc() after gc.collect(), before and after the imports.
# "@@ loaded NAMES" lists the frugalmqtt modules each profile pulled in.
import gc
import sys


def loaded():
    names = []
    for k in sys.modules:
        if k.startswith("frugalmqtt."):
            names.append(k[11:])
    names.sort()
    return ",".join(names)


profile = sys.argv[1]
gc.collect()
base = gc.mem_alloc()
if profile == "full":
    prev = base
    for m in sys.argv[2:]:
        __import__("frugalmqtt." + m)
        gc.collect()
        now = gc.mem_alloc()
        print("@@ module", m, now - prev)
        prev = now
elif profile == "pub":
    from frugalmqtt.client import MQTTClient
elif profile == "lite":
    from frugalmqtt.lite import Publisher
elif profile == "liteprops":  # a 5.0 device that also sends PUBLISH properties
    from frugalmqtt.lite import Publisher
    from frugalmqtt.liteprops import props
elif profile == "session":
    from frugalmqtt.session import Session
elif profile == "telemetry":
    from frugalmqtt.telem import Telemetry
    from frugalmqtt.outbox import Outbox
elif profile == "telemprops":
    from frugalmqtt.telem import Telemetry
    from frugalmqtt.outbox import Outbox
    from frugalmqtt.liteprops import props
elif profile == "mods":  # the named modules (another library, `make compare`)
    for m in sys.argv[2:]:
        __import__(m)
elif profile == "connect":  # LIB HOST PORT MODULE...: imported and connected
    for m in sys.argv[5:]:  # the library's modules first, counted
        __import__(m)
    gc.collect()
    lib = gc.mem_alloc() - base
    import mqttlibs  # the adapter: not counted
    gc.collect()
    base = gc.mem_alloc() - lib
    c = mqttlibs.connect(sys.argv[2], "b-held", sys.argv[3], int(sys.argv[4]))
else:
    print("@@ error unknown profile", profile)
    sys.exit(2)
gc.collect()
print("@@ heap", profile, gc.mem_alloc() - base)
print("@@ loaded", profile, loaded())
