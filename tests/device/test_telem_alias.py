"""The telemetry profile's outbound topic aliases (telem.Telemetry with
alias.Aliases in the core's state) and its message-expiry countdown, against
the lite rig's scripted peer, on a clock of the test's: aliases are per
connection [MQTT-3.3.2-7], a stored message resent on a new connection names
its topic again and carries no alias, the Message Expiry Interval is lowered
by the time a message waited or the message dropped [MQTT-4.3.3-7], and an
invalid topic takes no alias. Runs on CPython and MicroPython."""
from _util import raises
from _session_rig import ack, connack, pub, hl
from _session_rig import props as P
from frugalmqtt_host.ref import props as PR
from frugalmqtt_host.ref.codec import PUBACK
from frugalmqtt.telem import Telemetry
from frugalmqtt.alias import EXPIRED
from _lite_rig import Peer

NOW = [1000]


def clock():
    return NOW[0]


class _Telem(Telemetry):
    """Telemetry whose readiness comes from the peer's script (the peer is
    its own poller, as in _lite_rig.Lite)."""

    def connect(self, clean=None, sock=None, timeout_ms=0):
        if sock is not None:
            self.poller = sock
        return Telemetry.connect(self, clean, sock, timeout_ms)


def up(t, sp=False, props=None):
    """A new connection of t; what it sent after its CONNECT."""
    peer = Peer()
    peer.give(connack(5, sp, 0, props))
    assert t.connect(False, peer) == sp
    out = peer.sent()
    assert out[0][0] == 0x10, hl(out)
    return peer, out[1:]


def _exp(s):
    return [(PR.MESSAGE_EXPIRY, s)]


