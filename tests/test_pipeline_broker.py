"""`pipeline collect` and the `mqtt` stream source against brokers set up as
a fleet's are: a password file (mosquitto_passwd), a TLS listener with a test
CA made here (openssl) that asks for a client certificate, MQTT 5. Secrets
come from a file or MQTT_PASSWORD, never the command line; a wrong password,
a wrong CA or a broker that is down is one line on stderr and exit 2."""
import ssl
import subprocess

import pytest

from frugalmqtt.client import MQTTClient
from host_sim import schema
from host_sim.broker import free_port
from pipeline import cli, stream
from pipeline.broker import Broker

T0 = 1767225600000
SECRET = "s3cret-Pa55"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_cert(d, name, ca=None, san=None):
    """A P-256 key and certificate name.pem/name.key in d: a self-signed CA
    (ca=None) or one issued by the CA named `ca`."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", name + ".key", "-subj", "/CN=" + name]
    if ca is None:
        openssl("req", "-x509", *key, "-out", name + ".pem", "-days", "2", cwd=d)
        return
    openssl("req", *key, "-out", name + ".csr",
            *(("-addext", "subjectAltName=" + san) if san else ()), cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-copy_extensions", "copy",
            cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Files: ca (the fleet's CA), server (127.0.0.1), client, other-ca; and
    the password file `passwd` (user `collector`) and `password` (its secret)."""
    d = tmp_path_factory.mktemp("pki")
    make_cert(d, "ca")
    make_cert(d, "other-ca")
    make_cert(d, "server", "ca", "IP:127.0.0.1,DNS:localhost")
    make_cert(d, "client", "ca")
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(d / "passwd"), "collector", SECRET],
                   check=True, capture_output=True)
    (d / "password").write_text(SECRET + "\n")
    return d


@pytest.fixture(scope="module")
def fleet_broker(broker_factory, pki):
    """A TLS listener asking for a client certificate, plus user names and passwords."""
    return broker_factory(
        "allow_anonymous false", "password_file %s" % (pki / "passwd"),
        "cafile %s" % (pki / "ca.pem"), "certfile %s" % (pki / "server.pem"),
        "keyfile %s" % (pki / "server.key"), "require_certificate true")


@pytest.fixture(scope="module")
def password_broker(broker_factory, pki):
    return broker_factory("allow_anonymous false", "password_file %s" % (pki / "passwd"))


@pytest.fixture(scope="module")
def broker_factory(tmp_path_factory):
    from conftest import _make_factory, _require_mosquitto
    started = []
    yield _make_factory(_require_mosquitto(), tmp_path_factory.mktemp("brokers"), started)
    for b in started:
        b.stop()


def tls_context(pki):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    return ctx


def publish(broker, seqs, pki, tls=False):
    dev = MQTTClient("dev1", broker.host, broker.port, user=b"collector", password=SECRET.encode(),
                     ssl=tls_context(pki) if tls else None)
    dev.connect()
    for s in seqs:
        dev.publish("fleet/dev1/temp", schema.encode_payload("dev1", s, T0 + s * 20000, "temp",
                                                            float(s)), qos=1)
    assert dev.flush(5000)
    dev.disconnect()


def collect(capsys, broker, out, *args, count=3, client="col"):
    """`pipeline collect` in this process: (exit status, stdout, stderr lines).
    count=0: connect, subscribe, stay a second (makes the persistent session)."""
    code = cli.main(["collect", "--port", str(broker.port), "--topic", "fleet/#", "--out", out,
                     "--client-id", client, "--count", str(count),
                     "--duration-s", "10" if count else "1",
                     "--idle-ms", "50", *args])
    o, e = capsys.readouterr()
    return code, o, [line for line in e.splitlines() if line.strip()]


def test_collect_with_a_password_file_and_from_the_environment(password_broker, pki, tmp_path,
                                                               capsys, monkeypatch):
    out = str(tmp_path / "traces")
    auth = ("--user", "collector", "--password-file", str(pki / "password"))
    assert collect(capsys, password_broker, out, *auth, count=0, client="col1")[0] == 0
    publish(password_broker, range(3), pki)
    code, stdout, err = collect(capsys, password_broker, out, *auth, client="col1")
    assert (code, stdout) == (0, "collected 3 rows into %s\n" % out)
    assert "3/3" in err[-1]  # the progress bar, done
    assert SECRET not in stdout + "".join(err)

    monkeypatch.setenv("MQTT_PASSWORD", SECRET)
    assert collect(capsys, password_broker, out, "--user", "collector", count=0,
                   client="col2")[0] == 0


