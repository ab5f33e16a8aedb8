"""frugalmqtt.client.MQTTClient's MQTT 5 API in full, its bounded waits and
its handling of inbound messages over max_packet, against a real mosquitto
2.0.11 under CPython (in-process) and the MicroPython unix port (a
subprocess), 3.1.1 and 5.0. The device side is tests/mp_api/mqtt5_checks.py.
"""
import json
import socket
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "mp_api"))
from apihost import (BOTH, RUNTIMES, Observer, certs, free_port, run_check,  # noqa: E402,F401
                     tls_listener)

V5 = pytest.mark.parametrize("runtime", RUNTIMES)


def _tag(name, runtime, version):
    return "m%s-%s-%d" % (name, runtime[:2], version)


def _check(runtime, name, broker, version, *args):
    r = run_check(runtime, "mqtt5_checks", name, broker.host, broker.port,
                  _tag(name, runtime, version), version, *args)
    return json.loads(json.dumps(r))  # tuples as lists, as from the unix port


# ---- subscriptions ---------------------------------------------------------------

@BOTH
def test_MQTT_3_8_3_subscribe_several_filters_options_ids_in_flight(runtime, version, mosquitto):
    """Several filters per SUBSCRIBE/UNSUBSCRIBE, each with its options;
    No Local [MQTT-3.8.3-3], Retain As Published, Retain Handling, a
    Subscription Identifier (5.0); five SUBSCRIBEs sent without waiting."""
    r = _check(runtime, "subscriptions", mosquitto(), version)
    assert r["a"] == ["a"] and r["n"] == ["n"]
    # our own message comes back only without No Local (3.1.1 has none)
    assert r["b"] == (["b-other"] if version == 5 else ["b-other", "b-own"])
    if version == 5:
        assert r["id"] == [7]
        # the retained "old" once: not for handling 2, nor for handling 1 on
        # an existing subscription; a live retained one keeps RETAIN=1 (as published)
        assert r["kept"] == [["old", 1]]
        assert r["rap"] == [["live", 1]]
    tag = _tag("subscriptions", runtime, version)
    left = sorted(["%s/%s" % (tag, f) for f in ["c"] + ["n%d" % k for k in range(5)]
                   + ["id", "kept", "k2", "rap"] * (version == 5)])
    assert r["left"] == left


# ---- manual acknowledgement ----------------------------------------------------------

@BOTH
def test_MQTT_4_3_3_8_manual_ack_withholds_puback_and_pubrec(runtime, version, mosquitto):
    r = _check(runtime, "manual_ack", mosquitto(), version)
    assert r["first"] == [["one", 1, 0], ["two", 2, 0]]
    assert len(r["held"]) == 1 and r["held"][0] < 0  # the QoS 2 id, held for ack()
    # not acknowledged: the server sends both again on the resumed session
    assert r["again"] == [["one", 1, 1], ["two", 2, 1]]
    assert r["held_again"] == r["held"]
    assert r["released"] == [] and r["after"] == 0  # taken: PUBREL/PUBCOMP done, never again


# ---- CONNACK and the server's DISCONNECT ------------------------------------------------

@BOTH
def test_connack_properties_and_server_disconnect_public(runtime, version, mosquitto):
    b = mosquitto("max_keepalive 20", "max_qos 1", "retain_available false",
                  "max_packet_size 5000")
    r = _check(runtime, "connack_props", b, version)
    assert r["max_qos"] == (1 if version == 5 else 2)  # 3.1.1's CONNACK has no limits
    assert r["retain_ok"] is (version == 4)
    if version == 5:
        assert r["assigned"].startswith("auto-")  # we sent an empty client id
        assert r["keep_alive"] == 20 and r["ka_ms"] == 20000  # [MQTT-3.2.2-21]
        assert r["max_packet"] == 5000 and r["server_max"] == 5000


@V5
def test_server_disconnect_reason_and_properties_public(runtime):
    """mosquitto 2.0.11 closes without a DISCONNECT (session taken over,
    shutdown, oversize): a test peer sends one, with properties."""
    rs = b"going down"
    ref = b"other:1883"
    up = b"\x26\x00\x01k\x00\x01v"
    p = b"\x1f" + len(rs).to_bytes(2, "big") + rs + b"\x1c" + len(ref).to_bytes(2, "big") + ref + up
    peer = _Peer(b"\xe0" + bytes((2 + len(p), 0x9C, len(p))) + p)
    r = _run_peer(runtime, "server_disconnect", peer, "d")
    assert r["code"] == r["reason"] == 0x9C and r["up"] is False
    assert r["reason_string"] == "going down" and r["reference"] == "other:1883"
    assert r["user"] == [["k", "v"]]


@BOTH
def test_refused_connack_raised_at_once_not_retried(runtime, version, mosquitto):
    r = _check(runtime, "refused", mosquitto("allow_anonymous false"), version)
    assert r["code"] == (0x87 if version == 5 else 5) and r["tries"] == 1
    assert r["last_error"] == "ServerError"
    assert r["props"] == ([] if version == 5 else None)


