"""One place that builds the SparkSession, with the settings this machine needs
(see ../shared/notes/platform.md): the venv's python for workers, loopback,
UTC, no UI, quiet logs; on a cluster, the project's code shipped to the
executors."""
import atexit
import os
import shutil
import sys
import tempfile

DEFAULT_MASTER = "local[*]"


def session(master=None, app="frugalmqtt-pipeline", small=False, conf=()):
    """A SparkSession on `master` (local[*] unless given; under spark-submit
    the submitted master is kept). `small=True` tunes for tiny test data."""
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
    }
    if small:
        settings.update({
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        })
    elif (master or DEFAULT_MASTER).startswith("local") and not under_submit:
        # One machine: Spark's 200 shuffle partitions are 200 tiny tasks per
        # stage (5-15x slower here); a few per core is plenty.
        settings["spark.driver.memory"] = "2g"
        settings["spark.sql.shuffle.partitions"] = str(4 * (os.cpu_count() or 1))
    settings.update(dict(conf))
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if master and not master.startswith("local") and not under_submit:
        # A cluster: ship the code as spark-submit --py-files would (under
        # spark-submit, pass --py-files yourself: see the README).
        folder = tempfile.mkdtemp(prefix="frugalmqtt-")
        atexit.register(shutil.rmtree, folder, True)
        spark.sparkContext.addPyFile(package_zip(folder))
    return spark


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
