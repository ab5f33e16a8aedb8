"""The differential test: one list of scripted scenarios (server bytes in,
client bytes out) run against every implementation of the client protocol,
here the full client's `Session` and the publish-only `lite.Publisher`.

Each implementation is reached through a driver with the same calls:
connect(clean, server_bytes), publish(topic, payload, qos, retain),
server(bytes), tick(ms), lost(), disconnect(reason), plus sent() (the
packets written since the last call), done (the on_done calls) and
connected(). `run()` plays a scenario through a driver and returns one
outcome string per step: what the call returned or raised, the packets sent,
on_done calls, and whether the connection is still up. A new implementation
(the sans-I/O core) adds its driver to DRIVERS; everything else stays.

The outcomes must be equal, step by step, except where DIVERGENCES lists the
step: each row names the scenario and step, what each side does (its exact
outcome, checked), the rule and its spec id. The spec's answer is Session's
in every row (tests/device/test_spec_decisions.py holds one test per
decision); the rows are lite's to remove, and the table may only shrink.
API_CONVENTIONS lists the steps where the two profiles differ by design
(see docs/protocol-decisions.md: a publisher keeps no inbound QoS 2 state).

The CONNECT itself is compared field by field (version, clean flag,
keep-alive, client id), not byte for byte: each implementation announces its
own buffer sizes in its properties. Runs on CPython and MicroPython.
"""
import errno
from _session_rig import pub, ack, connack, disconnect, h, client, read_all
from _lite_rig import Peer, Lite
from frugalmqtt import control as C
from frugalmqtt_host import server as SV
from frugalmqtt import props as PR
from frugalmqtt import publish as P
from frugalmqtt import lite as L
from frugalmqtt import session as S
from frugalmqtt.err import MQTTError, ServerError

_PKT = P.Packet()
_PUBACK = 4
_PUBREC = 5
_PUBREL = 6
_PUBCOMP = 7
RX = 64  # the Maximum Packet Size both announce (Session max_packet, lite rx_size)
SLOTS = 4


def _connect_fields(packet, v):
    """A CONNECT reduced to what both implementations must agree on."""
    assert SV.decode_packet(_PKT, packet, 0, len(packet), v) == 1, h(packet)
    c = _PKT.extra
    return "CONNECT v%d clean=%d ka=%d id=%r" % (c.version, c.clean, c.keepalive, c.client_id)


# ---- drivers ----------------------------------------------------------------------------------

class SessionDriver:
    """Session as the full client runs it: bytes framed by ClientBase._read
    (which also answers what the framer refuses), handled by receive()."""

    def __init__(self, v, client_id="dev", keepalive=60):
        self.v = v
        self.keepalive = keepalive
        self.t = 1000
        self.done = []
        self.c, self.out = client(v, RX, client_id, clock=self.now, slots=SLOTS, slot_size=256,
                                  aliases_in=0)
        self.s = self.c.s
        self.s.on_done = self.on_done

    def now(self):
        return self.t

    def on_done(self, pid, reason):
        self.done.append((pid, reason))

    def sent(self):
        out = self.out[:]
        del self.out[:]
        return out

    def connected(self):
        return self.s.connected

    def connect(self, clean, data):
        self.s.connect(self.keepalive, clean)
        r = self.server(data)
        return "sp=%d" % self.s.session_present if r is None and self.s.connected else r

    def publish(self, topic, payload, qos, retain):
        r = self.s.publish(topic, payload, qos, retain)
        return "FULL" if r == S.WINDOW_FULL else r

    def server(self, data):
        read_all(self.c, data)

    def tick(self, ms):
        self.t += ms
        self.s.tick()

    def lost(self):
        self.s.lost()

    def disconnect(self, reason):
        self.s.disconnect(reason)


