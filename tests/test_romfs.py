"""ROMFS images (tools/romfs.py, `make romfs`): an install profile's modules
mounted as ROMFS firmware mounts them, imported from the image and publishing
to a real mosquitto on the MicroPython unix port."""
import os
import subprocess
import sys
from pathlib import Path

from hostkit import PahoSubscriber, micropython_binary

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import profiles  # noqa: E402

# Published from the image; bench/mp/romrun.py mounts it (/rom, /rom/lib first on sys.path).
DEVICE = """
import os
import sys
import frugalmqtt.lite
from frugalmqtt.lite import Publisher
print("@@ file", frugalmqtt.lite.__file__)
print("@@ listed", ",".join(sorted(os.listdir("/rom/lib/frugalmqtt"))))
c = Publisher("t-romfs", sys.argv[1], int(sys.argv[2]), 5, timeout_ms=5000)
c.connect()
for i in range(3):
    c.publish(b"frugal/romfs", b"rom-%d" % i, 1)
print("@@ flushed", c.flush(5000))
c.disconnect()
"""


def build_image(tmp_path, profile):
    out = tmp_path / (profile + ".romfs")
    r = subprocess.run([sys.executable, str(REPO / "tools" / "romfs.py"), profile,
                        "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out.stat().st_size > 0 and str(out) in r.stdout
    return out


def test_lite_profile_publishes_from_its_romfs_image(tmp_path, broker, cleanup):
    image = build_image(tmp_path, "lite")
    (tmp_path / "device.py").write_text(DEVICE)
    sub = PahoSubscriber(broker, "frugal/romfs", 5, 1)
    cleanup.append(sub.stop)
    r = subprocess.run(
        [micropython_binary(), "-m", "romrun", str(image), "device", broker.host,
         str(broker.port)], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, MICROPYPATH="%s:%s" % (tmp_path, REPO / "bench" / "mp")))
    assert r.returncode == 0, r.stdout + r.stderr
    said = dict(l[3:].split(" ", 1) for l in r.stdout.splitlines() if l.startswith("@@ "))
    assert said["file"].startswith("/rom/lib/frugalmqtt/lite")  # imported from the image
    assert said["listed"] == ",".join(sorted(m + ".mpy" for m in profiles.PROFILES["lite"]))
    assert said["flushed"] == "True"
    assert int(said["image"]) >= image.stat().st_size  # romrun's report of the image's heap
    sub.wait_for(b"rom-2")
    assert sub.payloads() == [b"rom-0", b"rom-1", b"rom-2"]

