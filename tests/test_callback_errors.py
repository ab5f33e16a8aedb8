"""An exception raised in an application callback, blocking and asyncio
client, CPython and the MicroPython unix port, against mosquitto: by default
it comes out of poll() / the client's task with its traceback; with
callback_errors="log" the traceback is printed and the client goes on. The
device side is tests/mp_api/callback_checks.py, run as a subprocess on both
runtimes so that what it printed can be read."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import BOTH, MP_TIMEOUT_S, parse_result, spawn  # noqa: E402


def _run(runtime, version, mosquitto, func):
    """A broker, the tag of the run, and (result, everything printed) of
    callback_checks.func against it."""
    broker = mosquitto()
    tag = "%s-%s-%d" % (func, runtime[:2], version)
    return (broker, tag) + _output(runtime, func, broker, tag, version)


def _output(runtime, func, broker, tag, version):
    p = spawn(runtime, "callback_checks", func, broker.host, broker.port, tag, version)
    try:
        out, err = p.communicate(timeout=MP_TIMEOUT_S)
    except Exception:
        p.kill()
        raise
    text = out.decode("utf-8", "replace") + err.decode("utf-8", "replace")
    if p.returncode != 0:
        pytest.fail("%s %s (exit %s):\n%s" % (runtime, func, p.returncode, text[-6000:]),
                    pytrace=False)
    return parse_result(runtime + " " + func + "\n" + text, out.decode()), text


def _tracebacks(text, what):
    """Lines naming an exception `what` printed with a traceback before it."""
    lines = text.splitlines()
    return [l for i, l in enumerate(lines) if l.endswith(what) and
            any(x.startswith("Traceback") for x in lines[:i])]


@BOTH
def test_blocking_client(runtime, version, mosquitto):
    b, tag, r, text = _run(runtime, version, mosquitto, "blocking")
    assert r["got"] == 5
    # the messages whose callback raised were acknowledged all the same
    assert b.log().count("Received PUBACK from %s-b" % tag) == 5
    # raised ones left poll() (the check caught them): printed only in "log" mode
    assert len(_tracebacks(text, "boom-msg")) == 1, text


@BOTH
def test_async_client_raise(runtime, version, mosquitto):
    b, tag, r, text = _run(runtime, version, mosquitto, "async_raise")
    assert r["caught"] == 3
    log = b.log()
    assert "Received PUBACK from %s-a" % tag in log  # acknowledged before stopping
    assert "Received DISCONNECT from %s-a" % tag not in log
    # the client's task ended with it: asyncio reported it with its traceback
    assert _tracebacks(text, "boom-msg"), text


@BOTH
def test_async_client_log(runtime, version, mosquitto):
    b, tag, r, text = _run(runtime, version, mosquitto, "async_log")
    assert r["got"] == 2
    for what in ("boom-connect", "boom-msg", "boom-disconnect"):
        assert len(_tracebacks(text, what)) == 1, (what, text)
    assert len(_tracebacks(text, "boom-done")) == 2, text


@BOTH
def test_publish_only_profiles(runtime, version, mosquitto):
    b, tag, r, text = _run(runtime, version, mosquitto, "publishers")
    for name in ("lite", "telemetry"):
        assert r[name] == {"default": "raise", "raised": ["ValueError", "boom-raised", 0, True],
                           "flushed": True, "left": 0}, (name, r)
        log = b.log()
        assert log.count("Sending PUBACK to %s-%s " % (tag, name)) == 2
        assert log.count("Sending PUBCOMP to %s-%s " % (tag, name)) == 1
    # "log": each printed with its traceback; "raise": left poll(), caught, never printed
    assert len(_tracebacks(text, "boom-logged")) == 4, text
    assert not _tracebacks(text, "boom-raised"), text
