"""What every profile takes alike (lite, telemetry, the full client, the
asyncio client, the umqtt facade), against a real mosquitto on CPython and
the MicroPython unix port: a will as a tuple or client.Will(); ssl={...}
(umqtt's ssl_params) made a verifying context by frugalmqtt.tls, a PEM CA
converted to DER on MicroPython, ssl=True without a CA refused with what
to pass; an IPv6 literal and a name that resolves to ::1 only; the full
client's publish before connect() with reconnect=False. Device side:
tests/mp_api/connect_checks.py."""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import (BOTH, Observer, by_topic, certs, free_port,  # noqa: E402,F401
                     parse_result, run_check, spawn, tls_listener, MP_TIMEOUT_S)

PROFILES = ("lite", "telemetry", "full", "asyncio", "simple")


def _tag(name, runtime, version):
    return "co%s-%s-%d" % (name, runtime[:2], version)


@BOTH
def test_will_as_tuple_or_Will_in_every_profile(runtime, version, mosquitto):
    b = mosquitto()
    tag = _tag("w", runtime, version)
    obs = Observer(b, tag + "/#", version)
    try:
        run_check(runtime, "connect_checks", "wills", b.host, b.port, tag, version)
        msgs = obs.wait(lambda ms: len(ms) >= 2 * len(PROFILES), "every will")
    finally:
        obs.stop()
    for p in PROFILES:
        for kind in ("tuple", "Will"):
            assert by_topic(msgs, "%s/%s/%s" % (tag, p, kind)) == [(b"gone", 1)], (p, kind)


@BOTH
def test_tls_from_ssl_params_in_every_profile(runtime, version, mosquitto, certs):
    port = free_port()
    b = mosquitto(*tls_listener(port, certs))
    tag = _tag("t", runtime, version)
    obs = Observer(b, tag + "/#", version)  # on the plain listener
    try:
        r = run_check(runtime, "connect_checks", "tls", b.host, port, tag, version,
                      str(certs / "ca.crt"), str(certs / "ca.der"), str(certs / "other.crt"))
        msgs = obs.wait(lambda ms: len(ms) >= 3 * len(PROFILES), "every TLS publish")
    finally:
        obs.stop()
    assert r["done"] == list(PROFILES)
    pem, other = (certs / "ca.crt").read_bytes(), (certs / "other.crt").read_bytes()
    der = (certs / "ca.der").read_bytes()
    sizes = [(b"%d" % len(x), 1) for x in (pem, pem + other, der)]
    for p in PROFILES:
        assert by_topic(msgs, "%s/%s" % (tag, p)) == sizes, p
    log = b.log()
    assert "as %s-bad" % tag not in log and "as %s-nv " % tag in log


def _has_ipv6_loopback():
    import socket
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@BOTH
def test_ipv6_literal_in_every_profile(runtime, version, mosquitto):
    # the machines this runs on have ::1 (CI's too): say so if one has not
    assert _has_ipv6_loopback(), "this machine has no IPv6 loopback (::1)"
    port6 = free_port()
    b = mosquitto("listener %d ::1" % port6)
    tag = _tag("6", runtime, version)
    obs = Observer(b, tag + "/#", version)
    try:
        r = run_check(runtime, "connect_checks", "publish_each", "::1", port6, tag, version)
        msgs = obs.wait(lambda ms: len(ms) >= len(PROFILES), "every publish over IPv6")
    finally:
        obs.stop()
    assert r["done"] == list(PROFILES)
    for p in PROFILES:
        assert by_topic(msgs, "%s/%s" % (tag, p)) == [(p.encode(), 1)]
    assert "New connection from ::1" in b.log()


V6_NAME = "v6only.frugal.test"
# Run a command in a private mount namespace whose /etc/hosts is the file $0
# (unshare makes the namespace's mounts private: the machine's stays as it is).
IN_HOSTS = ["unshare", "-m", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"']


def _private_hosts(tmp_path):
    """A hosts file naming V6_NAME ::1 only, and the command prefix that runs
    a program with it as /etc/hosts. Needs root (CI and the dev machines run
    as root): fails, saying so, where unshare is not permitted."""
    hosts = tmp_path / "hosts"
    hosts.write_text("::1 %s\n" % V6_NAME)
    wrap = IN_HOSTS + [str(hosts)]
    probe = subprocess.run(wrap + ["getent", "ahosts", V6_NAME], capture_output=True, timeout=30)
    if probe.returncode != 0 or b"::1" not in probe.stdout:
        pytest.fail("cannot give a test program its own /etc/hosts (unshare -m and mount "
                    "--bind need root): %r %r" % (probe.stdout, probe.stderr), pytrace=False)
    return wrap


@BOTH
def test_aaaa_name_in_every_profile(runtime, version, mosquitto, tmp_path):
    # a name that resolves to ::1 only, from /etc/hosts in a private mount
    # namespace (no name resolves to ::1 alone on these machines)
    assert _has_ipv6_loopback(), "this machine has no IPv6 loopback (::1)"
    wrap = _private_hosts(tmp_path)
    port6 = free_port()
    b = mosquitto("listener %d ::1" % port6)  # on port6, nothing listens on 127.0.0.1
    tag = _tag("n", runtime, version)
    obs = Observer(b, tag + "/#", version)
    try:
        proc = spawn(runtime, "connect_checks", "publish_each_v6_name", V6_NAME, port6, tag,
                     version, wrap=wrap)
        out, err = proc.communicate(timeout=MP_TIMEOUT_S)
        r = parse_result("%s connect_checks.publish_each_v6_name (exit %s)\n%s\n%s" % (
            runtime, proc.returncode, out.decode(errors="replace")[-4000:],
            err.decode(errors="replace")[-3000:]), out.decode(errors="replace"))
        msgs = obs.wait(lambda ms: len(ms) >= len(PROFILES), "every publish by an AAAA name")
    finally:
        obs.stop()
    assert r["done"] == list(PROFILES) and r["addresses"] >= 1
    for p in PROFILES:
        assert by_topic(msgs, "%s/%s" % (tag, p)) == [(p.encode(), 1)]
    assert b.log().count("New connection from ::1") >= len(PROFILES)


@BOTH
def test_publish_before_connect_raises_without_reconnect(runtime, version, mosquitto):
    b = mosquitto()
    tag = _tag("b", runtime, version)
    obs = Observer(b, tag + "/#", version)
    try:
        r = run_check(runtime, "connect_checks", "publish_before_connect", b.host, b.port, tag,
                      version)
        msgs = obs.wait(lambda ms: len(ms) >= 2, "the publishes after connect")
    finally:
        obs.stop()
    assert r == {"full": [0, 1, 2, -1], "asyncio": [0, 1, 2, -1]}
    for p in ("full", "asyncio"):
        assert by_topic(msgs, tag + "/" + p) == [(b"late", 1)]
