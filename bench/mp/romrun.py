# Runs another bench/mp script with the library's modules in a ROMFS image,
# as firmware built with ROMFS runs them: mounted at /rom, /rom/lib first on
# sys.path, the bytecode executed in place instead of copied into the heap.
#   micropython -m romrun IMAGE SCRIPT ARGS...
# A board maps the image from flash; here it is read into a bytearray, which
# sits in the heap: "@@ image BYTES" is the heap it takes, for the caller to
# take off a heap size (bench/client_bench.py, bench/compare.py).
import gc
import sys
import vfs

gc.collect()
before = gc.mem_alloc()
f = open(sys.argv[1], "rb")
img = bytearray(f.seek(0, 2))
f.seek(0)
f.readinto(img)
f.close()
gc.collect()
print("@@ image", gc.mem_alloc() - before)
vfs.mount(vfs.VfsRom(img), "/rom")
sys.path.insert(0, "/rom/lib")
script = sys.argv[2]
del sys.argv[1:3]  # the script sees its own arguments at sys.argv[1:]
__import__(script)
