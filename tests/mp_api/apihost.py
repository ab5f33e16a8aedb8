"""Host side (CPython + pytest only) of the API tests: run a check function of
tests/mp_api in-process or under the MicroPython unix port, and watch the
broker with an independent paho-mqtt subscriber.

A check module (aclient_checks, simple_checks, ...) holds plain functions that
run unchanged on both runtimes; each returns a JSON-friendly dict. Under
MicroPython, tests/mp_api/mp_run.py calls it and prints "@@RESULT <json>".
"""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# re-exported for the API tests
from hostkit import (PahoSubscriber as Observer, free_port,  # noqa: E402,F401
                     micropython_binary)

REPO = Path(__file__).resolve().parent.parent.parent
MP_DIR = REPO / "tests" / "mp_api"
EXAMPLES = REPO / "examples"
RUNNER = MP_DIR / "mp_run.py"
# The checks compile the device package from .py source (the compiler needs
# far more than the .mpy a device runs), and connect_checks runs every
# profile in one interpreter: about 200 KB at the peak, measured, and
# more where a TLS session fragments the heap first. What a device needs
# is measured by make compare and the heap_lock tests, not here.
MP_HEAPSIZE = "512k"
MP_TIMEOUT_S = 60
RUNTIMES = ("cpython", "micropython")
BOTH = pytest.mark.parametrize("runtime,version", [(r, v) for r in RUNTIMES for v in (4, 5)])


def mp_env():
    env = dict(os.environ)
    # .frozen holds the port's asyncio; examples/ for the umqtt-style program
    env["MICROPYPATH"] = os.pathsep.join([str(REPO / "firmware"), str(MP_DIR), str(EXAMPLES),
                                          ".frozen"])
    return env


def mp_command(module, func, args):
    return [micropython_binary(), "-X", "heapsize=" + MP_HEAPSIZE, str(RUNNER), module, func,
            json.dumps(list(args))]


def spawn(runtime, module, func, *args, wrap=()):
    """Start module.func(*args) in a new interpreter of `runtime` (a Popen
    with stdout/stderr pipes), for programs the test talks to while they run;
    `wrap`: a command that runs the interpreter's (e.g. unshare)."""
    if runtime == "micropython":
        cmd, env = mp_command(module, func, args), mp_env()
    else:
        cmd = [sys.executable, str(RUNNER), module, func, json.dumps(list(args))]
        env = dict(os.environ)
        # this tree's device and host packages first, not the editable install's
        env["PYTHONPATH"] = os.pathsep.join([str(MP_DIR), str(EXAMPLES), str(REPO / "firmware"),
                                             str(REPO)])
    return subprocess.Popen(list(wrap) + cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def parse_result(proc_desc, out):
    results = [l[len("@@RESULT "):] for l in out.splitlines() if l.startswith("@@RESULT ")]
    if len(results) != 1:
        pytest.fail("no result from %s" % proc_desc, pytrace=False)
    return json.loads(results[0])


def run_check(runtime, module, func, *args):
    """Call module.func(*args) under `runtime`; return its dict."""
    if runtime == "cpython":
        mod = __import__(module)
        return getattr(mod, func)(*args)
    cmd = mp_command(module, func, args)
    try:
        proc = subprocess.run(cmd, cwd=str(REPO), env=mp_env(), capture_output=True,
                              timeout=MP_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail("micropython %s.%s timed out after %ss\nstdout:\n%s\nstderr:\n%s"
                    % (module, func, MP_TIMEOUT_S, e.stdout, e.stderr), pytrace=False)
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    desc = "micropython %s.%s (exit %s)\nstdout:\n%s\nstderr:\n%s" % (
        module, func, proc.returncode, out[-6000:], err[-3000:])
    if proc.returncode != 0:
        pytest.fail(desc, pytrace=False)
    return parse_result(desc, out)





def _openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=30)


def make_certs(d):
    """A test CA, a server certificate for 127.0.0.1 signed by it, and an
    unrelated CA; the CAs also in DER (what MicroPython's cadata takes)."""
    d = Path(d)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for name in ("ca", "other"):
        _openssl("req", "-x509", *ec, "-keyout", str(d / (name + ".key")),
                 "-out", str(d / (name + ".crt")), "-days", "2", "-subj", "/CN=" + name)
        _openssl("x509", "-in", str(d / (name + ".crt")), "-outform", "der",
                 "-out", str(d / (name + ".der")))
    _openssl("req", *ec, "-keyout", str(d / "srv.key"), "-out", str(d / "srv.csr"),
             "-subj", "/CN=localhost")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", str(d / "srv.csr"), "-CA", str(d / "ca.crt"),
             "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-out", str(d / "srv.crt"),
             "-days", "2", "-extfile", str(d / "ext.cnf"))
    return d


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """make_certs() once per test module."""
    return make_certs(tmp_path_factory.mktemp("certs"))


def tls_listener(port, certs):
    """mosquitto config lines for a TLS listener."""
    return ["listener %d 127.0.0.1" % port, "cafile %s" % (certs / "ca.crt"),
            "certfile %s" % (certs / "srv.crt"), "keyfile %s" % (certs / "srv.key")]


class Background:
    """run_check() in a thread, while the test acts on the broker."""

    def __init__(self, *args):
        self.value = self.error = None
        self.t = threading.Thread(target=self._run, args=args, daemon=True)
        self.t.start()

    def _run(self, *args):
        try:
            self.value = run_check(*args)
        except BaseException as e:  # pytest.fail() too
            self.error = e

    def result(self, timeout=MP_TIMEOUT_S + 5):
        self.t.join(timeout)
        assert not self.t.is_alive(), "the check did not finish"
        if self.error is not None:
            raise self.error
        return self.value


def by_topic(msgs, topic):
    """[(payload, qos)] received on topic, in arrival order."""
    return [(m[1], m[2]) for m in msgs if m[0] == topic]