class LiteDriver:
    """lite.Publisher over the scripted peer of test_lite, on the driver's clock."""

    def __init__(self, v, client_id="dev", keepalive=60):
        self.v = v
        self.client_id = client_id
        self.keepalive = keepalive
        self.t = 1000
        self.p = None
        self.peer = None
        self.done = []

    def now(self):
        return self.t

    def sent(self):
        return self.peer.sent() if self.peer else []

    def connected(self):
        return self.p is not None and self.p.connected

    def on_done(self, pid, reason):
        self.done.append((pid, reason))

    def connect(self, clean, data):
        if self.p is None:  # made at the first connect: its clean flag is an argument
            kw = dict(version=self.v, keepalive=self.keepalive, clean=clean, slots=SLOTS,
                      max_packet=256, rx_size=RX)
            try:  # a lite on the core takes its clock as an argument
                self.p = Lite(self.client_id, "broker", clock=self.now, **kw)
            except TypeError:  # lite before the core reads ticks_ms from its globals (run())
                self.p = Lite(self.client_id, "broker", **kw)
            self.p.on_done = self.on_done
        if self.peer:
            self.peer.sent()  # what the last connection sent was collected
        self.peer = Peer()
        self.peer.give(data)
        return "sp=%d" % self.p.connect(clean, self.peer)

    def publish(self, topic, payload, qos, retain):
        try:
            return self.p.publish(topic, payload, qos, retain, None, 0)
        except OSError as e:
            if e.args[0] == errno.ETIMEDOUT:
                return "FULL"  # the in-flight window stayed full for timeout_ms
            raise

    def server(self, data):
        if self.p.connected:  # bytes for a closed connection go nowhere, as Session's
            self.peer.give(data)
            self.p.poll(0)

    def tick(self, ms):
        self.t += ms
        if self.p.connected:  # as Session.tick(), nothing to keep alive when closed
            self.p.poll(0)

    def lost(self):
        self.p.close()

    def disconnect(self, reason):
        self.p.disconnect(reason)


DRIVERS = (SessionDriver, LiteDriver)


def _result(fn, *args):
    try:
        r = fn(*args)
    except MQTTError as e:
        return "MQTTError(0x%02X)" % e.reason
    except ServerError as e:
        return "ServerError(0x%02X)" % e.args[0]
    except OSError:
        return "OSError"
    except ValueError:  # UnicodeError too (its name differs between the runtimes)
        return "ValueError"
    return "" if r is None else "=" + str(r)


def run(driver_class, scenario):
    """Play a scenario; one outcome string per step:
    'result | packets sent | on_done calls | up/down'."""
    name, v, steps = scenario[0], scenario[1], scenario[2]
    opts = scenario[3] if len(scenario) > 3 else {}
    d = driver_class(v, **opts)
    saved = L.ticks_ms
    L.ticks_ms = d.now  # the clock of a lite before the core (no clock argument)
    out = []
    try:
        for step in steps:
            op = step[0]
            if op == "connect":
                r = _result(d.connect, step[1], step[2])
                sent = d.sent()
                if sent and sent[0][0] == 0x10:
                    r += " " + _connect_fields(sent[0], v)
                    sent = sent[1:]
            else:
                if op == "publish":
                    r = _result(d.publish, step[1], step[2], step[3], len(step) > 4 and step[4])
                elif op == "server":
                    r = _result(d.server, step[1])
                elif op == "tick":
                    r = _result(d.tick, step[1])
                elif op == "lost":
                    r = _result(d.lost)
                else:
                    r = _result(d.disconnect, step[1])
                sent = d.sent()
            out.append("%s | %s | done=%r | %s" % (r, " / ".join(h(p) for p in sent), d.done,
                                                   "up" if d.connected() else "down"))
            d.done = []
    finally:
        L.ticks_ms = saved
    return out


# ---- scenarios --------------------------------------------------------------------------------

def _ca(v, sp=False, reason=0, props=None):
    return connack(v, sp, reason, props)


def _both(name, make, opts=None):
    """The scenario on MQTT 3.1.1 and 5.0: make(v) -> steps."""
    return [(name + "/v%d" % v, v, make(v), opts or {}) for v in (4, 5)]


def _qos0(v):
    return [("connect", True, _ca(v)), ("publish", b"t", b"x", 0), ("publish", b"t", b"r", 0, True)]


def _qos1(v):
    return [("connect", True, _ca(v)), ("publish", b"t", b"1", 1),
            ("server", ack(v, _PUBACK, 1, 0x10 if v == 5 else 0)),
            ("publish", b"t", b"2", 1), ("server", ack(v, _PUBACK, 2))]


def _qos2(v):
    return [("connect", True, _ca(v)), ("publish", b"t", b"2", 2),
            ("server", ack(v, _PUBREC, 1)), ("server", ack(v, _PUBREC, 1)),  # repeated
            ("server", ack(v, _PUBCOMP, 1)), ("server", ack(v, _PUBREC, 9))]  # unknown id


