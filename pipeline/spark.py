"""One place that builds the SparkSession, with the settings this machine needs
(see ../shared/notes/platform.md): the venv's python for workers, loopback,
UTC, no UI, quiet logs; on a cluster, the project's code shipped to the
executors."""
import atexit
import contextlib
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

DEFAULT_MASTER = "local[*]"
KEEP_ARCHIVES = 2  # class archives of other PySparks/javas/checkouts kept (200 MB each)


SMALL_INPUT = 256 << 20  # bytes of Parquet below which the JVM compiles with C1 only


def session(master=None, app="frugalmqtt-pipeline", small=False, conf=(), log=None,
            level="ERROR", input_bytes=None, write_archive=True):
    """A SparkSession on `master` (local[*] unless given; under spark-submit
    the submitted master is kept). `small=True` tunes for tiny test data.

    `log`: a file that takes the JVM's own output (its startup warnings and
    log lines) instead of this process's stderr; `level`: Spark's log level
    once it runs (the CLI's -v: no log file, WARN). `input_bytes`: the size
    of what the job reads; a small input gets a JVM that compiles less (on
    one million rows the JIT's C2 compiler costs more than it saves), a
    large one its whole heap at once. On a local master the JVM maps the
    class archive (class_archive()); `write_archive=False`: it maps one
    that is there but never writes one (a process that may be killed before
    its JVM has written it: a test worker)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    b = SparkSession.builder.appName(app)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # the JVM came from spark-submit
    if master or not under_submit:
        b = b.master(master or DEFAULT_MASTER)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # The audit partitions both inputs by (run, device) once; a join or
        # window on more keys than that needs no second shuffle.
        "spark.sql.requireAllClusterKeysForCoPartition": "false",
        # The audit's levels (exact percentiles: one object buffer per
        # group) keep hash aggregation up to this many groups a task, where
        # Spark's default (128) falls back to sorting and serializing the
        # buffers (a few thousand groups a task at 1e7 rows: the levels
        # query over the same facts, alternately, 16.6-16.8 s against
        # 17.0-19.9 s).
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "65536",
    }
    if small:
        settings.update({
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        })
    elif (master or DEFAULT_MASTER).startswith("local") and not under_submit:
        # One machine: Spark's 200 shuffle partitions are 200 tiny tasks per
        # stage (5-15x slower here). Up to 16 per core, fewer for a small
        # input (a cached partition is never merged by AQE, and every task
        # over it costs): at 1e7 rows the audit's hash aggregation per task
        # stays well inside the heap. Shuffle files stay in the page cache:
        # compressing them only costs CPU. The throughput collector beats G1
        # on a batch job this size. A small input gets a JVM that compiles
        # with C1 only; a large one the whole heap from its start (at 1e7
        # rows 8-13 s sooner than a heap grown on demand under the cache and
        # the join's hash maps, in back-to-back runs).
        small_input = input_bytes and input_bytes < SMALL_INPUT
        # A large input: C2 compiles only what runs 5x longer than by
        # default (HotSpot's Tier4 thresholds). Each stage's generated code
        # is a new class, and at 1e7 rows the C2 compiler thread took about
        # 30 of the JVM's 130 CPU seconds: with these, 21-25 (the JVM's
        # total 119-123 against 129-133, on the same traces).
        jvm = " -XX:TieredStopAtLevel=1" if small_input else (
            " -Xms2g -XX:Tier4InvocationThreshold=25000 -XX:Tier4MinInvocationThreshold=3000"
            " -XX:Tier4CompileThreshold=75000")
        cores = os.cpu_count() or 1
        parts = 16 * cores
        if input_bytes:  # about 8 MB of Parquet per partition, at least 4 per core
            parts = min(parts, max(4 * cores, -(-input_bytes // (8 << 20))))
        settings.update({
            "spark.driver.memory": "2g",
            "spark.driver.extraJavaOptions": "-XX:+UseParallelGC" + jvm,
            "spark.shuffle.compress": "false",
            # The job's one cache (its deduplicated telemetry) lives for one
            # run: encoding it costs more CPU than its memory is worth here.
            "spark.sql.inMemoryColumnarStorage.compressed": "false",
            "spark.sql.shuffle.partitions": str(parts),
            # A scan's tasks a few files each, not a third of them (a
            # Parquet row group is never split): the last task of a
            # stage no longer runs alone.
            "spark.sql.files.minPartitionNum": str(4 * cores),
            "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16m",
        })
    archive = None
    if (master or DEFAULT_MASTER).startswith("local") and not under_submit:
        sharing, archive = class_archive(write_archive)
        settings["spark.driver.extraJavaOptions"] = " ".join(
            o for o in (settings.get("spark.driver.extraJavaOptions"), sharing) if o)
    settings.update(dict(conf))
    for k, v in settings.items():
        b = b.config(k, v)
    with _stderr_to(log):
        spark = b.getOrCreate()
    gateway = spark.sparkContext._gateway
    if archive and getattr(gateway, "proc", None):
        atexit.register(_keep_archive, gateway.proc, *archive)
    spark.sparkContext.setLogLevel(level)
    if master and not master.startswith("local") and not under_submit:
        # A cluster: ship the code as spark-submit --py-files would (under
        # spark-submit, pass --py-files yourself: see the README).
        folder = tempfile.mkdtemp(prefix="frugalmqtt-")
        atexit.register(shutil.rmtree, folder, True)
        spark.sparkContext.addPyFile(package_zip(folder))
    return spark


def class_archive(write=True):
    """JVM options that share the classes Spark loads between runs (the
    JDK's class-data sharing): loading and verifying them is about 2 s of
    every start and a second of the first query. The first run on a machine
    writes the archive (about 200 MB, under ~/.cache/frugalmqtt, named by
    PySpark's version, its jars and the java used) as its JVM exits; later
    runs map it. A JVM that cannot use it (another JDK, changed jars) runs
    without it. One run writes it at a time, into a file named by its
    process id; a file left by a run that ended before renaming it (killed,
    or a pytest-xdist worker stopped while its JVM was still writing) is
    deleted by the next start, whichever archive it was for. A run that
    writes a new archive deletes all but the KEEP_ARCHIVES others used last.
    Returns (options, None), or (options, (file being written, archive))."""
    path = archive_path()
    quiet = "-Xlog:cds*=off"  # the JVM's own notes on the archive, else on our stdout
    folder = os.path.dirname(path)
    writing = False  # another run is writing this archive
    for tmp in glob.glob(os.path.join(glob.escape(folder), "spark-*.jsa.*.tmp")):
        pid = tmp.rsplit(".", 2)[1]
        if pid.isdigit() and _alive(int(pid)):
            writing = writing or tmp.startswith(path + ".")
        else:  # its run ended before renaming it
            with contextlib.suppress(OSError):
                os.remove(tmp)
    if os.path.exists(path):
        with contextlib.suppress(OSError):
            os.utime(path)  # its last use: what a new archive keeps (below)
        return "-XX:SharedArchiveFile=%s %s" % (path, quiet), None
    if writing or not write:
        return quiet, None
    # A new archive (another PySpark, java or checkout): the ones of other
    # keys stay only if they are among the KEEP_ARCHIVES used last
    kept = sorted(glob.glob(os.path.join(glob.escape(folder), "spark-*.jsa")),
                  key=_last_use, reverse=True)
    for old in kept[KEEP_ARCHIVES:]:
        with contextlib.suppress(OSError):
            os.remove(old)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:  # no cache to keep it in: every start loads the classes itself
        return quiet, None
    tmp = "%s.%d.tmp" % (path, os.getpid())
    return "-XX:ArchiveClassesAtExit=%s %s" % (tmp, quiet), (tmp, path)


def _last_use(archive):
    """When the archive was last mapped (0: gone meanwhile)."""
    try:
        return os.path.getmtime(archive)
    except OSError:
        return 0


def _alive(pid):
    """True when process `pid` runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def archive_path():
    """Where class_archive() keeps the archive for this PySpark and java."""
    import pyspark
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get(
        "JAVA_HOME") else shutil.which("java") or "java"
    jars = os.path.realpath(os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    key = hashlib.sha1(repr([(p, os.stat(p).st_mtime if os.path.exists(p) else None)
                             for p in (jars, os.path.realpath(java))]).encode())
    folder = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                          "frugalmqtt")
    return os.path.join(folder, "spark-%s-%s.jsa" % (pyspark.__version__, key.hexdigest()[:12]))


def _keep_archive(jvm, tmp, path, timeout=120):
    """At exit of the run that writes the archive: end the JVM (it stops
    when its stdin closes), wait while it writes, then put the archive in
    place (a rename: a concurrent run sees all of it or none)."""
    try:
        jvm.stdin.close()
        jvm.wait(timeout)
    except (OSError, subprocess.TimeoutExpired):
        return
    if os.path.exists(tmp):
        os.replace(tmp, path)


@contextlib.contextmanager
def _stderr_to(path):
    """File descriptor 2 points at `path` while the JVM starts: the JVM
    inherits it and keeps writing there; this process gets its own back."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


PACKAGES = ("pipeline", "host_sim", "frugalmqtt")  # what the job imports


def package_zip(folder):
    """Zip the packages the job imports (from where this process imports
    them) into folder/frugalmqtt-pipeline.zip, for --py-files; returns its path."""
    import importlib
    import zipfile
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "frugalmqtt-pipeline.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name in PACKAGES:
            src = os.path.dirname(importlib.import_module(name).__file__)
            for root, dirs, files in os.walk(src):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                for f in files:
                    if f.endswith(".py"):
                        full = os.path.join(root, f)
                        z.write(full, os.path.join(name, os.path.relpath(full, src)))
    return path
