"""Running the simulated device program (host_sim/device.py) on either
runtime: in-process on CPython (a thread) or as a separate MicroPython
unix-port process. Both give the same event dicts, collected in `events`
as they come (a runner shows progress from them)."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from . import device

REPO = Path(__file__).resolve().parent.parent
MP_HEAPSIZE = "256k"


def micropython_binary():
    """The unix port installed by `make setup` (next to this interpreter)."""
    path = Path(sys.executable).parent / "micropython"
    if os.access(path, os.X_OK):
        return str(path)
    found = __import__("shutil").which("micropython")
    if not found:
        raise RuntimeError("micropython not found next to %s or on PATH; run `make setup`"
                           % sys.executable)
    return found


class DeviceRun:
    """One device program running; `events` fills as it goes."""

    def __init__(self, runtime, program, params):
        self.runtime = runtime
        self.program = program
        self.params = params
        self.events = []
        self.error = None  # an exception text or the process's stderr on failure
        self.returncode = None
        self.proc = None
        self.thread = None

    def start(self):
        if self.runtime == "cpython":
            self.thread = threading.Thread(target=self._inprocess, daemon=True)
        else:
            env = dict(os.environ)
            env["MICROPYPATH"] = os.pathsep.join([str(REPO / "firmware"), str(REPO)])
            self.proc = subprocess.Popen(
                [micropython_binary(), "-X", "heapsize=" + MP_HEAPSIZE,
                 str(REPO / "host_sim" / "device.py"), self.program, "-"],
                cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                stdin=subprocess.PIPE)
            self.proc.stdin.write((json.dumps(self.params) + "\n").encode())
            self.proc.stdin.close()
            self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _inprocess(self):
        try:
            device.run(self.program, self.params, self.events.append)
            self.returncode = 0
        except Exception as e:
            import traceback
            self.error = traceback.format_exc()
            self.returncode = 1

    def _read(self):
        for line in self.proc.stdout:
            line = line.decode("utf-8", "replace")
            if line.startswith("@@ "):
                self.events.append(json.loads(line[3:]))
        self.returncode = self.proc.wait()
        err = self.proc.stderr.read().decode("utf-8", "replace")
        if self.returncode:
            self.error = err or "exit code %d" % self.returncode

    @property
    def done(self):
        return self.thread is not None and not self.thread.is_alive()

    def join(self, timeout=None):
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.kill()
            self.thread.join(5)
            self.error = (self.error or "") + "timed out after %ss" % timeout
        return self

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()

    def of(self, ev):
        return [e for e in self.events if e["ev"] == ev]

    @property
    def ended(self):
        return bool(self.events) and self.events[-1]["ev"] == "end"


def run_device(runtime, program, params, timeout=60):
    return DeviceRun(runtime, program, params).start().join(timeout)
