"""The globals dicts of the modules on the publish and receive paths keep
room, on the MicroPython unix port.

MicroPython grows a dict only when every slot is taken, to the next size of
a fixed list, and a lookup that misses probes until it finds an empty slot.
Every builtin a function names (type, len, bytearray, OSError, ...) is first
missed in its module's globals: in a full dict that is a scan of all of it,
a modulo per slot. Measured on the old core.py's 17 globals in 17 slots: a
QoS 0 publish took 2.5 us of CPU, 1.7 us with one more global (18 in 23
slots). A change that fills one of these dicts again fails here; the cure is
a name more or less (session.py's `_room`)."""
import json
import os
import subprocess

from hostkit import micropython_binary
from test_device_imports import FIRMWARE

# py/map.c hash_allocation_sizes: the sizes a MicroPython dict takes
SIZES = (0, 2, 4, 6, 8, 10, 12, 17, 23, 29, 37, 47, 59, 73, 97, 127, 167, 223)
# the modules whose functions run for every message sent or received
HOT = ("lite", "recv", "propview", "alias", "client", "aclient", "session", "telem")
MOST = 0.85  # of its slots a hot module's globals may take
SMALL = 8  # a dict this small is scanned in a few probes even when full
# Measured exceptions, {module: its globals count}: the count may not change
# without measuring again. lite (the core): 11 globals in 12 slots, every one
# needed (the classes, the exceptions, why, text, ticks_ms, ticks_diff,
# SESSION_LOST); its publish() looks type and len up once per call, and
# callgrind counts (3.1.1, QoS 0 publish) say the fill costs nothing here:
# 20.1k instructions at 11 of 12, 20.3-20.5k with one global fewer (10 of
# 12: where the names hash decides the probes, not the fill), 19.4k at 13 of
# 17 but the publish-only smallest heap 16384 B instead of 15616 (its line
# 15667).
MEASURED = {"lite": 11}

PROBE = """
import json
out = {}
for m in %r:
    mod = __import__("frugalmqtt." + m, None, None, ["x"])
    out[m] = len(mod.__dict__)
print(json.dumps(out))
""" % (HOT,)


def size(n):
    return next(s for s in SIZES if s >= n)


def test_hot_module_globals_have_room_under_the_unix_port():
    env = dict(os.environ, MICROPYPATH=".frozen:%s" % FIRMWARE)
    r = subprocess.run([micropython_binary(), "-c", PROBE], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = json.loads(r.stdout)
    assert sorted(counts) == sorted(HOT)
    crowded = {m: "%d of %d slots" % (n, size(n)) for m, n in counts.items()
               if n / size(n) > MOST and size(n) > SMALL and MEASURED.get(m) != n}
    assert not crowded, "globals dicts too full (add or drop a global): %s" % crowded


def test_the_size_list_is_micropythons():
    """A dict of n entries takes the first size >= n: checked through the
    only thing the unix port shows of it, a dict's memory (gc.mem_alloc)."""
    probe = """
import gc
def grown(n):
    d = {}
    for i in range(n):
        d[i] = 0
    return d
out = []
for n in range(1, 60):
    gc.collect()
    a = gc.mem_alloc()
    d = grown(n)
    gc.collect()
    out.append(gc.mem_alloc() - a)
    del d
print(out)
"""
    r = subprocess.run([micropython_binary(), "-c", probe], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    mem = eval(r.stdout)
    # the dict's table grows exactly where the list says: after 2, 4, ..., 47 entries
    steps = [n for n in range(2, 60) if mem[n - 1] > mem[n - 2]]
    assert steps == [s + 1 for s in SIZES[1:] if s + 1 < 60], (steps, mem)
