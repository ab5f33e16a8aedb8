"""pipeline.spark's class archive: the first local session on a machine
writes it as its JVM exits, the next session's JVM maps it, and neither
prints a word of it on stdout."""
import glob
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A fresh process: a local session runs one query and says whether its JVM
# has a class archive of ours mapped.
SESSION = """
import os
from pipeline import spark
s = spark.session("local[1]", small=True, log=os.devnull)
assert s.range(10).count() == 10
maps = open("/proc/%d/maps" % s.sparkContext._gateway.proc.pid).read()
print("mapped" if "/frugalmqtt/spark-" in maps else "not mapped")
s.stop()
"""


def test_class_archive_written_by_the_first_run_mapped_by_the_next(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path),
               PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "firmware")]))

    def run():
        p = subprocess.run([sys.executable, "-c", SESSION], env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        return p.stdout

    assert run() == "not mapped\n"  # nothing else: the JVM's notes on the archive stay off stdout
    archives = glob.glob(str(tmp_path / "frugalmqtt" / "*"))
    assert len(archives) == 1 and archives[0].endswith(".jsa"), archives  # no .tmp left
    assert run() == "mapped\n"
    assert glob.glob(str(tmp_path / "frugalmqtt" / "*")) == archives
