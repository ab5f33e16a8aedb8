"""The scripted-broker edge cases: packets a real broker never sends, played
to a real device (host_sim/device.py `edge` program, CPython or MicroPython),
each with the outcome the spec requires. `run_case(case, version, runtime)`
returns a list of problems (empty: the device did what the spec says).

Every case that ends the connection is followed by a well-behaved connection
(scripted.serve_forever): the device must connect again and keep working,
which is how "no crash" is checked; the MicroPython device runs with a
256 KB heap, so an allocation sized by the peer would end it with MemoryError.
"""
import time
import tracemalloc

from frugalmqtt_host import packets
from .devices import run_device
from .scripted import ScriptedBroker, serve_forever

HOLD_S = 0.6  # how long a script waits to see that nothing more comes
MAX_PEAK = 1 << 20  # CPython: bytes traced at the peak of a case (device + peer)


def _expect_close(peer, v, reason, timeout):
    """5.0: DISCONNECT with `reason`, then the link closes; 3.1.1: just closes."""
    problems = []
    if not peer.wait_closed(timeout):
        problems.append("conn %d: the device kept the connection open" % peer.idx)
    ds = peer.disconnects()
    if v >= 5:
        if [d["reason"] for d in ds] != [reason]:
            problems.append("expected one DISCONNECT 0x%02X, got %s" % (
                reason, [d["reason"] for d in ds]))
    elif ds:
        problems.append("3.1.1: a DISCONNECT was sent on a protocol error")
    after = [e["name"] for e in peer.got[peer.got.index(ds[0]) + 1:]] if ds else []
    if after:
        problems.append("sent %s after DISCONNECT" % after)
    return problems


# ---- the cases: script(s) for the broker side, device params, a check ---------

def withheld_ack(peer):
    peer.accept()
    peer.expect("PUBLISH", qos=1)
    time.sleep(HOLD_S)  # never acknowledged: the link then drops
    peer.close()


def withheld_ack_resume(peer):
    peer.accept(sp=True)
    e = peer.expect("PUBLISH", qos=1)
    peer.ack("PUBACK", e["pid"])
    serve_rest(peer)


def serve_rest(peer):
    peer.wait_closed(10)


def check_withheld(b, run, v):
    p = []
    first, again = b.peers[0].got, b.peers[1].got if len(b.peers) > 1 else []
    pubs0 = [e for e in first if e["name"] == "PUBLISH"]
    pubs1 = [e for e in again if e["name"] == "PUBLISH"]
    if len(pubs0) != 1 or pubs0[0]["dup"]:
        p.append("first connection: expected one PUBLISH DUP=0, got %s" % pubs0)
    if not pubs1 or not pubs1[0]["dup"] or pubs1[0]["pid"] != pubs0[0]["pid"]:
        p.append("resumed session: expected the PUBLISH again with DUP=1 and the same id")
    if [e["reason"] for e in run.of("done")] != [0]:
        p.append("on_done after the late PUBACK: %s" % run.of("done"))
    return p


def qos2_repeat(peer):
    peer.accept()
    peer.publish("e/in", b"once", 2, 7)
    peer.expect("PUBREC", pid=7)
    peer.publish("e/in", b"once", 2, 7, dup=True)  # repeated before PUBREL
    peer.expect("PUBREC", pid=7)
    peer.ack("PUBREL", 7)
    peer.expect("PUBCOMP", pid=7)
    serve_rest(peer)


def check_qos2_repeat(b, run, v):
    msgs = run.of("msg")
    p = []
    if [m["payload"] for m in msgs] != ["once"]:
        p.append("QoS 2 repeated before PUBREL: delivered %s, expected once" % msgs)
    if run.of("error"):
        p.append("errors: %s" % run.of("error"))
    return p


def pubrec_refused(peer):
    peer.accept()
    e = peer.expect("PUBLISH", qos=2)
    peer.ack("PUBREC", e["pid"], 0x80)
    time.sleep(HOLD_S)
    serve_rest(peer)


def check_pubrec_refused(b, run, v):
    p = []
    got = b.peers[0].names()
    if "PUBREL" in got:
        p.append("PUBREL sent after PUBREC 0x80 (the flow ends there) [MQTT-4.3.3-4]")
    if [(d["reason"]) for d in run.of("done")] != [0x80]:
        p.append("on_done should report 0x80, got %s" % run.of("done"))
    if run.of("error") or run.of("end")[-1]["pending"]:
        p.append("device state after PUBREC 0x80: %s" % run.events[-1])
    return p


def _bad(raw):
    def script(peer):
        peer.accept()
        if peer.idx == 0:
            try:
                peer.expect("PUBLISH", timeout=0.5)
            except AssertionError:
                pass
        peer.send(raw(peer.version) if callable(raw) else raw)
        peer.wait_closed()
    return script


def unknown_alias(v):
    return packets.publish(v, "", b"x", 1, 3, alias=3)


def qos3(v):
    raw = bytearray(packets.publish(v, "e/q", b"3", 1, 4))
    raw[0] = 0x36  # QoS bits 11 [MQTT-3.3.1-4]
    return bytes(raw)