def _error_acks(v):
    e = 0x80 if v == 5 else 0  # 3.1.1 has no reason codes: plain acks
    f = 0x87 if v == 5 else 0
    return [("connect", True, _ca(v)), ("publish", b"t", b"a", 1), ("publish", b"t", b"b", 2),
            ("server", ack(v, _PUBACK, 1, e)), ("server", ack(v, _PUBREC, 2, f)),
            ("server", ack(v, _PUBACK, 77) + ack(v, _PUBCOMP, 78))]  # acks for nothing


def _three_flows(v):
    return [("connect", False, _ca(v)), ("publish", b"t", b"a", 1), ("publish", b"t", b"b", 2),
            ("publish", b"t", b"c", 1), ("server", ack(v, _PUBREC, 2)), ("lost",)]


def _resume(v):
    return _three_flows(v) + [("connect", False, _ca(v, True)),
                              ("server", ack(v, _PUBACK, 1) + ack(v, _PUBCOMP, 2)),
                              ("server", ack(v, _PUBACK, 3))]


def _resume_no_session(v):
    return _three_flows(v) + [("connect", False, _ca(v, False)),
                              ("server", ack(v, _PUBACK, 1) + ack(v, _PUBACK, 3))]


def _pubrel_first(v):
    return [("connect", False, _ca(v)), ("publish", b"t", b"a", 2), ("publish", b"t", b"b", 1),
            ("server", ack(v, _PUBREC, 1)), ("lost",), ("publish", b"t", b"c", 1),
            ("publish", b"t", b"q0", 0), ("connect", False, _ca(v, True))]


def _slots_full(v):
    return [("connect", True, _ca(v))] + [("publish", b"t", b"n", 1)] * (SLOTS + 1) + [
        ("server", ack(v, _PUBACK, 2)), ("publish", b"t", b"m", 1)]


def _keepalive(v):
    return [("connect", True, _ca(v)), ("tick", 9999), ("tick", 1), ("tick", 1000),
            ("server", b"\xd0\x00"), ("tick", 10000), ("server", b"\xd0\x00")]


def _keepalive_rx_quiet(v):
    return [("connect", True, _ca(v)), ("tick", 6000), ("publish", b"t", b"0", 0),
            ("tick", 4000), ("server", b"\xd0\x00"), ("tick", 6000)]


def _pingresp_missing(v):
    return [("connect", True, _ca(v)), ("tick", 10000), ("tick", 5000), ("tick", 5000)]


def _refused(v):
    return [("connect", True, _ca(v, False, 0x87 if v == 5 else 5))]


def _sp_after_clean(v):
    return [("connect", True, _ca(v, True))]


def _inbound(v):
    return [("connect", True, _ca(v)),
            ("server", pub(v, b"in", b"0", 0) + pub(v, b"in", b"1", 1, 7)),
            ("server", pub(v, b"in", b"2", 2, 8) + pub(v, b"in", b"2", 2, 8, dup=True)),
            ("server", ack(v, _PUBREL, 8))]


def _offline(v):
    return [("connect", False, _ca(v)), ("lost",), ("publish", b"t", b"0", 0),
            ("publish", b"t", b"1", 1), ("connect", False, _ca(v, True))]


def _disconnect(v):
    return [("connect", True, _ca(v)), ("disconnect", 0)]


def _errors(name, v, packet):
    """A connection, then one packet from the server."""
    return (name + "/v%d" % v, v, [("connect", True, _ca(v)), ("server", packet)])


def _pid0(first):
    return bytes((first, 2, 0, 0))


def _publish_pid0(v):
    b = bytearray(pub(v, b"t", b"x", 1, 1))
    b[5] = b[6] = 0  # the packet id after the topic "t"
    return bytes(b)


def _connect_packet(v):
    b = bytearray(32)
    return bytes(b[:C.encode_connect(b, 0, v, "evil")])


