"""One place that builds the SparkSession, with the settings this machine needs
(see ../shared/notes/platform.md): the venv's python for workers, loopback,
UTC, no UI, quiet logs; on a cluster, the project's code shipped to the
executors."""
import atexit
import contextlib
import os
import shutil
import sys
import tempfile

DEFAULT_MASTER = "local[*]"


SMALL_INPUT = 256 << 20  # bytes of Parquet below which the JVM compiles with C1 only


def session(master=None, app="frugalmqtt-pipeline", small=False, conf=(), log=None,
            level="ERROR", input_bytes=None):
    """A SparkSession on `master` (local[*] unless given; under spark-submit
    the submitted master is kept). `small=True` tunes for tiny test data.

    `log`: a file that takes the JVM's own output (its startup warnings and
    log lines) instead of this process's stderr; `level`: Spark's log level
    once it runs (the CLI's -v: no log file, WARN). `input_bytes`: the size
    of what the job reads; a small input gets a JVM that compiles less (on
    one million rows the JIT's C2 compiler costs more than it saves)."""
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
        # over it costs): at 1e7 rows the hash join's build side per task
        # stays well inside the heap. Shuffle files stay in the page cache:
        # compressing them only costs CPU. The throughput collector beats G1
        # on a batch job this size.
        jit = " -XX:TieredStopAtLevel=1" if input_bytes and input_bytes < SMALL_INPUT else ""
        cores = os.cpu_count() or 1
        parts = 16 * cores
        if input_bytes:  # about 8 MB of Parquet per partition, at least 4 per core
            parts = min(parts, max(4 * cores, -(-input_bytes // (8 << 20))))
        settings.update({
            "spark.driver.memory": "2g",
            "spark.driver.extraJavaOptions": "-XX:+UseParallelGC" + jit,
            "spark.shuffle.compress": "false",
            # The job's one cache (its deduplicated telemetry) lives for one
            # run: encoding it costs more CPU than its memory is worth here.
            "spark.sql.inMemoryColumnarStorage.compressed": "false",
            "spark.sql.shuffle.partitions": str(parts),
            "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16m",
        })
    settings.update(dict(conf))
    for k, v in settings.items():
        b = b.config(k, v)
    with _stderr_to(log):
        spark = b.getOrCreate()
    spark.sparkContext.setLogLevel(level)
    if master and not master.startswith("local") and not under_submit:
        # A cluster: ship the code as spark-submit --py-files would (under
        # spark-submit, pass --py-files yourself: see the README).
        folder = tempfile.mkdtemp(prefix="frugalmqtt-")
        atexit.register(shutil.rmtree, folder, True)
        spark.sparkContext.addPyFile(package_zip(folder))
    return spark


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