def test_wrong_password_down_broker_and_password_on_the_command_line(password_broker, pki,
                                                                      tmp_path, capsys,
                                                                      monkeypatch):
    out = str(tmp_path / "traces")
    monkeypatch.setenv("MQTT_PASSWORD", "wrong-" + SECRET)
    code, stdout, err = collect(capsys, password_broker, out, "--user", "collector")
    assert (code, stdout) == (2, "")
    # mosquitto 2.0 answers a wrong password with 0x87, not 0x86
    assert err == ["pipeline collect: broker 127.0.0.1:%d refused the connection: not "
                   "authorized (reason code 0x87) as user collector with the password from "
                   "$MQTT_PASSWORD" % password_broker.port]
    assert SECRET not in err[0]

    down = free_port()
    code, err = cli_main(capsys, ["collect", "--port", str(down), "--out", out])
    assert (code, err) == (2, ["pipeline collect: no broker at 127.0.0.1:%d "
                               "(connection refused)" % down])
    code, err = cli_main(capsys, ["stream", "--mqtt", "127.0.0.1:%d" % down, "--out", out])
    assert (code, err) == (2, ["pipeline stream: no broker at 127.0.0.1:%d "
                               "(connection refused)" % down])

    with pytest.raises(SystemExit) as e:
        cli.main(["collect", "--out", out, "--password", SECRET])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--password-file" in err and SECRET not in err


def cli_main(capsys, argv):
    code = cli.main(argv)
    o, e = capsys.readouterr()
    return code, [line for line in e.splitlines() if line.strip()]


def test_collect_over_tls_with_a_client_certificate(fleet_broker, pki, tmp_path, capsys):
    out = str(tmp_path / "traces")
    tls = ("--user", "collector", "--password-file", str(pki / "password"),
           "--ca", str(pki / "ca.pem"), "--cert", str(pki / "client.pem"),
           "--key", str(pki / "client.key"))
    assert collect(capsys, fleet_broker, out, *tls, count=0)[0] == 0
    publish(fleet_broker, range(3), pki, tls=True)
    code, stdout, err = collect(capsys, fleet_broker, out, *tls)
    assert (code, stdout) == (0, "collected 3 rows into %s\n" % out), err

    # Another CA: the broker's certificate is refused, in one line.
    wrong_ca = tls[:4] + ("--ca", str(pki / "other-ca.pem")) + tls[6:]
    code, _, err = collect(capsys, fleet_broker, out, *wrong_ca)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("pipeline collect: TLS with broker 127.0.0.1:%d: the broker's "
                             "certificate was not accepted: " % fleet_broker.port), err
    assert err[0].endswith("self-signed certificate in certificate chain")

    # No client certificate where the broker asks for one: TLS 1.3 tells after the
    # handshake, by an alert or by closing the connection, whichever comes first.
    code, _, err = collect(capsys, fleet_broker, out, *tls[:6])
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("pipeline collect: ") and str(fleet_broker.port) in err[0], err
    assert "client certificate" in err[0] and "--cert" in err[0], err


def test_mqtt_source_over_tls_with_password(fleet_broker, pki, tmp_path, spark):
    # The reader reads the password file where it connects, beside the driver.
    b = Broker(fleet_broker.host, fleet_broker.port, user="collector",
               password_file=str(pki / "password"), ca=str(pki / "ca.pem"),
               cert=str(pki / "client.pem"), key=str(pki / "client.key"))
    out = str(tmp_path / "live")
    mqtt = (b, "fleet/#", "stream-tls")
    stream.run(spark, None, out, ("1h",), once=True, mqtt=mqtt)  # makes the session
    publish(fleet_broker, range(4), pki, tls=True)
    stream.run(spark, None, out, ("1h",), once=True, mqtt=mqtt)
    rows = spark.read.parquet(out + "/windows_1h").collect()
    assert [(r.device, r["count"], r["min"], r["max"]) for r in rows] == [("dev1", 4, 0.0, 3.0)]


def test_collect_and_stream_help_show_defaults(capsys):
    for cmd, shown in (("collect", ("broker host (default: 127.0.0.1)",
                                    "client id of the persistent session (default: "
                                    "pipeline-collect)",
                                    "rows per Parquet file at most (default: 500)",
                                    "MQTT 5.0 (5) or 3.1.1 (4) (default: 5)")),
                       ("stream", ("micro-batch interval (default: 10)",
                                   "with --mqtt: the topic filter (default: #)"))):
        with pytest.raises(SystemExit):
            cli.main([cmd, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for s in shown:
            assert s in text
        assert "--password " not in text  # refused, not offered