SCENARIOS = (
    _both("qos0", _qos0) + _both("qos1", _qos1) + _both("qos2", _qos2)
    + _both("error-acks", _error_acks) + _both("resume", _resume)
    + _both("resume-no-session", _resume_no_session) + _both("pubrel-first", _pubrel_first)
    + _both("slots-full", _slots_full)
    + _both("keepalive", _keepalive, {"keepalive": 10})
    + _both("keepalive-rx-quiet", _keepalive_rx_quiet, {"keepalive": 10})
    + _both("pingresp-missing", _pingresp_missing, {"keepalive": 10})
    + _both("refused", _refused) + _both("sp-after-clean", _sp_after_clean)
    + _both("inbound", _inbound) + _both("offline", _offline) + _both("disconnect", _disconnect)
    + [
        # Receive Maximum on a resumed session: 2 QoS 1 in flight, quota 1
        ("receive-max-resume/v5", 5, [
            ("connect", False, _ca(5)), ("publish", b"t", b"1", 1), ("publish", b"t", b"2", 1),
            ("lost",), ("connect", False, _ca(5, True, 0, [(PR.RECEIVE_MAXIMUM, 1)])),
            ("server", ack(5, _PUBACK, 1)), ("server", ack(5, _PUBACK, 2))]),
        # Receive Maximum within one connection
        ("receive-max/v5", 5, [
            ("connect", True, _ca(5, False, 0, [(PR.RECEIVE_MAXIMUM, 1)])),
            ("publish", b"t", b"1", 1), ("publish", b"t", b"0", 0), ("server", ack(5, _PUBACK, 1)),
            ("publish", b"t", b"2", 2), ("publish", b"t", b"3", 1), ("server", ack(5, _PUBREC, 2)),
            ("server", ack(5, _PUBCOMP, 2))]),
        ("connack-limits/v5", 5, [
            ("connect", True, _ca(5, False, 0, [(PR.MAXIMUM_QOS, 1), (PR.RETAIN_AVAILABLE, 0),
                                                 (PR.MAXIMUM_PACKET_SIZE, 20)])),
            ("publish", b"t", b"x", 2), ("publish", b"t", b"x", 0, True),
            ("publish", b"t", b"x" * 20, 1), ("publish", b"t", b"x", 1)]),
        ("server-keep-alive/v5", 5, [
            ("connect", True, _ca(5, False, 0, [(PR.SERVER_KEEP_ALIVE, 5)])), ("tick", 5000)]),
        ("server-disconnect/v5", 5, [("connect", True, _ca(5)), ("server", disconnect(0x8B))]),
        ("server-disconnect/v4", 4, [("connect", True, _ca(4)), ("server", b"\xe0\x00")]),
        ("receive-max-0/v5", 5, [("connect", True, b"\x20\x06\x00\x00\x03\x21\x00\x00")]),
        ("disconnect-reason/v5", 5, [("connect", True, _ca(5)), ("disconnect", 0x04)]),
        # 3.1.1: no client id needs a clean session [MQTT-3.1.3-7]
        ("empty-client-id/v4", 4, [("connect", False, _ca(4))], {"client_id": ""}),
        ("empty-client-id/v5", 5, [("connect", False, _ca(5))], {"client_id": ""}),
        # Hostile server: CONNACK
        ("publish-before-connack/v4", 4, [("connect", True, pub(4, b"t", b"x", 1, 1) + _ca(4))]),
        ("publish-before-connack/v5", 5, [("connect", True, pub(5, b"t", b"x", 0) + _ca(5))]),
        ("second-connack/v5", 5, [("connect", True, _ca(5)), ("server", _ca(5))]),
        ("second-connack/v4", 4, [("connect", True, _ca(4)), ("server", _ca(4))]),
        ("connack-maximum-qos-2/v5", 5, [("connect", True, b"\x20\x05\x00\x00\x02\x24\x02")]),
        ("connack-maximum-qos-3/v5", 5, [("connect", True, b"\x20\x05\x00\x00\x02\x24\x03")]),
        ("connack-retain-available-2/v5", 5, [("connect", True, b"\x20\x05\x00\x00\x02\x25\x02")]),
        ("connack-repeated-property/v5", 5,
         [("connect", True, b"\x20\x08\x00\x00\x05\x21\x00\x05\x21\x00\x05")]),
        ("connack-bad-utf8/v5", 5, [("connect", True, b"\x20\x08\x00\x00\x05\x12\x00\x02\xc3\x28")]),
        ("connack-auth-data/v5", 5, [("connect", True, _ca(5, False, 0, [(PR.AUTH_DATA, b"k")]))]),
        ("connack-auth-method/v5", 5,
         [("connect", True, _ca(5, False, 0, [(PR.AUTH_METHOD, "SCRAM")]))]),
        # Hostile server: packets on an open connection
        ("inbound-above-maximum-qos/v5", 5, [
            ("connect", True, _ca(5, False, 0, [(PR.MAXIMUM_QOS, 1)])),
            ("server", pub(5, b"t", b"1", 1, 1)), ("server", pub(5, b"t", b"2", 2, 2))]),
        ("too-large/v5", 5, [("connect", True, _ca(5)),
                             ("server", pub(5, b"t", b"x" * (RX - 7), 1, 1)),  # exactly RX
                             ("server", pub(5, b"t", b"x" * (RX - 6), 1, 2))]),
        ("too-large/v4", 4, [("connect", True, _ca(4)),
                             ("server", pub(4, b"t", b"x" * (RX - 6), 1, 1)),
                             ("server", pub(4, b"t", b"x" * (RX - 5), 1, 2))]),
        ("suback-never-asked/v5", 5, [("connect", True, _ca(5)),
                                      ("server", b"\x90\x04\x00\x01\x00\x00")]),
    ]
    + [_errors("qos3", v, b"\x36\x05\x00\x01t\x00\x01") for v in (4, 5)]
    + [_errors("puback-flags", v, b"\x41\x02\x00\x01") for v in (4, 5)]
    + [_errors("pubrel-flags", v, b"\x60\x02\x00\x01") for v in (4, 5)]
    + [_errors("puback-pid-0", v, _pid0(0x40)) for v in (4, 5)]
    + [_errors("pubrel-pid-0", v, _pid0(0x62)) for v in (4, 5)]
    + [_errors("publish-pid-0", v, _publish_pid0(v)) for v in (4, 5)]
    + [_errors("publish-wildcard", v, pub(v, b"a/b", b"x", 1, 1).replace(b"a/b", b"a/#"))
       for v in (4, 5)]
    + [_errors("pubrel-unknown", v, ack(v, _PUBREL, 5)) for v in (4, 5)]
    + [_errors("pingresp-body", v, b"\xd0\x01\x00") for v in (4, 5)]
    + [_errors("type-0", v, b"\x00\x00") for v in (4, 5)]
    + [_errors("connect-to-client", v, _connect_packet(v)) for v in (4, 5)]
    + [_errors("subscribe-to-client", v, b"\x82\x06\x00\x01\x00\x01t\x00") for v in (4, 5)]
    + [_errors("puback-bad-reason", 5, b"\x40\x03\x00\x01\x05")]
    + [_errors("puback-long", 4, b"\x40\x03\x00\x01\x00")]
)

