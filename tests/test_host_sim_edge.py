"""The scripted broker peer (host_sim/scripted.py) plays packets a real broker
never sends to a real device, on CPython and as a MicroPython unix-port
process; each case ends as the spec says (host_sim/edge.py holds the cases
and their checks: reason code, DISCONNECT or close, no crash, the device
connects again and keeps working)."""
import pytest

from host_sim import edge
from host_sim.scripted import ScriptedBroker


@pytest.mark.parametrize("runtime", ["cpython", "micropython"])
@pytest.mark.parametrize("name,version", edge.all_cases())
def test_edge_case(name, version, runtime):
    problems, broker, run = edge.run_case(name, version, runtime)
    assert problems == [], "\n".join(problems + ["peer %d: %s" % (p.idx, p.names())
                                                 for p in broker.peers] + [repr(run.events)])


def test_a_check_fails_when_the_device_misbehaves():
    # the checks are not vacuous: a "device" that ignores a QoS 3 PUBLISH and
    # stays connected is reported
    import socket
    b = ScriptedBroker([edge.CASES["qos3"][1][0]])
    try:
        s = socket.create_connection((b.host, b.port))
        s.sendall(b"\x10\x0d\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x00")  # CONNECT v5, no id
        assert b.wait_peers(1)
        problems = edge.closing(0x81, timeout=0.5)(b, type("R", (), {"of": lambda self, e: []})(), 5)
        assert any("kept the connection open" in p for p in problems), problems
        assert any("DISCONNECT" in p for p in problems), problems
        s.close()
    finally:
        b.close()
