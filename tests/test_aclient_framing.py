"""AMQTTClient reads without blocking the event loop: a packet split across
TCP segments (its fixed header too) is framed across wake-ups, and a fixed
header announcing more than max_packet is refused before its body is read
(DISCONNECT 0x95 on 5.0, close on 3.1.1). A scripted broker sends the
pieces; the device side (tests/mp_api/aclient_checks.framing) runs on
CPython and on the MicroPython unix port."""
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import BOTH, RUNTIMES, run_check  # noqa: E402
from frugalmqtt_host import packets  # noqa: E402
from host_sim.scripted import ScriptedBroker  # noqa: E402

PAUSE_S = 0.15


def _script(payload):
    def script(peer):
        peer.expect("CONNECT")
        peer.send(packets.connack(peer.version))
        raw = packets.publish(peer.version, "sp/lit", payload, qos=1, pid=7)
        assert raw[1] & 0x80  # a two-byte remaining length, split between its bytes
        for piece in (raw[:1], raw[1:2], raw[2:40], raw[40:]):
            time.sleep(PAUSE_S)
            peer.send(piece)
        peer.expect("PUBACK", pid=7)
        peer.send(b"\x30\xad\x02")  # a QoS 0 PUBLISH of 301 bytes: one over max_packet
        peer.wait_closed()
    return script


@BOTH
def test_split_packet_and_oversized_header(runtime, version):
    payload = b"".join(b"%03d" % i for i in range(60))  # 180 bytes
    b = ScriptedBroker([_script(payload)])
    try:
        r = run_check(runtime, "aclient_checks", "framing", b.host, b.port, "fr", version)
        assert b.errors == []
        peer = b.peers[0]
        assert peer.wait_closed()
    finally:
        b.close()
    assert r["got"] == [["sp/lit", payload.decode(), 1, False]], r
    assert r["error"] == "MQTTError" and r["reason"] == 0x95
    assert r["ticks"] >= 20, r  # the loop ran during the 4 pauses of 150 ms
    if version == 5:
        assert [e["reason"] for e in peer.disconnects()] == [0x95]
    else:
        assert peer.disconnects() == []


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_server_disconnect_properties(runtime):
    """5.0: the server's DISCONNECT reason and properties reach on_disconnect."""
    def script(peer):
        peer.expect("CONNECT")
        peer.send(packets.connack(peer.version))
        time.sleep(0.1)
        peer.send(packets.disconnect(5, 0x8B, [(0x1F, "going down"), (0x26, ("k", "v"))]))
        peer.wait_closed()

    b = ScriptedBroker([script])
    try:
        r = run_check(runtime, "aclient_checks", "server_disconnect", b.host, b.port, "sd", 5)
        assert b.errors == []
    finally:
        b.close()
    assert r == {"seen": [[0x8B, "going down", [["k", "v"]]]], "error": "ServerError"}, r