@V5
def test_MQTT_3_14_2_2_disconnect_with_properties(runtime, mosquitto):
    b = mosquitto()
    obs = Observer(b, _tag("will_on_disconnect", runtime, 5) + "/will", 5)
    try:
        r = _check(runtime, "disconnect_props", b, 5)
        _check(runtime, "will_on_disconnect", b, 5)
        msgs = obs.wait(lambda ms: len(ms) >= 1, "the will")
    finally:
        obs.stop()
    # session_expiry=0 at DISCONNECT ended the session; 300 kept it
    assert r["kept"] is False and r["resumed"] is True
    assert r["still"] is True  # the refused call sent nothing
    assert [m[1] for m in msgs] == [b"gone"]  # 0x04: disconnect with the will


@pytest.mark.parametrize("raw", [False, True])
@V5
def test_connect_settings_given_as_properties(runtime, raw, mosquitto):
    r = _check(runtime, "connect_settings", mosquitto(), 5, raw)
    assert (r["in_max"], r["rx"], r["aliases_in"], r["session_expiry"]) == (3, 600, 2, 120)
    assert r["got"] == [5]  # the 700-byte message was over our Maximum Packet Size
    assert r["resumed"] is True and r["connects"] == 2


# ---- bounded waits ---------------------------------------------------------------------

@BOTH
def test_poll_and_ensure_connected_bounded_while_down(runtime, version, mosquitto):
    r = _check(runtime, "bounded", mosquitto(), version, free_port())
    # each poll(150) returned within its time: the backoff waits (200 ms
    # doubling to 2000 ms) are cut to it. Uncut, the 8 polls would take over
    # 6 s and the later ones 800 ms or more each, ensure_connected(300) 2 s.
    # The margins are for one scheduling stall on a loaded machine.
    assert r["all_polls_ms"] < 8 * 150 + 1500, r
    assert r["worst_poll_ms"] < 150 + 1200, r
    assert r["ensure_ok"] is False and r["ensure_ms"] < 300 + 1200, r
    assert r["last_error"] == "OSError"
    assert r["back"] is True and r["subs"] == 1 and r["connects"] == 2


@BOTH
def test_certificate_failure_raised_at_once(runtime, version, mosquitto, certs):
    port = free_port()
    b = mosquitto(*tls_listener(port, certs))
    r = run_check(runtime, "mqtt5_checks", "bad_ca", b.host, port,
                  _tag("ca", runtime, version), version, str(certs / "other.der"))
    # CPython's is an OSError, judged fatal by fatal() once (the first
    # attempt's failure) and raised; MicroPython's mbedtls raises ValueError,
    # which no retry catches: out of the first attempt as it is
    assert r["tries"] == (1 if runtime == "cpython" else 0), r
    assert r["error"] == ("SSLCertVerificationError" if runtime == "cpython" else "ValueError")


# ---- inbound messages over max_packet ------------------------------------------------------

@BOTH
def test_oversize_message_drained_reported_no_reconnect_loop(runtime, version, mosquitto):
    r = _check(runtime, "oversize", mosquitto(), version)
    tag = _tag("oversize", runtime, version)
    assert r["ok"] and r["up"] and r["connects"] == 1, r
    if version == 4:
        # 3.1.1: the server cannot know our limit; each is reported, topic
        # and size (5000 bytes of payload + topic + header), and acknowledged
        sizes = {"%s/big%d" % (tag, q): 5000 + 2 + len(tag) + 5 + 3 + (2 if q else 0)
                 for q in (0, 1, 2)}
        sizes["%s/live" % tag] = 3000 + 2 + len(tag) + 5 + 3 + 2
        assert sorted(r["big"]) == sorted([[t, n] for t, n in sizes.items()])
        assert r["inbound_held"] == 0  # the QoS 2 flows completed (PUBCOMP)
    else:
        # 5.0: the server knows our Maximum Packet Size and drops them [MQTT-3.1.2-25]
        assert r["big"] == []
    assert r["resumed"] is True and r["again"] == 0


class _Peer:
    """A test server for what mosquitto never does: a 5.0 CONNACK, then the
    packet `then`; it records what the client sends back."""

    def __init__(self, then):
        self.then = then
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.port = self.srv.getsockname()[1]
        self.got = b""
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        s, _ = self.srv.accept()
        s.settimeout(10)
        s.recv(4096)  # the CONNECT
        s.sendall(b"\x20\x03\x00\x00\x00" + self.then)
        while True:
            try:
                d = s.recv(4096)
            except OSError:
                break
            if not d:
                break
            self.got += d
        s.close()
        self.srv.close()


def _run_peer(runtime, check, peer, name):
    r = run_check(runtime, "mqtt5_checks", check, "127.0.0.1", peer.port, _tag(name, runtime, 5))
    peer.t.join(10)
    return json.loads(json.dumps(r))


@V5
def test_MQTT_3_1_2_24_oversize_from_a_5_0_server_disconnect_0x95(runtime):
    body = b"\x00\x03big" + b"\x00" + b"z" * 2000  # over the default max_packet 1024
    n = len(body)
    peer = _Peer(b"\x30" + bytes((n & 0x7F | 0x80, n >> 7)) + body)
    r = _run_peer(runtime, "oversize_v5", peer, "o5")
    assert r["big"] == [["big", 2000 + 6 + 3]]  # reported first
    assert r["reason"] == 0x95 and r["up"] is False
    assert peer.got == b"\xe0\x01\x95"  # DISCONNECT Packet too large