# ---- the known differences --------------------------------------------------------------------
# RULES: for each scenario (name before "/v4" or "/v5") whose steps differ,
# the rule and its spec id; Session follows it (test_spec_decisions.py),
# lite does what its DIVERGENCES row says.
RULES = {
    "keepalive-rx-quiet": ("MQTT-3.1.2-20", "PINGREQ when nothing was sent or nothing was "
                           "received for the keep-alive period; lite: only when nothing was sent"),
    "pingresp-missing": ("MQTT-3.1.2-20", "no PINGRESP within half the keep-alive (at least 1 s) "
                         "closes the link; lite waits a whole keep-alive"),
    "connack-limits": ("MQTT-2.2.1-3", "a publish refused locally takes no packet id; lite "
                       "spent id 1 on it (both conform)"),
    "connack-maximum-qos-2": ("MQTT-3.2.2-11", "CONNACK Maximum QoS is 0 or 1: 2 is a Protocol "
                              "Error, DISCONNECT 0x82; lite accepts it"),
    "connack-maximum-qos-3": ("MQTT-3.2.2-11", "as Maximum QoS 2"),
    "connack-retain-available-2": ("MQTT-3.2.2-14", "Retain Available is 0 or 1, else Protocol "
                                   "Error 0x82; lite accepts 2"),
    "connack-repeated-property": ("U-3.3.2-c", "a single-valued property given twice is a "
                                  "Protocol Error 0x82; lite answers 0x81"),
    "connack-bad-utf8": ("MQTT-1.5.4-1", "ill-formed UTF-8 in a CONNACK string is Malformed "
                         "0x81; lite does not check it"),
    "connack-auth-data": ("U-4.13.1-a", "authentication the client never asked for (its "
                          "CONNECT had no Authentication Method) is a Protocol Error 0x82 "
                          "(5.0 4.12); lite accepts it"),
    "connack-auth-method": ("U-4.13.1-a", "as connack-auth-data"),
    "inbound-above-maximum-qos": ("U-3.3.4-e", "a PUBLISH with QoS above the CONNACK's Maximum "
                                  "QoS: DISCONNECT 0x9B; lite acknowledges it"),
    "too-large": ("MQTT-3.1.2-24", "a packet over the Maximum Packet Size we announced: 0x95 "
                  "(DISCONNECT on 5.0, close on 3.1.1); lite takes up to rx_size bytes after the "
                  "fixed header"),
    "puback-pid-0": ("MQTT-2.2.1-5", "an ack with packet id 0 is a Protocol Error 0x82; lite "
                     "ignores it"),
    "pubrel-pid-0": ("MQTT-2.2.1-5", "as puback-pid-0; lite answers PUBCOMP for id 0"),
    "publish-pid-0": ("MQTT-2.2.1-3", "a QoS 1/2 PUBLISH with packet id 0 is a Protocol Error "
                      "0x82; lite PUBACKs id 0"),
    "publish-wildcard": ("MQTT-3.3.2-2", "a wildcard in a received Topic Name is a Protocol "
                         "Error 0x82; lite PUBACKs it"),
    "pubrel-unknown": ("MQTT-3.7.2-1", "PUBREL for an id with no QoS 2 state: PUBCOMP 0x92 "
                       "(Packet Identifier not found); lite answers 0x00"),
    "pingresp-body": ("MQTT-2.1.3-1", "PINGRESP has no body: Malformed 0x81; lite accepts it"),
    "type-0": ("U-4.13.1-a", "the reserved packet type 0 cannot be parsed: Malformed 0x81; "
               "lite answers 0x82"),
    "subscribe-to-client": ("U-4.13.1-a", "a well-formed packet only a server receives "
                            "(SUBSCRIBE) is a Protocol Error 0x82; lite answers 0x81"),
}

