"""tools/deploy.py for real: the MicroPython unix port acting as a board on a
pseudo-terminal (tools/ptyboard.py), mpremote copying over it, the board
rebooting into the telemetry firmware, which publishes to mosquitto."""
import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from host_sim import schema
from hostkit import PahoSubscriber

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import deploy  # noqa: E402
import profiles  # noqa: E402
import release  # noqa: E402


@pytest.fixture
def ptyboard(tmp_path):
    root = tmp_path / "root"
    link = tmp_path / "ttyBOARD"
    log = open(tmp_path / "ptyboard.log", "w+")
    proc = subprocess.Popen([sys.executable, str(REPO / "tools" / "ptyboard.py"), "--root",
                             str(root), "--link", str(link)], stdout=log,
                            stderr=subprocess.STDOUT)
    end = time.monotonic() + 10
    while "boot 1" not in (tmp_path / "ptyboard.log").read_text():
        assert proc.poll() is None and time.monotonic() < end, \
            (tmp_path / "ptyboard.log").read_text()
        time.sleep(0.05)
    yield root, link, tmp_path / "ptyboard.log"
    proc.terminate()
    proc.wait(5)
    log.close()


def telemetry_config(path, broker, client_id, samples):
    cfg = {"client_id": client_id, "wifi": {"ssid": "lab", "password": "$TEST_WIFI_PASSWORD"},
           "broker": {"host": broker.host, "port": broker.port}, "qos": 1, "period_ms": 100,
           "samples": samples, "status_every": 3, "sensors": ["sim_temp"]}
    path.write_text(json.dumps(cfg))
    return path


def run_deploy(link, config, until, *more):
    """tools/deploy.py as a user runs it: the port and the board, nothing else."""
    return subprocess.run([sys.executable, str(REPO / "tools" / "deploy.py"), "--port", str(link),
                           "--board", "unix", "--config", str(config), "--until", until,
                           "--tail", "30", *more], capture_output=True, text=True, timeout=90,
                          env=dict(os.environ, TEST_WIFI_PASSWORD="s3cret"))


def boots(board_log):
    return [l.split(": ", 2)[2] for l in board_log.read_text().splitlines() if ": boot " in l]


def test_deploy_copies_resets_and_tails_the_firmware(tmp_path, ptyboard, mosquitto):
    root, link, board_log = ptyboard
    broker = mosquitto()
    cfg = telemetry_config(tmp_path / "config.json", broker, "pty-1", samples=3)
    sub = PahoSubscriber(broker, "sensors/pty-1/temp", version=5, qos=1)
    try:
        r = run_deploy(link, cfg, "telemetry: done")
        msgs = sub.wait(lambda ms: len(ms) >= 3, "three readings")
    finally:
        sub.stop()
    assert r.returncode == 0, r.stdout + r.stderr + board_log.read_text()
    # the tail: timestamped lines from the rebooted board, ending at --until
    assert "deploy: copied; soft reset" in r.stderr
    lines = r.stdout.splitlines()
    assert any(l.endswith("wifi: joined lab as 127.0.0.1 (attempt 1)") for l in lines)
    assert any(l.endswith("telemetry: done, 3 samples up to seq 3, 0 dropped") for l in lines)
    # mpremote's soft reset came back in the raw REPL; deploy's booted main.py
    assert boots(board_log) == ["REPL", "REPL (raw REPL)", "-i main.py"]
    assert [schema.decode_payload(m.payload)[1] for m in msgs] == [0, 1, 2]
    # what is on the board: the base profile as .mpy, firmware, board, config
    on_board = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    expected = {"lib/frugalmqtt/%s.mpy" % m for m in profiles.BASE}
    expected |= {m + ".mpy" for m in profiles.APP}
    expected |= {"board.mpy", "network.mpy", "main.py", "config.json", "seq.txt"}
    assert on_board == expected
    assert json.loads((root / "config.json").read_text())["wifi"]["password"] == "s3cret"


def test_second_deploy_interrupts_the_running_firmware(tmp_path, ptyboard, mosquitto):
    """The firmware runs for ever; deploying again stops it with Ctrl-C, as on a board."""
    root, link, board_log = ptyboard
    broker = mosquitto()
    sub = PahoSubscriber(broker, "sensors/+/temp", version=5, qos=1)
    try:
        forever = telemetry_config(tmp_path / "forever.json", broker, "pty-a", samples=0)
        r = run_deploy(link, forever, "mqtt: connected")
        assert r.returncode == 0, r.stdout + r.stderr + board_log.read_text()
        sub.wait(lambda ms: len(ms) >= 2, "pty-a running")
        again = telemetry_config(tmp_path / "again.json", broker, "pty-b", samples=2)
        r = run_deploy(link, again, "telemetry: done")
        assert r.returncode == 0, r.stdout + r.stderr + board_log.read_text()
        sub.wait(lambda ms: any(m.topic == "sensors/pty-b/temp" for m in ms), "pty-b")
    finally:
        sub.stop()
    assert "Ctrl-C while code runs: KeyboardInterrupt" in board_log.read_text()
    assert boots(board_log) == ["REPL", "REPL (raw REPL)", "-i main.py",  # first deploy
                                "REPL (raw REPL)", "-i main.py"]  # second: main.py stopped
    assert json.loads((root / "config.json").read_text())["client_id"] == "pty-b"


