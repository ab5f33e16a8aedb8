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


def test_class_archive_one_writer_and_no_file_left_by_a_run_that_ended(tmp_path, monkeypatch):
    """A .tmp left by a run that ended before renaming it is deleted by the
    next start (whichever archive it was for); while another run writes, a
    start neither writes a second one nor maps the unfinished one;
    write=False never writes; a run that writes a new archive keeps only
    the spark.KEEP_ARCHIVES others used last."""
    from pipeline import spark
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = spark.archive_path()
    os.makedirs(os.path.dirname(path))
    ended = subprocess.Popen(["true"])
    ended.wait()
    left = "%s.%d.tmp" % (path, ended.pid)
    other = os.path.join(os.path.dirname(path), "spark-0.0-other.jsa.%d.tmp" % ended.pid)
    writer = subprocess.Popen(["sleep", "60"])
    try:
        busy = "%s.%d.tmp" % (path, writer.pid)
        for f in (left, other, busy):
            open(f, "w").close()
        options, archive = spark.class_archive()
        assert archive is None and "-XX:" not in options
        assert not os.path.exists(left) and not os.path.exists(other) and os.path.exists(busy)
    finally:
        writer.kill()
        writer.wait()
    assert spark.class_archive(write=False) == ("-Xlog:cds*=off", None)
    assert not os.path.exists(busy)  # its writer ended
    others = [os.path.join(os.path.dirname(path), "spark-0.%d-x.jsa" % i) for i in range(4)]
    for i, f in enumerate(others):
        open(f, "w").close()
        os.utime(f, (1e9 + i, 1e9 + i))  # used last: others[3]
    options, archive = spark.class_archive()
    assert sorted(glob.glob(os.path.join(os.path.dirname(path), "*"))) == others[-spark.KEEP_ARCHIVES:]
    assert archive == ("%s.%d.tmp" % (path, os.getpid()), path)
    assert options.startswith("-XX:ArchiveClassesAtExit=%s " % archive[0])
    open(path, "w").close()  # the archive is there: mapped, and what was left still goes
    os.utime(path, (1e9, 1e9))
    open(left, "w").close()
    assert spark.class_archive() == ("-XX:SharedArchiveFile=%s -Xlog:cds*=off" % path, None)
    assert not os.path.exists(left)
    assert os.path.getmtime(path) > 1e9 + 10  # mapping it marks it used