# (scenario, step, Session's outcome, lite's outcome): lite's to remove
# Where lite did not give the spec's answer. Every row is closed: lite runs on
# the sans-I/O core (core.py), which gives Session's answers.
DIVERGENCES = ()

# Where the two differ by design: the publish-only profile has no receiving
# module, so it keeps no record of inbound QoS 2 ids and answers every PUBREL
# with PUBCOMP 0x92, Packet Identifier not found (docs/protocol-decisions.md).
API_CONVENTIONS = (
    ("inbound/v5", 3,
     ' | 70 02 00 08 | done=[] | up',
     ' | 70 03 00 08 92 | done=[] | up'),
)


def _rows(table):
    return dict(((r[0], r[1]), (r[-2], r[-1])) for r in table)


def test_differential_session_and_lite_agree_except_the_known_divergences():
    """Equal outcomes step by step, except the listed steps, where each side
    does exactly what its row says; every row still happens (the table can
    only shrink: a row lite no longer needs fails here until removed)."""
    known = _rows(DIVERGENCES)
    known.update(_rows(API_CONVENTIONS))
    seen = set()
    for sc in SCENARIOS:
        ours = run(SessionDriver, sc)
        theirs = run(LiteDriver, sc)
        assert len(ours) == len(theirs) == len(sc[2]), sc[0]
        for i in range(len(ours)):
            row = known.get((sc[0], i))
            if row is None:
                assert ours[i] == theirs[i], "%s step %d %r:\n  Session: %s\n  lite:    %s" % (
                    sc[0], i, sc[2][i][0], ours[i], theirs[i])
            else:
                seen.add((sc[0], i))
                assert (ours[i], theirs[i]) == row, "%s step %d: now\n  Session: %s\n  lite:    %s" % (
                    sc[0], i, ours[i], theirs[i])
    stale = [k for k in known if k not in seen]
    assert not stale, "rows for steps that no longer exist: %r" % stale


def test_differential_every_divergence_has_its_rule():
    names = [sc[0] for sc in SCENARIOS]
    for row in DIVERGENCES:
        assert row[0] in names, row[0]
        spec, rule = RULES[row[0].split("/")[0]]
        assert spec and rule
    assert len(names) == len(set(names)), "scenario names repeat"


def test_differential_scenarios_cover_the_common_flows():
    """The list is more than its divergences: most steps agree."""
    steps = 0
    for sc in SCENARIOS:
        steps += len(sc[2])
    assert len(SCENARIOS) >= 50 and steps > 4 * len(DIVERGENCES), (len(SCENARIOS), steps)