def puback_bad_flags(v):
    return b"\x42\x02\x00\x01"  # PUBACK with reserved flags 0010 [MQTT-2.1.3-1]


OVERSIZE = b"\x30\xff\xff\xff\x7f" + b"\x00" * 16  # declares 268435455 bytes
BAD_VBI = b"\x30\xff\xff\xff\xff\x01"              # a 5-byte remaining length


def sp_after_clean(peer):
    peer.expect("CONNECT")
    peer.send(b"\x20\x02\x01\x00" if peer.version < 5 else b"\x20\x03\x01\x00\x00")
    peer.wait_closed()


def sp_lost(peer):
    """clean=False device with a message in flight; the server answers the
    reconnect with session present 0: the message goes again as new (DUP=0)."""
    peer.accept()
    peer.expect("PUBLISH", qos=1)
    time.sleep(0.2)
    peer.close()


def sp_lost_again(peer):
    peer.accept(sp=False)
    e = peer.expect("PUBLISH", qos=1)
    peer.ack("PUBACK", e["pid"])
    serve_rest(peer)


def check_sp_lost(b, run, v):
    pubs = [e for e in b.peers[1].got if e["name"] == "PUBLISH"] if len(b.peers) > 1 else []
    if not pubs or pubs[0]["dup"]:
        return ["session present 0: the message must go again as a new PUBLISH (DUP=0)"]
    return []


def closing(reason, timeout=5.0):
    def check(b, run, v):
        p = _expect_close(b.peers[0], v, reason, timeout)
        if run.of("msg"):
            p.append("delivered a message from a bad packet: %s" % run.of("msg"))
        if len(b.peers) < 2 or not any(e["name"] == "CONNECT" for e in b.peers[1].got):
            p.append("the device did not connect again after the error")
        return p
    return check


CASES = {
    # name: (versions, scripts, device params, check)
    "withheld_ack": ((4, 5), [withheld_ack, withheld_ack_resume],
                     dict(n=1, qos=1, clean=False, seconds=2), check_withheld),
    "qos2_repeat_before_pubrel": ((4, 5), [qos2_repeat], dict(seconds=1.2), check_qos2_repeat),
    "pubrec_0x80": ((5,), [pubrec_refused], dict(n=1, qos=2, seconds=1.2),
                    check_pubrec_refused),
    "unknown_alias": ((5,), [_bad(unknown_alias), serve_forever], dict(seconds=1.2),
                      closing(0x82)),
    "qos3": ((4, 5), [_bad(qos3), serve_forever], dict(seconds=1.2), closing(0x81)),
    "reserved_flags": ((4, 5), [_bad(puback_bad_flags), serve_forever],
                       dict(n=1, qos=1, seconds=1.2), closing(0x81)),
    "oversize_remaining_length": ((4, 5), [_bad(OVERSIZE), serve_forever], dict(seconds=1.2),
                                  closing(0x95)),
    "malformed_remaining_length": ((4, 5), [_bad(BAD_VBI), serve_forever], dict(seconds=1.2),
                                   closing(0x81)),
    "session_present_after_clean": ((4, 5), [sp_after_clean, serve_forever],
                                    dict(seconds=1.2), closing(0x82)),
    "session_lost_on_resume": ((4, 5), [sp_lost, sp_lost_again],
                               dict(n=1, qos=1, clean=False, seconds=1.5), check_sp_lost),
}


def run_case(name, version, runtime):
    versions, scripts, params, check = CASES[name]
    b = ScriptedBroker(scripts)
    try:
        p = dict(params, host=b.host, port=b.port, version=version, topic="e/out",
                 cid="edge-%s-%s-%d" % (name, runtime[:2], version), keepalive=30,
                 timeout_ms=2000)
        if runtime == "cpython":
            tracemalloc.start()
        run = run_device(runtime, "edge", p, timeout=30)
        problems = []
        if runtime == "cpython":
            # everything Python allocated meanwhile (device, broker threads)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            if peak > MAX_PEAK:
                problems.append("allocated %d bytes at the peak (> %d)" % (peak, MAX_PEAK))
        if run.error:
            problems.append("device crashed: %s" % run.error[-2000:])
        elif not run.ended:
            problems.append("device program did not finish")
        else:
            problems += check(b, run, version)
        problems += b.errors
        return problems, b, run
    finally:
        b.close()


def all_cases():
    """(name, version) for every case."""
    return [(n, v) for n, c in CASES.items() for v in c[0]]


def main(runtimes, names=None):
    """Run the cases (all, or those named) on each runtime; one line per case;
    returns 1 if any failed."""
    failed = 0
    for runtime in runtimes:
        for name, v in all_cases():
            if names and name not in names:
                continue
            problems, broker, run = run_case(name, v, runtime)
            print("%-12s %-28s v%d  %s" % (runtime, name, v, "ok" if not problems else
                                            "FAILED: " + "; ".join(problems)))
            failed += bool(problems)
    print("%d case(s) failed" % failed if failed else "all edge cases ended as the spec says")
    return 1 if failed else 0
