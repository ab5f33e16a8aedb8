"""bench/codec_bench_mp.py (`make bench`'s sans-I/O rows) runs on the core
it measures: a few calls of each operation under CPython and the unix port,
its own check() first (each operation does what its name says), and on the
unix port each runs under heap_lock(). Rates are the bench's, not asserted."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostkit import micropython_binary  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "bench" / "codec_bench_mp.py"


@pytest.mark.parametrize("runtime", ["cpython", "micropython"])
def test_codec_bench_runs_on_the_core(runtime):
    env = dict(os.environ)
    if runtime == "micropython":
        cmd = [micropython_binary(), str(SCRIPT), "n=50", "repeats=1"]
        env["MICROPYPATH"] = str(REPO / "firmware")
    else:
        cmd = [sys.executable, str(SCRIPT), "n=50", "repeats=1"]
        env["PYTHONPATH"] = str(REPO / "firmware")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(l[len("@@RESULT "):]) for l in p.stdout.splitlines()
            if l.startswith("@@RESULT ")]
    ops = {r["op"]: r for r in rows if r["kind"] == "op"}
    assert sorted(ops) == ["publish_q0", "publish_q1_acked", "receive_q1"]
    if runtime == "micropython":
        for name, r in ops.items():
            assert r["heap_lock_ok"] is True and r["alloc_bytes_per_op"] == 0, name