def test_ptyboard_ctrl_c_stops_the_program_and_returns_to_the_repl(tmp_path):
    import serial
    root = tmp_path / "root"
    root.mkdir()
    (root / "main.py").write_text("import time\nwhile True:\n    print('busy')\n"
                                  "    time.sleep_ms(50)\n")
    link = tmp_path / "ttyBOARD"
    board = subprocess.Popen([sys.executable, str(REPO / "tools" / "ptyboard.py"), "--root",
                              str(root), "--link", str(link)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not link.exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        s = serial.serial_for_url(str(link), 115200, timeout=0.2)

        def read_until(text):
            got, end = b"", time.monotonic() + 10
            while text not in got and time.monotonic() < end:
                got += s.read(256)
            assert text in got, got
            return got

        read_until(b"busy")
        s.write(b"\x03")
        out = read_until(b">>> ")
        assert b"KeyboardInterrupt" in out
        s.write(b"print(6 * 7)\r")  # the REPL answers: the program is over
        assert b"42" in read_until(b"42")
        s.close()
    finally:
        board.terminate()
        board.wait(5)


def test_deploy_while_a_monitor_holds_the_port_says_it_is_in_use(tmp_path, ptyboard):
    import monitor
    root, link, _ = ptyboard
    cfg = tmp_path / "config.json"
    cfg.write_text((REPO / "boards" / "unix" / "config.sample.json").read_text())
    held = monitor.open_port(str(link), 115200)  # as `make monitor` in another terminal
    try:
        r = run_deploy(link, cfg, "never")
    finally:
        held.close()
    assert r.returncode == 2
    assert "in use by another program" in r.stderr, r.stderr
    assert not (root / "main.py").exists()


def test_missing_port_is_reported_with_the_ports_there_are(tmp_path):
    import serial.tools.list_ports
    cfg = tmp_path / "config.json"
    cfg.write_text((REPO / "boards" / "unix" / "config.sample.json").read_text())
    r = subprocess.run([sys.executable, str(REPO / "tools" / "deploy.py"), "--port",
                        "/dev/ttyNOPE9", "--board", "unix", "--config", str(cfg)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "no serial port /dev/ttyNOPE9: nothing at that path" in r.stderr
    assert "in use" not in r.stderr
    ports = [p.device for p in serial.tools.list_ports.comports()]
    for dev in ports:
        assert dev in r.stderr
    if not ports:
        assert "no serial ports on this machine" in r.stderr


@pytest.fixture
def http_server():
    """What `python -m http.server -d DIR -b 127.0.0.1 PORT` serves, in a thread;
    yields (start(dir) -> base URL, the paths requested)."""
    requested = []
    servers = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *args):
            requested.append(self.path)

    def start(directory):
        srv = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return "http://127.0.0.1:%d" % srv.server_address[1]

    yield start, requested
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_mip_installs_the_lite_release_as_mpy_and_it_publishes(tmp_path, ptyboard, mosquitto,
                                                               http_server):
    """make release, served over HTTP; `mpremote mip install URL` puts the lite
    profile's .mpy files in the board's /lib; the board imports them and publishes."""
    root, link, _ = ptyboard
    start, requested = http_server
    release.release(tmp_path / "release", log=lambda m: None)
    url = start(tmp_path / "release") + "/armv6m/package-lite.json"
    r = subprocess.run([deploy.mpremote(), "connect", str(link), "mip", "install", url],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lite = profiles.PROFILES["lite"]
    # the board's lib dir (first */lib on its sys.path, as on a device) holds the .mpy files
    assert {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} == {
        "lib/frugalmqtt/%s.mpy" % m for m in lite}
    assert sorted(requested) == sorted(["/armv6m/package-lite.json"] + [
        "/armv6m/frugalmqtt/%s.mpy" % m for m in lite])
    broker = mosquitto()
    sub = PahoSubscriber(broker, "mip/lite", version=5, qos=1)
    program = ("import frugalmqtt.lite as lite\n"
               "p = lite.Publisher('mip-lite', %r, port=%d)\n"
               "p.connect()\n"
               "p.publish(b'mip/lite', b'from .mpy', qos=1)\n"
               "p.flush(5000)\n"
               "p.close()\n"
               "print('loaded', lite.__file__)\n" % (broker.host, broker.port))
    try:
        r = subprocess.run([deploy.mpremote(), "connect", str(link), "exec", program],
                           capture_output=True, text=True, timeout=60)
        sub.wait_for(b"from .mpy")
    finally:
        sub.stop()
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "loaded %s/lib/frugalmqtt/lite.mpy" % root.resolve()


def test_config_values_come_from_the_environment(tmp_path):
    cfg = {"wifi": {"password": "$WIFI_PASSWORD"}, "list": ["$A", "x$A", 3], "n": 5}
    assert deploy.expand(cfg, {"WIFI_PASSWORD": "pw", "A": "a"}) == {
        "wifi": {"password": "pw"}, "list": ["a", "x$A", 3], "n": 5}
    with pytest.raises(deploy.DeployError, match=r"\$WIFI_PASSWORD"):
        deploy.expand(cfg, {"A": "a"})


def test_stage_frozen_sends_only_main_config_and_ca(tmp_path):
    (tmp_path / "ca.der").write_bytes(b"\x30\x82")
    cfg = json.loads((REPO / "boards" / "esp32" / "config.sample.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    env = {"WIFI_SSID": "s", "WIFI_PASSWORD": "p", "MQTT_HOST": "h", "MQTT_PASSWORD": "m"}
    files = deploy.stage("esp32", "base", tmp_path / "config.json", tmp_path / "out",
                         tmp_path / "no-build", frozen=True, env=env)
    assert sorted(files) == ["ca.der", "config.json", "main.py"]
    with pytest.raises(deploy.DeployError, match="ca.der"):
        (tmp_path / "ca.der").unlink()
        deploy.stage("esp32", "base", tmp_path / "config.json", tmp_path / "out",
                     tmp_path / "no-build", frozen=True, env=env)


def test_missing_board_config_says_what_to_do(tmp_path):
    with pytest.raises(deploy.DeployError, match="config.sample.json"):
        deploy.config_path("esp32", tmp_path / "nope.json")
