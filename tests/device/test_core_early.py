"""The core's contract with a driver that sends flows before the CONNACK
(frugalmqtt.wake): after lconn.start(), the driver sends the first `early`
flows of the table (PUBLISH or, past PUBREC, PUBREL) and sets
state[_EARLY]; the CONNACK
then sends none of them again [MQTT-3.1.4-5]. Runs on CPython and
MicroPython, against the lite rig's scripted peer."""
from _session_rig import BOTH, ack, connack, pub, rel, h
from frugalmqtt_host.ref import codec
from frugalmqtt.lite import SESSION_LOST
from _lite_rig import Peer, Lite

# lite.py's slot states and state[...] indices
_ACK = 1
_REC = 2
_COMP = 3
_STRIDE = 16
_EARLY = 22
_ORD = 26


def three_flows(v):
    """pid 1 QoS 1 unacked, pid 2 QoS 2 past PUBREC, pid 3 QoS 1 unacked;
    the link then gone."""
    peer = Peer()
    peer.give(connack(v, False))
    p = Lite("lite", "broker", version=v, clean=False)
    p.connect(sock=peer)
    p.publish("t", b"a", 1)
    p.publish("t", b"b", 2)
    p.publish("t", b"c", 1)
    peer.give(ack(v, codec.PUBREC, 2))
    p.poll(0)
    p.close()
    return p


def early(p, v, k, sp):
    """A new connection: CONNECT, the first k flows right behind it, then the
    CONNACK (session present sp). Returns what went before the CONNACK
    (without the CONNECT) and what went at it."""
    from frugalmqtt import lconn
    peer = Peer()
    p.poller = peer
    lconn.start(p, peer, False)
    a = p.state
    b = p.buf
    n = 0
    while n < k:
        s = a[_ORD][n] * a[_STRIDE]  # the slot: state, image start, size (2), pid (2)
        if b[s] == _COMP:
            p.send(0x62, b[s + 4] << 8 | b[s + 5])  # PUBREL
        else:
            o = s + b[s + 1]
            b[s] = _REC if b[o] & 4 else _ACK
            p.send(o, b[s + 2] << 8 | b[s + 3], 0, b)  # the PUBLISH
            b[o] |= 8  # any later sending is a resend
        n += 1
    a[_EARLY] = k
    before = peer.sent()
    assert before[0][0] == 0x10, [h(x) for x in before]
    peer.give(connack(v, sp))
    p.poll(0)
    return before[1:], peer.sent()


def test_flows_sent_before_an_accepting_connack_go_once():
    for v in BOTH:
        p = three_flows(v)
        before, at = early(p, v, 3, True)
        assert before == [pub(v, "t", b"a", 1, 1, dup=True), rel(2),
                          pub(v, "t", b"c", 1, 3, dup=True)], [h(x) for x in before]
        assert at == [] and p.pending() == 3


def test_the_rest_of_the_table_goes_at_the_connack():
    for v in BOTH:
        p = three_flows(v)
        before, at = early(p, v, 1, True)
        assert before == [pub(v, "t", b"a", 1, 1, dup=True)], [h(x) for x in before]
        assert at == [rel(2), pub(v, "t", b"c", 1, 3, dup=True)], [h(x) for x in at]


def test_without_a_session_the_early_pubrel_flow_is_lost_and_nothing_resent():
    for v in BOTH:
        p = three_flows(v)
        done = []
        p.on_done = lambda pid, r: done.append((pid, r))
        before, at = early(p, v, 2, False)
        # the early PUBLISH was processed by the new session; the PUBREL flow
        # went with the old one [MQTT-3.2.2-5]; pid 3 goes as a new message
        assert before == [pub(v, "t", b"a", 1, 1, dup=True), rel(2)]
        assert done == [(2, SESSION_LOST)]
        assert at == [pub(v, "t", b"c", 1, 3)], [h(x) for x in at]
        assert p.state[_EARLY] == 1 and p.pending() == 2