def test_MQTT_3_3_2_7_outbound_aliases_forgotten_on_new_connection():
    t = _Telem("tele", "broker", clean=False, clock=clock)
    peer, out = up(t, props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    t.publish(b"a/b", b"0", 0)
    pid = t.publish(b"a/b", b"1", 1)
    assert peer.sent() == [pub(5, b"a/b", b"0", alias=1), pub(5, b"", b"1", 1, pid, alias=1)]
    t.close()
    # the resent image names its topic and carries no alias
    peer, out = up(t, True, [(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    assert out == [pub(5, b"a/b", b"1", 1, pid, dup=True)], hl(out)
    t.publish(b"a/b", b"2", 0)
    assert peer.sent() == [pub(5, b"a/b", b"2", alias=1)]  # a new mapping, full topic
    t.close()
    peer, out = up(t, True)  # this server takes no aliases
    t.publish("a/b", b"3", 0)
    assert peer.sent() == [pub(5, b"a/b", b"3")]


def test_resent_image_with_properties_loses_the_alias_bytes():
    # the alias's 3 bytes take the property length past 127 (2 bytes), the
    # plain image's fits in one: the image shrinks by 4 bytes, a str topic
    # goes back UTF-8 encoded, the other properties and the payload unchanged
    t = _Telem("tele", "broker", clean=False, clock=clock, max_packet=256)
    peer, out = up(t, props=[(PR.TOPIC_ALIAS_MAXIMUM, 2)])
    pr = [(PR.USER_PROPERTY, ("k", "v" * 116)), (PR.CONTENT_TYPE, "t")]  # 126 bytes
    assert len(P(pr)) == 126
    topic = "s/t\u00e9mp"
    t.publish(topic, b"x", 0)  # the alias goes with the topic
    p1 = t.publish(topic, b"first", 1, False, P(pr))
    p2 = t.publish(topic, b"second", 2, False, P(pr))
    assert peer.sent() == [pub(5, topic.encode(), b"x", alias=1),
                           pub(5, b"", b"first", 1, p1, props=pr, alias=1),
                           pub(5, b"", b"second", 2, p2, props=pr, alias=1)]
    t.close()
    peer, out = up(t, True)
    assert out == [pub(5, topic.encode(), b"first", 1, p1, dup=True, props=pr),
                   pub(5, topic.encode(), b"second", 2, p2, dup=True, props=pr)], hl(out)


def test_a_new_alias_that_went_with_its_topic_is_dropped_on_resend():
    t = _Telem("tele", "broker", clean=False, clock=clock)
    peer, out = up(t, props=[(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    pid = t.publish(b"n/t", b"1", 1)
    assert peer.sent() == [pub(5, b"n/t", b"1", 1, pid, alias=1)]
    t.close()
    peer, out = up(t, True, [(PR.TOPIC_ALIAS_MAXIMUM, 4)])
    assert out == [pub(5, b"n/t", b"1", 1, pid, dup=True)], hl(out)


def test_an_invalid_topic_takes_no_alias():
    t = _Telem("tele", "broker", clock=clock)
    peer, out = up(t, props=[(PR.TOPIC_ALIAS_MAXIMUM, 1)])
    raises(ValueError, t.publish, b"a/+", b"x", 0)  # a wildcard [MQTT-3.3.2-2]
    raises(ValueError, t.publish, b"", b"x", 0)  # empty [MQTT-4.7.3-1]
    assert peer.sent() == []
    t.publish(b"ok", b"y", 0)
    assert peer.sent() == [pub(5, b"ok", b"y", alias=1)]  # the only alias is still free


def test_MQTT_4_3_3_7_qos1_expiry_lowered_by_waiting_time():
    NOW[0] = 1000
    t = _Telem("tele", "broker", clean=False, clock=clock)
    peer, out = up(t)
    props = [(PR.USER_PROPERTY, ("a", "b")), (PR.MESSAGE_EXPIRY, 100), (PR.CONTENT_TYPE, "t")]
    p1 = t.publish(b"x", b"1", 1, False, P(props))
    assert peer.sent() == [pub(5, b"x", b"1", 1, p1, props=props)]
    t.close()
    NOW[0] += 30000
    p2 = t.publish(b"x", b"2", 1, False, P(_exp(100)))  # stored while offline
    p3 = t.publish(b"x", b"3", 2, False, P(_exp(100)))
    NOW[0] += 10500
    peer, out = up(t, True)
    left = [(PR.USER_PROPERTY, ("a", "b")), (PR.MESSAGE_EXPIRY, 60), (PR.CONTENT_TYPE, "t")]
    assert out == [pub(5, b"x", b"1", 1, p1, dup=True, props=left),
                   pub(5, b"x", b"2", 1, p2, props=_exp(90)),
                   pub(5, b"x", b"3", 2, p3, props=_exp(90))], hl(out)
    # a QoS 1 message waiting for the server's quota is lowered too
    t = _Telem("tele", "broker", clock=clock)
    peer, out = up(t, props=[(PR.RECEIVE_MAXIMUM, 1)])
    p1 = t.publish(b"y", b"1", 1)
    p2 = t.publish(b"y", b"2", 1, False, P(_exp(50)))
    NOW[0] += 20000
    peer.give(ack(5, PUBACK, p1))
    t.poll(0)
    assert peer.sent() == [pub(5, b"y", b"1", 1, p1), pub(5, b"y", b"2", 1, p2, props=_exp(30))]


def test_MQTT_4_3_3_7_expired_stored_messages_dropped():
    NOW[0] = 1000
    done = []
    t = _Telem("tele", "broker", clean=False, clock=clock)
    t.on_done = lambda pid, reason: done.append((pid, reason))
    peer, out = up(t)
    p1 = t.publish(b"z", b"1", 1, False, P(_exp(10)))
    peer.sent()
    t.close()
    p2 = t.publish(b"z", b"2", 2, False, P(_exp(5)))  # never sent: expiry applies
    p3 = t.publish(b"z", b"3", 1)
    NOW[0] += 20000
    peer, out = up(t, True)
    assert out == [pub(5, b"z", b"3", 1, p3)], hl(out)
    assert sorted(done) == sorted([(p1, EXPIRED), (p2, EXPIRED)])
    assert t.pending() == 1
