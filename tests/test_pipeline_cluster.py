"""The audit job on a real Spark cluster: a standalone master and worker from
the pyspark package on loopback, `python -m pipeline audit --master
spark://...` shipping the project's code to the executors, and the same
results as local mode on the same traces."""
import glob
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest

from host_sim.broker import free_port
from pipeline import gen, job

REPO = Path(__file__).resolve().parent.parent
SPARK_HOME = os.path.dirname(pyspark.__file__)
START_TIMEOUT_S = 90
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # as pipeline.spark's small=True


class Daemon:
    """A Spark standalone daemon (master or worker) run with spark-class,
    its log in workdir; stopped by its process id."""

    def __init__(self, workdir, name, cls, *args):
        self.log = Path(workdir) / (name + ".log")
        env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(workdir), SPARK_NO_DAEMONIZE="1")
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [os.path.join(SPARK_HOME, "bin", "spark-class"), cls, *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)

    def wait_for(self, text):
        end = time.time() + START_TIMEOUT_S
        while time.time() < end and self.proc.poll() is None:
            if text in self.log.read_text(errors="replace"):
                return
            time.sleep(0.2)
        pytest.fail("%s: no %r in %s:\n%s" % (self.proc.args[1], text, self.log,
                                              self.log.read_text(errors="replace")[-3000:]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """spark://127.0.0.1:PORT with one worker (1 core, 1 GB), starting; yields
    (url, workdir, ready) where ready() waits until the worker is registered."""
    d = tmp_path_factory.mktemp("spark-cluster")
    port = free_port()
    url = "spark://127.0.0.1:%d" % port
    started = []
    try:
        master = Daemon(d, "master", "org.apache.spark.deploy.master.Master", "--host",
                        "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()))
        started.append(master)
        # The worker retries until the master listens: both start at once.
        worker = Daemon(d, "worker", "org.apache.spark.deploy.worker.Worker", "--host",
                        "127.0.0.1", "--port", str(free_port()), "--webui-port",
                        str(free_port()), "--cores", "1", "--memory", "1g",
                        "--work-dir", str(d / "work"), url)
        started.append(worker)
        yield url, d, lambda: worker.wait_for("Successfully registered with master")
        assert len(_jvms(d)) >= 2  # the check below sees master and worker
    finally:
        for daemon in reversed(started):
            daemon.stop()
    # No JVM left behind: the executors the worker launched end with it.
    assert _jvms(d) == []


def _jvms(workdir):
    """Process ids of the daemons started here and of what they launched
    (all carry SPARK_LOG_DIR=workdir in their environment)."""
    mark = b"\0SPARK_LOG_DIR=%s\0" % str(workdir).encode()
    pids = []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        try:
            if mark in b"\0" + Path(environ).read_bytes():
                pids.append(int(environ.split("/")[2]))
        except OSError:
            pass  # gone, or not ours to read
    return pids


def test_audit_on_a_standalone_cluster_matches_local(cluster, spark, tmp_path):
    url, workdir, ready = cluster
    traces = str(tmp_path / "traces")
    gen.generate(traces, 3000, devices=20, seed=3)

    local = job.run(spark, traces, str(tmp_path / "local"), plots=False)  # while it starts
    ready()
    out = tmp_path / "cluster"
    env = dict(os.environ, PYTHONPATH="%s/firmware:%s" % (REPO, REPO),
               # a small executor in the 1 GB worker, settings for tiny data
               PYSPARK_SUBMIT_ARGS=" ".join(
                   "--conf " + shlex.quote("%s=%s" % kv) for kv in (
                       ("spark.executor.memory", "512m"),
                       ("spark.sql.shuffle.partitions", "4"),
                       ("spark.driver.extraJavaOptions", QUICK_JVM),
                       ("spark.executor.extraJavaOptions", QUICK_JVM))) + " pyspark-shell")
    r = subprocess.run([sys.executable, "-m", "pipeline", "audit", "--traces", traces,
                        "--out", str(out), "--master", url, "--no-plots"],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == (0 if local["ok"] else 3), r.stderr[-3000:]
    remote = json.loads((out / "summary.json").read_text())

    # The job ran on the cluster's executor, which fetched the shipped code.
    assert glob.glob(str(workdir / "work" / "app-*" / "*" / "frugalmqtt-pipeline.zip"))
    local = json.loads(json.dumps(local, default=str))  # as summary.json has it
    for key in ("runs", "by_qos", "by_fault_profile", "by_device", "violations", "ok", "gaps"):
        assert remote[key] == local[key], key
    assert local["by_qos"] and local["gaps"] is not None
    for w in ("1m", "1h"):
        got, want = (_windows(d / ("windows_%s" % w)) for d in (out, tmp_path / "local"))
        assert len(want) == remote["windows"][w]["rows"] == local["windows"][w]["rows"] > 0
        # Keys, counts, min and max identical; the mean as a sum in another
        # order may differ in its last bit.
        assert [r[:-1] for r in got] == [r[:-1] for r in want]
        assert [r[-1] for r in got] == pytest.approx([r[-1] for r in want], rel=1e-12)


def _windows(path):
    return sorted(tuple(r.values()) for r in pq.read_table(str(path)).to_pylist())
