"""Property-based tests (hypothesis, CPython only) for the frugalmqtt packet codec.

What is checked, for every packet type on both protocol levels (v=4: 3.1.1, v=5: 5.0):

* round trip: decode(encode(x)) == x, field by field, and the encoded length equals
  the size_* function's answer; encoding never writes outside its packet and
  refuses a buffer one byte too small;
* the codec never produces an invalid packet: with looser arguments (out-of-range
  values, duplicates, wildcards, empty lists, over-long fields...) encoding either
  raises ValueError/TypeError or produces a packet that decodes back to the input;
* robustness: single-byte corruptions (several values at every position, all 256 for
  the first byte), deletions and insertions of valid packets, every truncation, and
  arbitrary bytes (raw, framed, and built from header fragments and valid packets)
  either decode or raise codec.MQTTError -- never another exception. Whatever decodes
  obeys the MQTT rules checked by assert_spec_valid(), encodes again, and (up to the
  optional reason code / property length of acks, DISCONNECT and AUTH) encodes to
  the very bytes that were accepted;
* property blocks written by hand are accepted exactly when an independent copy of
  MQTT 5.0 Table 2-4 allows them (random lists, and every id with boundary values);
  CONNECT flags, subscription options, CONNACK flags and first bytes are tried
  exhaustively against the rules of the spec;
* the Framer (feed and read_from) yields the same packets for any split of a stream,
  refuses packets over its maximum before reading the body, and on arbitrary bytes
  raises nothing but MQTTError and only completes minimal fixed headers.

The expected values come from MQTT 5.0 / 3.1.1 (reason code lists are written out
here, not imported); the codec's property table (props._TYPE/_WHERE) drives which
property ids the packet strategies generate.
"""
import inspect

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from frugalmqtt import codec, control, props, publish
from frugalmqtt_host import codec as host
from frugalmqtt_host import server

P = props
NAMES = {
    codec.CONNECT: "CONNECT", codec.CONNACK: "CONNACK", codec.PUBLISH: "PUBLISH",
    codec.PUBACK: "PUBACK", codec.PUBREC: "PUBREC", codec.PUBREL: "PUBREL",
    codec.PUBCOMP: "PUBCOMP", codec.SUBSCRIBE: "SUBSCRIBE", codec.SUBACK: "SUBACK",
    codec.UNSUBSCRIBE: "UNSUBSCRIBE", codec.UNSUBACK: "UNSUBACK",
    codec.PINGREQ: "PINGREQ", codec.PINGRESP: "PINGRESP",
    codec.DISCONNECT: "DISCONNECT", codec.AUTH: "AUTH",
}
TYPES = {v: k for k, v in NAMES.items()}
ACKS = (codec.PUBACK, codec.PUBREC, codec.PUBREL, codec.PUBCOMP)

# Reason codes allowed per packet (MQTT 5.0 3.x.2.1 tables; 3.1.1 3.2.2.3 / 3.9.3)
PUB_REASONS = (0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)  # PUBACK, PUBREC
REL_REASONS = (0x00, 0x92)  # PUBREL, PUBCOMP
CONNACK_V4 = (0, 1, 2, 3, 4, 5)
CONNACK_V5 = (0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A,
              0x8C, 0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F)
SUBACK_V4 = (0x00, 0x01, 0x02, 0x80)
SUBACK_V5 = (0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)
UNSUBACK_V5 = (0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)
DISCONNECT_V5 = (0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F,
                 0x90, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D,
                 0x9E, 0x9F, 0xA0, 0xA1, 0xA2)
AUTH_V5 = (0x00, 0x18, 0x19)
# What a decoder may raise: malformed, protocol error, bad protocol version (CONNECT),
# topic alias 0, packet too large (Framer).
DECODE_REASONS = {0x81, 0x82, 0x84, 0x94, 0x95}


def ack_reasons(ptype):
    return REL_REASONS if ptype in (codec.PUBREL, codec.PUBCOMP) else PUB_REASONS


# ---- encoding by name, sizes, summaries --------------------------------------

ENCODERS = {
    "publish": (host.encode_publish, host.size_publish),
    "ack": (publish.encode_ack, host.size_ack),
    "connect": (control.encode_connect, host.size_connect),
    "connack": (server.encode_connack, server.size_connack),
    "subscribe": (control.encode_subscribe, host.size_subscribe),
    "suback": (server.encode_suback, server.size_suback),
    "unsubscribe": (control.encode_unsubscribe, host.size_unsubscribe),
    "unsuback": (server.encode_unsuback, server.size_unsuback),
    "ping": (control.encode_ping, None),
    "disconnect": (control.encode_disconnect, host.size_disconnect),
    "auth": (server.encode_auth, server.size_auth),
}
_SIZE_PARAMS = {k: set(inspect.signature(s).parameters) if s else set()
                for k, (e, s) in ENCODERS.items()}


class Case:
    """One encode call: encoder name and its keyword arguments."""

    def __init__(self, fn, _v=5, **args):
        self.fn = fn
        self.args = args
        self.v = args.get("v", _v)  # protocol level (PINGREQ/PINGRESP/AUTH take none)

    def size(self):
        enc, size = ENCODERS[self.fn]
        if size is None:
            return 2  # PINGREQ / PINGRESP
        return size(**{k: a for k, a in self.args.items() if k in _SIZE_PARAMS[self.fn]})

    def encode_into(self, buf, off):
        return ENCODERS[self.fn][0](buf, off, **self.args)

    def encode(self):
        """Encode; check the length against size_* and that nothing outside the
        packet is written. Returns the packet as bytes."""
        n = self.size()
        off = 3
        buf = bytearray(b"\xa5" * (off + n + 5))
        got = self.encode_into(memoryview(buf) if n & 1 else buf, off)
        assert got == n, "encode returned %d, size said %d" % (got, n)
        assert buf[:off] == b"\xa5" * off and buf[off + n:] == b"\xa5" * 5, "wrote outside"
        return bytes(buf[off:off + n])

    def __repr__(self):
        return "Case(%r, %s)" % (self.fn, ", ".join("%s=%s" % (k, short_repr(a))
                                                     for k, a in self.args.items()))


def short_repr(x):
    if isinstance(x, control.Will):
        return "Will(%s)" % ", ".join(short_repr(a) for a in
                                      (x.topic, x.payload, x.qos, x.retain, x.props))
    if isinstance(x, (str, bytes, bytearray)) and len(x) > 40:
        return "%r * %d" % (x[:1], len(x))  # the long values generated are one repeated item
    if isinstance(x, (list, tuple)):
        r = ", ".join(short_repr(a) for a in x)
        return "(%s%s)" % (r, "," if len(x) == 1 else "") if type(x) is tuple else "[%s]" % r
    return repr(x)


def ustr(s):
    return s if type(s) is str else bytes(s).decode()


def ubytes(s):
    return s.encode() if type(s) is str else bytes(s)


def norm_value(pid, v):
    t = P._TYPE[pid]
    if t == P._STR:
        return ustr(v)
    if t == P._BIN:
        return bytes(v)
    if t == P._PAIR:
        return (ustr(v[0]), ustr(v[1]))
    return int(v)


def norm_props(items):
    return [(pid, norm_value(pid, v)) for pid, v in (items or ())]


def norm_will(w):
    if w is None:
        return None
    return (ustr(w.topic), bytes(w.payload), w.qos, bool(w.retain), norm_props(w.props))


def expected(case):
    """The summary decoding case's packet must give (same shape as summarize())."""
    a = case.args
    f = case.fn
    pr = norm_props(a.get("props"))
    if f == "publish":
        qos = a.get("qos", 0)
        alias = a.get("alias", 0)
        pr = ([(P.TOPIC_ALIAS, alias)] if alias else []) + pr
        payload = a["payload"]
        return ("PUBLISH", qos, int(bool(a.get("dup"))), int(bool(a.get("retain"))),
                a.get("pid", 0) if qos else 0, ubytes(a["topic"]),
                bytes(payload) if payload is not None else b"", pr)
    if f == "ack":
        return (NAMES[a["ptype"]], a["pid"], a.get("reason", 0), pr)
    if f == "connect":
        u = a.get("username")
        pw = a.get("password")
        return ("CONNECT", a["v"], ustr(a["client_id"]), bool(a.get("clean", True)),
                a.get("keepalive", 60), pr, norm_will(a.get("will")),
                None if u is None else ustr(u), None if pw is None else bytes(pw))
    if f == "connack":
        return ("CONNACK", int(bool(a.get("session_present"))), a.get("reason", 0), pr)
    if f == "subscribe":
        return ("SUBSCRIBE", a["pid"], pr, [(ustr(t), o) for t, o in a["subs"]])
    if f in ("suback", "unsuback"):
        return (f.upper(), a["pid"], pr, bytes(a.get("codes", ())))
    if f == "unsubscribe":
        return ("UNSUBSCRIBE", a["pid"], pr, [ustr(t) for t in a["filters"]])
    if f == "ping":
        return (NAMES[a["ptype"]],)
    return (f.upper(), a.get("reason", 0), pr)  # disconnect, auth


def summarize(pkt):
    """Every field of the decoded packet that applies to its type."""
    t = pkt.type
    name = NAMES[t]
    items = host.props_items(pkt.props)
    if t == codec.PUBLISH:
        return (name, pkt.qos, pkt.dup, pkt.retain, pkt.pid, host.topic_bytes(pkt),
                host.payload_bytes(pkt), items)
    if t in ACKS:
        return (name, pkt.pid, pkt.reason, items)
    if t == codec.CONNECT:
        c = pkt.extra
        return (name, c.version, c.client_id, c.clean, c.keepalive, list(c.props),
                norm_will(c.will), c.username, c.password)
    if t == codec.CONNACK:
        return (name, pkt.sp, pkt.reason, items)
    if t == codec.SUBSCRIBE:
        return (name, pkt.pid, items, list(pkt.extra))
    if t in (codec.SUBACK, codec.UNSUBACK):
        return (name, pkt.pid, items, bytes(pkt.buf[pkt.data:pkt.data + pkt.data_len]))
    if t == codec.UNSUBSCRIBE:
        return (name, pkt.pid, items, list(pkt.extra))
    if t in (codec.PINGREQ, codec.PINGRESP):
        return (name,)
    return (name, pkt.reason, items)  # DISCONNECT, AUTH


def case_from_summary(s, v):
    """The encode call that should reproduce a decoded packet (inverse of expected())."""
    name = s[0]
    if name == "PUBLISH":
        _, qos, dup, retain, pid, topic, payload, pr = s
        alias = 0
        if not topic:  # the alias stands for the topic: pass it as `alias`
            alias = [x for k, x in pr if k == P.TOPIC_ALIAS][0]
            pr = [(k, x) for k, x in pr if k != P.TOPIC_ALIAS]
        return Case("publish", v=v, topic=topic, payload=payload, qos=qos, pid=pid,
                    retain=bool(retain), dup=bool(dup), props=pr or None, alias=alias)
    t = TYPES[name]
    if t in ACKS:
        return Case("ack", v=v, ptype=t, pid=s[1], reason=s[2], props=s[3] or None)
    if name == "CONNECT":
        _, ver, cid, clean, ka, pr, w, u, pw = s
        will = None
        if w is not None:
            will = control.Will(w[0], w[1], w[2], w[3], w[4] or None)
        return Case("connect", v=ver, client_id=cid, keepalive=ka, clean=clean,
                    props=pr or None, will=will, username=u, password=pw)
    if name == "CONNACK":
        return Case("connack", v=v, session_present=bool(s[1]), reason=s[2], props=s[3] or None)
    if name == "SUBSCRIBE":
        return Case("subscribe", v=v, pid=s[1], subs=s[3], props=s[2] or None)
    if name == "UNSUBSCRIBE":
        return Case("unsubscribe", v=v, pid=s[1], filters=s[3], props=s[2] or None)
    if name in ("SUBACK", "UNSUBACK"):
        return Case(name.lower(), v=v, pid=s[1], codes=s[3], props=s[2] or None)
    if name in ("PINGREQ", "PINGRESP"):
        return Case("ping", _v=v, ptype=t)
    if name == "AUTH":
        return Case("auth", reason=s[1], props=s[2] or None)
    return Case("disconnect", v=v, reason=s[1], props=s[2] or None)


def canon(s):
    """A summary with TOPIC_ALIAS moved first (re-encoding an empty-topic PUBLISH
    passes the alias as `alias`, which is written before the other properties)."""
    if s[0] != "PUBLISH":
        return s
    pr = s[7]
    pr = [x for x in pr if x[0] == P.TOPIC_ALIAS] + [x for x in pr if x[0] != P.TOPIC_ALIAS]
    return s[:7] + (pr,)


def _is_topic_name(t):
    if type(t) is str:
        t = t.encode()
    return len(t) > 0 and b"+" not in t and b"#" not in t


def assert_spec_valid(s, v):
    """Rules of MQTT a decoded packet must satisfy whatever the bytes were (an
    oracle independent of the codec's own checks)."""
    name = s[0]
    if name == "PUBLISH":
        _, qos, dup, retain, pid, topic, payload, pr = s
        assert qos in (0, 1, 2) and (pid != 0) == (qos != 0) and (qos or not dup)
        assert _is_topic_name(topic) or (v == 5 and not topic and
                                         any(k == P.TOPIC_ALIAS for k, x in pr))
        topic.decode()
    elif name == "CONNECT":
        _, ver, cid, clean, ka, pr, w, u, pw = s
        assert ver in (4, 5)
        if w is not None:
            assert _is_topic_name(w[0]), "will topic must be a topic name [MQTT-4.7.0-1]"
            assert w[2] in (0, 1, 2)
        if ver == 4:
            assert pw is None or u is not None  # [MQTT-3.1.2-22]
    elif name == "CONNACK":
        assert not (s[1] and s[2])  # [MQTT-3.2.2-6]
    elif name == "SUBSCRIBE":
        assert s[3]
        for f, o in s[3]:
            assert o & 3 != 3 and o >> 4 <= 2 and not o & 0xC0 and (v == 5 or o < 4)
            assert not (f.startswith("$share/") and o & 4), \
                "no local on a shared subscription [MQTT-3.8.3-4]"
            control.check_filter(f)
    elif name == "UNSUBSCRIBE":
        assert s[3]
        for f in s[3]:
            control.check_filter(f)
    elif name in ("SUBACK", "UNSUBACK"):
        assert s[3] or (name == "UNSUBACK" and v == 4)
    for pr in _all_props(s):
        for k, x in pr:
            if k == P.RESPONSE_TOPIC:
                assert _is_topic_name(x) or x == ""  # [MQTT-3.3.2-14]
            if k == P.TOPIC_ALIAS:
                assert x != 0


def _all_props(s):
    name = s[0]
    if name == "PUBLISH":
        return [s[7]]
    if name == "CONNECT":
        return [s[5]] + ([s[6][4]] if s[6] else [])
    if name in ("PINGREQ", "PINGRESP"):
        return []
    if name in ("SUBSCRIBE", "UNSUBSCRIBE", "SUBACK", "UNSUBACK"):
        return [s[2]]
    return [s[-1]]


def check_decode(pkt, buf, v, off=0, end=None, first=None):
    """The robustness rule: decoding either raises codec.MQTTError (with a reason a
    decoder may send) or succeeds; then the decoded values encode again and decode
    to the same values. Any other exception propagates and fails the test.
    With `first`, buf[off:end] is a body decoded with server.decode()."""
    if end is None:
        end = len(buf)
    try:
        if first is None:
            server.decode_packet(pkt, buf, off, end, v)
        else:
            server.decode(pkt, first, buf, off, end, v)
    except codec.MQTTError as e:
        assert e.reason in DECODE_REASONS, "unexpected reason %r" % (e.args,)
        return None
    s = summarize(pkt)
    assert_spec_valid(s, v)
    case = case_from_summary(s, v)
    try:
        again = case.encode()
    except (ValueError, TypeError) as e:
        pytest.fail("decoded %r from %r (v=%d), but the encoder refuses it: %r"
                    % (s, bytes(buf[off:end]), v, e))
    pkt2 = publish.Packet()
    server.decode_packet(pkt2, again, 0, len(again), v)
    assert canon(summarize(pkt2)) == canon(s)
    # MQTT leaves almost no freedom in how a packet is written, so what was accepted
    # must be the very bytes the encoder writes for the decoded values.
    orig = bytes(buf[off:end]) if first is None else frame(first, buf[off:end])
    if orig != again:
        t = pkt.type
        f0, body = split_packet(orig)
        f1, body1 = split_packet(again)
        if t in ACKS or t in (codec.DISCONNECT, codec.AUTH):
            # the only other forms: reason 0x00 and/or an empty property block
            # written out where the encoder leaves them off [U-3.4.2-a]
            assert v == 5 and f0 == f1 and body in (body1 + b"\0", body1 + b"\0\0"), \
                "accepted %r, which re-encodes as %r" % (orig, again)
        elif t == codec.PUBLISH and not s[5]:
            # empty topic: same values (asserted above), but our encoder writes the
            # Topic Alias first, so the property order may differ from the input
            pass
        else:
            pytest.fail("accepted %r (v=%d) as %r, which encodes as %r" % (orig, v, s, again))
    return s


# ---- strategies ----------------------------------------------------------------

SPECIAL_CHARS = ["\ufeff", "\U0001F600", "\U00010000", "\U0010FFFF", "\uffff", "\ufffe",
                 "\u00e9", "\u07ff", "\u0800", "\ud7ff", "\ue000", "\x7f", "\x01", "/", "$",
                 " ", "a"]
chars = st.one_of(
    st.characters(min_codepoint=1, max_codepoint=0x7F),
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
    st.sampled_from(SPECIAL_CHARS),
)
name_chars = chars.filter(lambda c: c not in "+#")


def text(min_size=0, max_size=10, alphabet=chars):
    return st.text(alphabet, min_size=min_size, max_size=max_size)


def wire(strategy):
    """A str, or the same text as bytes / bytearray (the API takes all three)."""
    return st.tuples(strategy, st.sampled_from((str, bytes, bytearray))).map(
        lambda x: x[0] if x[1] is str else x[1](x[0].encode()))


topic_names = text(1, 12, name_chars)
level = text(0, 6, name_chars.filter(lambda c: c != "/")).filter(lambda s: s != "$share")


@st.composite
def topic_filters(draw, v):
    levels = draw(st.lists(st.one_of(level, st.just("+")), max_size=4))
    if draw(st.booleans()) or not levels or levels == [""]:
        levels.append("#")
    f = "/".join(levels)
    if v == 5 and draw(st.integers(0, 5)) == 0:
        f = "$share/%s/%s" % (draw(text(1, 5, name_chars.filter(lambda c: c != "/"))), f)
    return f


pids = st.integers(1, 0xFFFF)
payloads = st.tuples(
    st.one_of(st.binary(max_size=40), st.binary(min_size=120, max_size=300)),
    st.sampled_from((bytes, bytearray, memoryview)),
).map(lambda x: x[1](x[0]))


def prop_value(pid):
    t = P._TYPE[pid]
    if pid == P.TOPIC_ALIAS:
        return st.integers(1, 0xFFFF)
    if pid == P.RESPONSE_TOPIC:
        return wire(topic_names)
    return {
        P._BYTE: st.integers(0, 255),
        P._BOOL: st.integers(0, 1),
        P._U16: st.integers(0, 0xFFFF),
        P._U16_NZ: st.integers(1, 0xFFFF),
        P._U32: st.integers(0, 0xFFFFFFFF),
        P._U32_NZ: st.integers(1, 0xFFFFFFFF),
        P._VBI_NZ: st.one_of(st.integers(1, 127), st.integers(1, codec.VBI_MAX)),
        P._STR: wire(text()),
        P._BIN: st.binary(max_size=12),
        P._PAIR: st.tuples(wire(text(max_size=6)), wire(text(max_size=6))),
    }[t]


def allowed_ids(where):
    return [pid for pid in range(1, P._NIDS)
            if P._TYPE[pid] and P._WHERE[pid] & (1 << where)]


@st.composite
def props_for(draw, where, exclude=()):
    """A valid MQTT 5 property sequence for packet type `where` (0: Will)."""
    ids = [i for i in allowed_ids(where) if i not in exclude]
    single = [i for i in ids if i not in (P.USER_PROPERTY, P.SUBSCRIPTION_ID)]
    chosen = draw(st.lists(st.sampled_from(single), unique=True, max_size=4)) if single else []
    items = [(pid, draw(prop_value(pid))) for pid in chosen]
    if P.USER_PROPERTY in ids:  # repeated, order significant
        items += [(P.USER_PROPERTY, kv) for kv in
                  draw(st.lists(prop_value(P.USER_PROPERTY), max_size=3))]
    if P.SUBSCRIPTION_ID in ids:  # several only in PUBLISH (server to client)
        n = 3 if where == codec.PUBLISH else 1
        items += [(P.SUBSCRIPTION_ID, x) for x in
                  draw(st.lists(prop_value(P.SUBSCRIPTION_ID), max_size=n))]
    items = draw(st.permutations(items))
    if not items:
        return draw(st.sampled_from((None, [], ())))
    return draw(st.sampled_from((list, tuple)))(items)


def maybe_props(v, where):
    return props_for(where) if v == 5 else st.just(None)


@st.composite
def publish_cases(draw, v):
    qos = draw(st.integers(0, 2))
    alias = draw(st.one_of(st.just(0), st.integers(1, 0xFFFF))) if v == 5 else 0
    pr = draw(props_for(codec.PUBLISH, (P.TOPIC_ALIAS,) if alias else ())) if v == 5 else None
    topic = draw(wire(topic_names) if not alias else
                 st.one_of(wire(topic_names), st.sampled_from(("", b""))))
    return Case("publish", v=v, topic=topic, payload=draw(st.one_of(payloads, st.just(None))),
                qos=qos, pid=draw(pids) if qos else 0, retain=draw(st.booleans()),
                dup=draw(st.booleans()) if qos else False, props=pr, alias=alias)


@st.composite
def ack_cases(draw, v):
    ptype = draw(st.sampled_from(ACKS))
    if v == 4:
        return Case("ack", v=v, ptype=ptype, pid=draw(pids))
    return Case("ack", v=v, ptype=ptype, pid=draw(pids),
                reason=draw(st.sampled_from(ack_reasons(ptype))), props=draw(props_for(ptype)))


@st.composite
def connect_cases(draw, v):
    will = None
    if draw(st.booleans()):
        will = control.Will(draw(wire(topic_names)), draw(payloads), draw(st.integers(0, 2)),
                            draw(st.booleans()), draw(maybe_props(v, P.WILL)))
    username = draw(st.one_of(st.none(), wire(text(max_size=8))))
    password = draw(st.one_of(st.none(), st.binary(max_size=8)))
    if v == 4 and username is None:
        password = None  # [MQTT-3.1.2-22]
    return Case("connect", v=v, client_id=draw(wire(text(max_size=23))),
                keepalive=draw(st.integers(0, 0xFFFF)), clean=draw(st.booleans()),
                props=draw(maybe_props(v, codec.CONNECT)), will=will,
                username=username, password=password)


@st.composite
def connack_cases(draw, v):
    reason = draw(st.sampled_from(CONNACK_V5 if v == 5 else CONNACK_V4))
    sp = draw(st.booleans()) if reason == 0 else False  # [MQTT-3.2.2-6]
    return Case("connack", v=v, session_present=sp, reason=reason,
                props=draw(maybe_props(v, codec.CONNACK)))


@st.composite
def sub_options(draw, v, topic_filter):
    qos = draw(st.integers(0, 2))
    if v == 4:
        return qos
    nl = 0 if topic_filter.startswith("$share/") else draw(st.integers(0, 1))  # [MQTT-3.8.3-4]
    return qos | nl << 2 | draw(st.integers(0, 1)) << 3 | draw(st.integers(0, 2)) << 4


@st.composite
def subscribe_cases(draw, v):
    filters = draw(st.lists(topic_filters(v), min_size=1, max_size=4))
    subs = [(draw(wire(st.just(f))), draw(sub_options(v, f))) for f in filters]
    return Case("subscribe", v=v, pid=draw(pids), subs=subs,
                props=draw(maybe_props(v, codec.SUBSCRIBE)))


@st.composite
def suback_cases(draw, v):
    codes = draw(st.lists(st.sampled_from(SUBACK_V5 if v == 5 else SUBACK_V4),
                          min_size=1, max_size=5))
    return Case("suback", v=v, pid=draw(pids), codes=draw(st.sampled_from((bytes, list)))(codes),
                props=draw(maybe_props(v, codec.SUBACK)))


@st.composite
def unsubscribe_cases(draw, v):
    filters = draw(st.lists(wire(topic_filters(v)), min_size=1, max_size=4))
    return Case("unsubscribe", v=v, pid=draw(pids), filters=filters,
                props=draw(maybe_props(v, codec.UNSUBSCRIBE)))


@st.composite
def unsuback_cases(draw, v):
    if v == 4:
        return Case("unsuback", v=v, pid=draw(pids))
    codes = draw(st.lists(st.sampled_from(UNSUBACK_V5), min_size=1, max_size=5))
    return Case("unsuback", v=v, pid=draw(pids), codes=bytes(codes),
                props=draw(props_for(codec.UNSUBACK)))


def ping_cases(v):
    return st.sampled_from((codec.PINGREQ, codec.PINGRESP)).map(
        lambda t: Case("ping", _v=v, ptype=t))


@st.composite
def disconnect_cases(draw, v):
    if v == 4:
        return Case("disconnect", v=v)
    return Case("disconnect", v=v, reason=draw(st.sampled_from(DISCONNECT_V5)),
                props=draw(props_for(codec.DISCONNECT)))


@st.composite
def auth_cases(draw, v):
    return Case("auth", reason=draw(st.sampled_from(AUTH_V5)), props=draw(props_for(codec.AUTH)))


CASE_KINDS = {
    "publish": publish_cases, "ack": ack_cases, "connect": connect_cases,
    "connack": connack_cases, "subscribe": subscribe_cases, "suback": suback_cases,
    "unsubscribe": unsubscribe_cases, "unsuback": unsuback_cases, "ping": ping_cases,
    "disconnect": disconnect_cases, "auth": auth_cases,
}


def cases(v, kinds=None):
    kinds = kinds or list(CASE_KINDS)
    if v == 4:
        kinds = [k for k in kinds if k != "auth"]  # AUTH is MQTT 5 only
    return st.one_of([CASE_KINDS[k](v) for k in kinds])


any_case = st.one_of(cases(4), cases(5))
SMALL = 260  # corruption tests: keep packets short (every position is tried)
small_case = any_case.filter(lambda c: c.size() <= SMALL)


# ---- 2. round trips ------------------------------------------------------------

def roundtrip(case):
    wire_bytes = case.encode()
    pkt = publish.Packet()
    t = server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), case.v)
    assert NAMES[t] == expected(case)[0]
    assert summarize(pkt) == expected(case)
    assert_spec_valid(summarize(pkt), case.v)
    # the same bytes inside a larger buffer, at an offset, with explicit end
    framed = b"\x00\xff" + wire_bytes + b"\x30\x00"
    server.decode_packet(pkt, bytearray(framed), 2, 2 + len(wire_bytes), case.v)
    assert summarize(pkt) == expected(case)
    # a buffer one byte short is refused
    with pytest.raises(ValueError):
        case.encode_into(bytearray(len(wire_bytes) - 1), 0)
    return wire_bytes


# AUTH exists only in MQTT 5, so it has no 3.1.1 case.
ROUNDTRIP_CASES = [(k, v) for k in sorted(CASE_KINDS) for v in (4, 5)
                   if not (k == "auth" and v == 4)]


@pytest.mark.parametrize("kind,v", ROUNDTRIP_CASES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_roundtrip(kind, v, data):
    case = data.draw(CASE_KINDS[kind](v), label="case")
    wire_bytes = roundtrip(case)
    if kind in ("ack", "disconnect", "auth") and not case.args.get("reason") \
            and not case.args.get("props"):
        assert len(wire_bytes) == (4 if kind == "ack" else 2)  # shortest forms


def test_roundtrip_long_remaining_lengths():
    """Remaining lengths that take 2, 3 and 4 bytes."""
    for n in (200, 16380, 16390, 2097140, 2097160):
        roundtrip(Case("publish", v=5, topic="t/\U0001F600", payload=bytes(n), qos=1, pid=7,
                       props=[(P.USER_PROPERTY, ("k", "v"))]))


# ---- the codec never produces an invalid packet ----------------------------------

def rarely(common, rare):
    """`rare` about one time in twenty (the 64 KiB values are slow to encode)."""
    return st.integers(0, 19).flatmap(lambda i: st.just(rare) if i == 0 else common)


def loose_value(pid):
    t = P._TYPE[pid]
    if t in (P._STR, P._PAIR):
        s = st.one_of(text(), st.sampled_from(("", "a/+", "#")))
        s = wire(rarely(s, "x" * 65535).flatmap(lambda x: rarely(st.just(x), "x" * 65536)))
        return st.tuples(s, s) if t == P._PAIR else s
    if t == P._BIN:
        return rarely(st.binary(max_size=4), b"b" * 65535).flatmap(
            lambda x: rarely(st.just(x), b"b" * 65536))
    top = {P._BYTE: 255, P._BOOL: 1, P._U16: 0xFFFF, P._U16_NZ: 0xFFFF, P._U32: 0xFFFFFFFF,
           P._U32_NZ: 0xFFFFFFFF, P._VBI_NZ: codec.VBI_MAX}[t]
    return st.sampled_from((-1, 0, 1, 2, top, top + 1))


@st.composite
def loose_props(draw, where):
    ids = allowed_ids(where)
    items = draw(st.lists(st.sampled_from(ids), max_size=4))
    return [(pid, draw(loose_value(pid))) for pid in items] or None


def lenient(strategy, **overrides):
    """Take a valid case and replace one or two of its arguments with loose ones
    (one at a time, so that each kind of bad argument meets otherwise valid ones)."""
    @st.composite
    def build(draw):
        case = draw(strategy)
        keys = [k for k in overrides if k in case.args or k in ("codes", "reason")]
        if not keys:
            return case
        for k in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=2, unique=True)):
            case.args[k] = draw(overrides[k])
        return case
    return build()


loose_text = st.one_of(text(), st.sampled_from(("", "+", "a/#")))
loose_text = rarely(loose_text, "x" * 65536)
loose_bin = rarely(st.binary(max_size=4), b"p" * 65536)


def loose_cases(v):
    where = {"publish": codec.PUBLISH, "connect": codec.CONNECT, "connack": codec.CONNACK,
             "subscribe": codec.SUBSCRIBE, "suback": codec.SUBACK,
             "unsubscribe": codec.UNSUBSCRIBE, "unsuback": codec.UNSUBACK,
             "disconnect": codec.DISCONNECT, "auth": codec.AUTH}
    out = []
    for kind in CASE_KINDS:
        if kind == "auth" and v == 4:
            continue
        over = {"pid": st.integers(-1, 0x10000)}
        if kind in where:
            over["props"] = loose_props(where[kind])
        if kind == "publish":
            over.update(topic=wire(loose_text), qos=st.integers(-1, 3), dup=st.booleans(),
                        alias=st.integers(-1, 0x10000))
        elif kind == "ack":
            over.update(reason=st.integers(0, 255),
                        props=st.sampled_from(ACKS).flatmap(loose_props))
        elif kind == "connect":
            over.update(client_id=wire(loose_text), keepalive=st.integers(-1, 0x10000),
                        username=wire(loose_text), password=loose_bin,
                        will=st.builds(control.Will, wire(loose_text), loose_bin,
                                       st.integers(-1, 3), st.booleans(), loose_props(P.WILL)))
        elif kind in ("connack", "disconnect", "auth"):
            over.update(reason=st.integers(0, 255), session_present=st.booleans())
        elif kind == "subscribe":
            filters = st.one_of(topic_filters(5), loose_text,
                                st.sampled_from(("$share/g/a", "$share/g/#", "$share//a")))
            opts = st.one_of(st.sampled_from((4, 5, 6, 0x14, 0x2C, 0x30)), st.integers(0, 255))
            over.update(subs=st.lists(st.tuples(wire(filters), opts), max_size=2))
        elif kind == "unsubscribe":
            over.update(filters=st.lists(wire(loose_text), max_size=3))
        elif kind in ("suback", "unsuback"):
            over.update(codes=st.lists(st.integers(0, 255), max_size=3).map(bytes))
        out.append(lenient(CASE_KINDS[kind](v), **over))
    return st.one_of(out)


# Pinned examples: each once made the encoder write a packet MQTT forbids.
PINNED = [
    Case("unsuback", v=5, pid=1, codes=b"", props=None),  # 5.0 UNSUBACK needs reason codes
    Case("unsuback", v=5, pid=1),  # ... and codes=() is the default
    Case("suback", v=4, pid=1, codes=[]),
    Case("connack", v=4, session_present=True, reason=1),  # [MQTT-3.2.2-6]
    Case("connack", v=5, session_present=True, reason=0x80),
    Case("connect", v=4, client_id="", username="", password=b"p" * 65536),  # > 65535 bytes
    Case("connect", v=5, client_id="", will=control.Will("t", b"w" * 65536)),
    Case("publish", v=5, topic="t", payload=b"", props=[(P.CORRELATION_DATA, b"c" * 65536)]),
    Case("connect", v=4, client_id="", will=control.Will("", b"")),  # will topic: topic name
    Case("connect", v=5, client_id="", will=control.Will("a/+", b"")),
    Case("connect", v=5, client_id="", will=control.Will(b"#", b"")),
    Case("subscribe", v=5, pid=1, subs=[("$share/g/a", 4)]),  # [MQTT-3.8.3-4]
    Case("subscribe", v=5, pid=1, subs=[(b"$share/g/#", 0x15)]),
    Case("publish", v=5, topic="t", payload=b"", props=[(P.TOPIC_ALIAS, 0)]),  # alias 0
    Case("subscribe", v=5, pid=1, subs=[("a", 0)],
         props=[(P.SUBSCRIPTION_ID, 1), (P.SUBSCRIPTION_ID, 2)]),  # once in SUBSCRIBE
]


def _pin(test):
    for case in reversed(PINNED):
        test = example(case=case)(test)
    return test


@settings(max_examples=800, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@_pin
@given(case=st.one_of(loose_cases(4), loose_cases(5)))
def test_encoder_never_produces_invalid_packet(case):
    """Encoding either refuses the arguments (ValueError/TypeError) or writes a packet
    that decodes back to them exactly."""
    try:
        wire_bytes = case.encode()
    except (ValueError, TypeError):
        return
    pkt = publish.Packet()
    try:
        server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), case.v)
    except codec.MQTTError as e:
        pytest.fail("encoder accepted %r but wrote a packet the decoder rejects: %r"
                    % (case, e.args))
    assert summarize(pkt) == expected(case)
    assert_spec_valid(summarize(pkt), case.v)


# ---- property blocks against an independent table --------------------------------

# MQTT 5.0 Table 2-4, written out again here: id -> (value type, packets it may be in).
_ACK_NAMES = {"PUBACK", "PUBREC", "PUBREL", "PUBCOMP"}
SPEC_PROPS = {
    0x01: ("bool", {"PUBLISH", "WILL"}),  # Payload Format Indicator
    0x02: ("u32", {"PUBLISH", "WILL"}),  # Message Expiry Interval
    0x03: ("str", {"PUBLISH", "WILL"}),  # Content Type
    0x08: ("str", {"PUBLISH", "WILL"}),  # Response Topic
    0x09: ("bin", {"PUBLISH", "WILL"}),  # Correlation Data
    0x0B: ("vbi", {"PUBLISH", "SUBSCRIBE"}),  # Subscription Identifier
    0x11: ("u32", {"CONNECT", "CONNACK", "DISCONNECT"}),  # Session Expiry Interval
    0x12: ("str", {"CONNACK"}),  # Assigned Client Identifier
    0x13: ("u16", {"CONNACK"}),  # Server Keep Alive
    0x15: ("str", {"CONNECT", "CONNACK", "AUTH"}),  # Authentication Method
    0x16: ("bin", {"CONNECT", "CONNACK", "AUTH"}),  # Authentication Data
    0x17: ("bool", {"CONNECT"}),  # Request Problem Information
    0x18: ("u32", {"WILL"}),  # Will Delay Interval
    0x19: ("bool", {"CONNECT"}),  # Request Response Information
    0x1A: ("str", {"CONNACK"}),  # Response Information
    0x1C: ("str", {"CONNACK", "DISCONNECT"}),  # Server Reference
    0x1F: ("str", {"CONNACK", "SUBACK", "UNSUBACK", "DISCONNECT", "AUTH"} | _ACK_NAMES),
    0x21: ("u16", {"CONNECT", "CONNACK"}),  # Receive Maximum
    0x22: ("u16", {"CONNECT", "CONNACK"}),  # Topic Alias Maximum
    0x23: ("u16", {"PUBLISH"}),  # Topic Alias
    0x24: ("bool", {"CONNACK"}),  # Maximum QoS
    0x25: ("bool", {"CONNACK"}),  # Retain Available
    0x26: ("pair", None),  # User Property: everywhere
    0x27: ("u32", {"CONNECT", "CONNACK"}),  # Maximum Packet Size
    0x28: ("bool", {"CONNACK"}),  # Wildcard Subscription Available
    0x29: ("bool", {"CONNACK"}),  # Subscription Identifiers Available
    0x2A: ("bool", {"CONNACK"}),  # Shared Subscription Available
}
SPEC_NONZERO = {0x0B, 0x21, 0x23, 0x27}
BLOCK_PACKETS = ["PUBLISH", "WILL", "CONNECT", "CONNACK", "PUBACK", "PUBREC", "PUBREL",
                 "PUBCOMP", "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "DISCONNECT",
                 "AUTH"]


def spec_allows(items, where):
    """Whether MQTT 5.0 allows this property list in packet `where`."""
    seen = set()
    for pid, x in items:
        if pid not in SPEC_PROPS:
            return False
        t, packets = SPEC_PROPS[pid]
        if packets is not None and where not in packets:
            return False
        if pid in seen and pid != 0x26 and not (pid == 0x0B and where == "PUBLISH"):
            return False  # single-valued; Subscription Identifier repeats only in PUBLISH
        seen.add(pid)
        if (t == "bool" and x > 1) or (pid in SPEC_NONZERO and x == 0):
            return False
        if t == "vbi" and x > codec.VBI_MAX:
            return False  # at most 4 bytes [MQTT-1.5.5-1]
        if pid == 0x08 and ("+" in x or "#" in x):
            return False  # [MQTT-3.3.2-14]
    return True


def raw_props(items):
    """Encode a property list by hand (no validation)."""
    out = bytearray()
    for pid, x in items:
        out.append(pid)
        t = SPEC_PROPS[pid][0] if pid in SPEC_PROPS else "raw"
        if t == "bool":
            out.append(x)
        elif t == "u16":
            out += x.to_bytes(2, "big")
        elif t == "u32":
            out += x.to_bytes(4, "big")
        elif t == "vbi":
            while x > 127:  # by hand: values past VBI_MAX take 5 bytes
                out.append(x & 0x7F | 0x80)
                x >>= 7
            out.append(x)
        elif t == "pair":
            out += mqtt_str(x[0]) + mqtt_str(x[1])
        elif t == "raw":
            out += x
        else:
            out += mqtt_str(x)
    return bytes(out)


def vbi(n):
    b = bytearray(4)
    return bytes(b[:codec.put_vbi(b, 0, n)])


def mqtt_str(x):
    x = x.encode() if type(x) is str else x
    return len(x).to_bytes(2, "big") + x


def embed(where, block):
    """A whole MQTT 5 packet of type `where` carrying the property block."""
    pb = vbi(len(block)) + block
    connect = mqtt_str("MQTT") + b"\x05"
    body = {
        "PUBLISH": (0x30, mqtt_str("t") + pb + b"payload"),
        "WILL": (0x10, connect + b"\x06\x00\x3c\x00" + mqtt_str("") + pb + mqtt_str("w")
                 + mqtt_str(b"")),
        "CONNECT": (0x10, connect + b"\x02\x00\x3c" + pb + mqtt_str("c")),
        "CONNACK": (0x20, b"\x00\x00" + pb),
        "PUBACK": (0x40, b"\x00\x01\x00" + pb),
        "PUBREC": (0x50, b"\x00\x01\x10" + pb),
        "PUBREL": (0x62, b"\x00\x01\x92" + pb),
        "PUBCOMP": (0x70, b"\x00\x01\x00" + pb),
        "SUBSCRIBE": (0x82, b"\x00\x01" + pb + mqtt_str("a/+") + b"\x01"),
        "SUBACK": (0x90, b"\x00\x01" + pb + b"\x01"),
        "UNSUBSCRIBE": (0xA2, b"\x00\x01" + pb + mqtt_str("a/#")),
        "UNSUBACK": (0xB0, b"\x00\x01" + pb + b"\x00"),
        "DISCONNECT": (0xE0, b"\x04" + pb),
        "AUTH": (0xF0, b"\x18" + pb),
    }[where]
    return frame(*body)


def raw_value(pid, where):
    t = SPEC_PROPS[pid][0] if pid in SPEC_PROPS else "raw"
    if t == "bool":
        return st.one_of(st.integers(0, 1), st.sampled_from((0, 1, 2, 0x80, 0xFF)))
    if t == "u16":
        return st.one_of(st.integers(0, 1), st.integers(0, 0xFFFF))
    if t == "u32":
        return st.one_of(st.integers(0, 1), st.integers(0, 0xFFFFFFFF))
    if t == "vbi":
        return st.one_of(st.integers(0, 1), st.integers(0, codec.VBI_MAX),
                         st.integers(codec.VBI_MAX, 2 ** 35 - 1))
    if t == "bin":
        return st.binary(max_size=6)
    if t == "pair":
        return st.tuples(text(max_size=4), text(max_size=4))
    if t == "raw":
        return st.binary(max_size=4)
    if pid == 0x08:
        return st.one_of(topic_names, st.sampled_from(("a/+", "#", "x#y", "")))
    return text(max_size=6)


@st.composite
def raw_prop_lists(draw, where):
    ok = [pid for pid, (t, w) in SPEC_PROPS.items() if w is None or where in w]
    # a small pool of ids, so repeats are common; now and then any id at all
    pool = draw(st.lists(st.sampled_from(ok), min_size=1, max_size=3))
    if draw(st.integers(0, 3)) == 0:
        pool.append(draw(st.one_of(st.sampled_from(sorted(SPEC_PROPS)), st.integers(1, 0x2F))))
    ids = draw(st.lists(st.sampled_from(pool), max_size=5))
    return [(pid, draw(raw_value(pid, where))) for pid in ids]


def check_block(items, where):
    wire_bytes = embed(where, raw_props(items))
    pkt = publish.Packet()
    try:
        server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), 5)
    except codec.MQTTError as e:
        assert e.reason in DECODE_REASONS
        assert not spec_allows(items, where), "valid properties refused: %r" % (e.args,)
        return
    assert spec_allows(items, where), "invalid properties accepted"
    if where == "CONNECT":
        got = pkt.extra.props
    elif where == "WILL":
        got = pkt.extra.will.props
    else:
        got = host.props_items(pkt.props)
    assert got == items
    check_decode(pkt, wire_bytes, 5)


@settings(max_examples=1500, deadline=None)
@given(data=st.data(), where=st.sampled_from(BLOCK_PACKETS))
def test_property_blocks_against_spec_table(data, where):
    """A hand-written property block is accepted exactly when MQTT 5.0 allows it,
    and then read back unchanged (in wire order)."""
    check_block(data.draw(raw_prop_lists(where), label="items"), where)


BOUNDARY = {"bool": (0, 1, 2, 255), "u16": (0, 1, 0xFFFF), "u32": (0, 1, 0xFFFFFFFF),
            "vbi": (0, 1, 127, 128, codec.VBI_MAX, codec.VBI_MAX + 1), "str": ("", "s", "a/+", "#"),
            "bin": (b"", b"\0"), "pair": (("", ""), ("k", "v")), "raw": (b"", b"\0\0\0\0")}


@pytest.mark.parametrize("where", BLOCK_PACKETS)
def test_property_table_exhaustive(where):
    """Every property id 0x01..0x2F with its boundary values, alone and twice, and
    after a User Property, in every packet that has properties."""
    for pid in range(1, 0x30):
        t = SPEC_PROPS[pid][0] if pid in SPEC_PROPS else "raw"
        for x in BOUNDARY[t]:
            check_block([(pid, x)], where)
            check_block([(pid, x), (pid, x)], where)
            check_block([(0x26, ("k", "v")), (pid, x)], where)


@pytest.mark.parametrize("v", [4, 5])
def test_connect_flags_exhaustive(v):
    """Every value of the CONNECT flags byte, with the fields the flags announce:
    accepted exactly when MQTT allows the combination."""
    for flags in range(256):
        body = mqtt_str("MQTT") + bytes((v, flags)) + b"\x00\x3c"
        body += (b"\x00" if v == 5 else b"") + mqtt_str("c")
        if flags & 0x04:
            body += (b"\x00" if v == 5 else b"") + mqtt_str("w") + mqtt_str(b"m")
        if flags & 0x80:
            body += mqtt_str("u")
        if flags & 0x40:
            body += mqtt_str(b"p")
        wqos = (flags >> 3) & 3
        ok = (not flags & 0x01  # reserved [MQTT-3.1.2-3]
              and (flags & 0x04 or not (wqos or flags & 0x20))  # [MQTT-3.1.2-11] [-13]
              and wqos != 3  # [MQTT-3.1.2-12]
              and (v == 5 or flags & 0x80 or not flags & 0x40))  # [MQTT-3.1.2-22]
        pkt = publish.Packet()
        wire_bytes = frame(0x10, body)
        try:
            server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), v)
        except codec.MQTTError:
            assert not ok, "flags %#04x refused" % flags
            continue
        assert ok, "flags %#04x accepted" % flags
        c = pkt.extra
        assert c.clean == bool(flags & 0x02)
        assert (c.will is not None) == bool(flags & 0x04)
        if c.will:
            assert (c.will.topic, c.will.payload, c.will.qos, c.will.retain) == \
                ("w", b"m", wqos, bool(flags & 0x20))
        assert c.username == ("u" if flags & 0x80 else None)
        assert c.password == (b"p" if flags & 0x40 else None)
        check_decode(pkt, wire_bytes, v)


@pytest.mark.parametrize("v", [4, 5])
def test_subscription_options_exhaustive(v):
    for f in ("a/b", "$share/g/a"):
        for opts in range(256):
            ok = (opts & 3 != 3 and opts >> 4 <= 2 and not opts & 0xC0
                  and (v == 5 or opts < 4)  # 3.1.1: QoS only [MQTT-3.8.3-4 (3.1.1)]
                  and not (f.startswith("$share/") and opts & 4))  # [MQTT-3.8.3-4]
            body = b"\x00\x07" + (b"\x00" if v == 5 else b"") + mqtt_str(f) + bytes((opts,))
            wire_bytes = frame(0x82, body)
            pkt = publish.Packet()
            try:
                server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), v)
            except codec.MQTTError:
                assert not ok, "options %#04x on %r refused" % (opts, f)
                continue
            assert ok, "options %#04x on %r accepted" % (opts, f)
            assert pkt.extra == [(f, opts)]


@pytest.mark.parametrize("v", [4, 5])
def test_connack_flags_exhaustive(v):
    for flags in range(256):
        for reason in range(256):
            ok = flags < 2 and reason in (CONNACK_V5 if v == 5 else CONNACK_V4) \
                and not (flags and reason)  # [MQTT-3.2.2-1] [MQTT-3.2.2-6]
            wire_bytes = frame(0x20, bytes((flags, reason)) + (b"\x00" if v == 5 else b""))
            pkt = publish.Packet()
            try:
                server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), v)
            except codec.MQTTError:
                assert not ok
                continue
            assert ok and (pkt.sp, pkt.reason) == (flags, reason)


@pytest.mark.parametrize("v", [4, 5])
def test_first_byte_exhaustive(v):
    """Every first byte: packet types and their fixed-header flags [MQTT-2.1.3-1]."""
    bodies = {1: None, 2: b"\x00\x00", 3: b"\x00\x01t\x00\x01", 4: b"\x00\x01",
              5: b"\x00\x01", 6: b"\x00\x01", 7: b"\x00\x01", 8: b"\x00\x01\x00\x01a\x00",
              9: b"\x00\x01\x00", 10: b"\x00\x01\x00\x01a", 11: b"\x00\x01", 12: b"",
              13: b"", 14: b"", 15: b""}
    for first in range(256):
        t, fl = first >> 4, first & 15
        if t == 1 or t == 0:
            continue  # CONNECT: see test_connect_flags_exhaustive
        body = bodies[t]
        if v == 5 and t in (2, 8, 9, 10, 11):  # property length after the fixed part
            body = body[:2] + b"\x00" + body[2:] + (b"\x00" if t == 11 else b"")
        if t == 3:
            ok = fl & 6 != 6 and (fl & 6 or not fl & 8)  # [MQTT-3.3.1-4] [MQTT-3.3.1-2]
            if not fl & 6:
                body = b"\x00\x01t"  # no packet id on QoS 0
            if v == 5:
                body = body[:3] + (body[3:5] if fl & 6 else b"") + b"\x00"
        elif t in (6, 8, 10):
            ok = fl == 2
        else:
            ok = fl == 0 and (t != 15 or v == 5)
        wire_bytes = frame(first, body)
        pkt = publish.Packet()
        try:
            server.decode_packet(pkt, wire_bytes, 0, len(wire_bytes), v)
        except codec.MQTTError:
            assert not ok, "first byte %#04x refused" % first
            continue
        assert ok, "first byte %#04x accepted" % first
        check_decode(pkt, wire_bytes, v)


# ---- 3. corruption, truncation, arbitrary bytes -------------------------------------

byte_values = st.one_of(st.sampled_from((0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, 0x23, 0x2B,
                                         0xC0, 0xED, 0xF4, 0x26)),
                        st.integers(0, 255))


def frame(first, body):
    head = bytearray(5)
    n = codec.put_vbi(head, 0, len(body))
    return bytes((first,)) + bytes(head[:n]) + bytes(body)


def split_packet(wire_bytes):
    c = publish.Packet().cur
    c.set(wire_bytes, 1, len(wire_bytes))
    rl = c.vbi()
    return wire_bytes[0], wire_bytes[c.pos:c.pos + rl]


INTERESTING = (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, 0x23, 0x2B)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(case=small_case, data=st.data())
def test_single_byte_corruption(case, data):
    """Every position gets a few replacement bytes: two chosen by hypothesis (often a
    byte found elsewhere in the packet: a repeated property id, a length...), the
    boundary values and wildcards, and the byte with its low / high bit flipped. The
    first byte (packet type and flags) gets all 256 values."""
    wire_bytes = case.encode()
    n = len(wire_bytes)
    own = st.sampled_from(sorted(set(wire_bytes)))
    reps = data.draw(st.lists(st.tuples(st.one_of(byte_values, own), st.one_of(own, byte_values)),
                              min_size=n, max_size=n), label="replacements")
    pkt = publish.Packet()
    for i in range(n):
        o = wire_bytes[i]
        values = range(256) if i == 0 else set(INTERESTING + reps[i] + (o ^ 1, o ^ 0x80))
        for x in values:
            if x == o:
                continue
            b = bytearray(wire_bytes)
            b[i] = x
            for v in (4, 5):
                check_decode(pkt, b, v)


@settings(max_examples=250, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(case=small_case, data=st.data())
def test_body_insertion_deletion(case, data):
    """Insert or delete one byte of the body and fix the remaining length, so the
    body parsers (not the length check) have to notice."""
    first, body = split_packet(case.encode())
    n = len(body)
    ins = data.draw(st.lists(byte_values, min_size=n + 1, max_size=n + 1), label="inserted")
    pkt = publish.Packet()
    for v in (4, 5):
        for i in range(n + 1):
            check_decode(pkt, frame(first, body[:i] + bytes((ins[i],)) + body[i:]), v)
            if i < n:
                check_decode(pkt, frame(first, body[:i] + body[i + 1:]), v)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=small_case)
def test_truncation(case):
    wire_bytes = case.encode()
    first, body = split_packet(wire_bytes)
    pkt = publish.Packet()
    for v in (4, 5):
        for k in range(len(wire_bytes)):
            with pytest.raises(codec.MQTTError):  # the remaining length cannot match
                server.decode_packet(pkt, wire_bytes[:k], 0, k, v)
        for k in range(len(body) + 1):  # a shorter body given straight to decode()
            check_decode(pkt, body, v, 0, k, first=first)
        check_decode(pkt, body + b"\x00", v, first=first)  # one byte too many


# Byte strings made of random bytes, fragments of fixed headers and property blocks
# that decoders must refuse or handle (non-minimal and over-long Variable Byte
# Integers, ...) and whole valid packets.
FRAGMENTS = (b"\x80\x00", b"\x80\x80\x00", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x01",
             b"\xff\x01", b"\x00", b"\x7f", b"\xc0\x00", b"\x30\x00", b"\x00\x00",
             b"\xff\xff", b"\x0b\x80\x00", b"\x0b\x00", b"\x23\x00\x00", b"\x26\x00\x00",
             b"\x00\x01\x2b", b"\x00\x01\x23", b"\xed\xa0\x80", b"\xf4\x90\x80\x80")
UP = (P.USER_PROPERTY, ("k", "v"))
CORPUS = [c.encode() for c in (  # one or two of every packet, hand-written (cheap to draw)
    Case("publish", v=4, topic="a/b", payload=b"x", qos=1, pid=7, retain=True),
    Case("publish", v=5, topic="a/\U0001F600", payload=b"", qos=2, pid=9, dup=True,
         props=[(P.PAYLOAD_FORMAT, 1), (P.MESSAGE_EXPIRY, 60), (P.SUBSCRIPTION_ID, 200),
                (P.SUBSCRIPTION_ID, 3), (P.RESPONSE_TOPIC, "r"), (P.CORRELATION_DATA, b"c"), UP]),
    Case("publish", v=5, topic="", payload=b"p", alias=3, props=[(P.CONTENT_TYPE, "t")]),
    Case("ack", v=4, ptype=codec.PUBREL, pid=1),
    Case("ack", v=5, ptype=codec.PUBACK, pid=2, reason=0x10, props=[(P.REASON_STRING, "r"), UP]),
    Case("ack", v=5, ptype=codec.PUBCOMP, pid=3, reason=0x92),
    Case("connect", v=4, client_id="c", will=control.Will("w", b"m", 1, True),
         username="u", password=b"p"),
    Case("connect", v=5, client_id="", clean=False, keepalive=0, username=None, password=b"p",
         props=[(P.SESSION_EXPIRY, 10), (P.RECEIVE_MAXIMUM, 5), (P.AUTH_METHOD, "m"), UP],
         will=control.Will("w", b"", 2, False, [(P.WILL_DELAY, 5), UP])),
    Case("connack", v=4, session_present=True),
    Case("connack", v=5, reason=0x87, props=[(P.MAXIMUM_QOS, 1), (P.ASSIGNED_CLIENT_ID, "x"),
                                             (P.TOPIC_ALIAS_MAXIMUM, 10), UP]),
    Case("subscribe", v=4, pid=4, subs=[("a/+", 1), ("#", 2)]),
    Case("subscribe", v=5, pid=5, subs=[("$share/g/a", 0x2A)], props=[(P.SUBSCRIPTION_ID, 9)]),
    Case("suback", v=4, pid=6, codes=[0, 0x80]),
    Case("suback", v=5, pid=6, codes=[0x97], props=[UP]),
    Case("unsubscribe", v=5, pid=8, filters=["a", "b/#"], props=[UP]),
    Case("unsuback", v=4, pid=9),
    Case("unsuback", v=5, pid=9, codes=[0x11, 0]),
    Case("ping", ptype=codec.PINGREQ),
    Case("disconnect", v=5, reason=0x8E, props=[(P.SERVER_REFERENCE, "s")]),
    Case("auth", reason=0x18, props=[(P.AUTH_METHOD, "m"), (P.AUTH_DATA, b"d")]),
)]
fuzz_bytes = st.lists(st.one_of(st.binary(max_size=12), st.sampled_from(FRAGMENTS),
                                st.sampled_from(CORPUS)),
                      max_size=6).map(b"".join)


@settings(max_examples=2500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.one_of(st.binary(max_size=64), fuzz_bytes), v=st.sampled_from((4, 5)))
def test_random_bytes_decode_packet(data, v):
    check_decode(publish.Packet(), data, v)


valid_firsts = [0x10, 0x20, 0x82, 0x90, 0xA2, 0xB0, 0xC0, 0xD0, 0xE0, 0xF0, 0x40, 0x50, 0x62,
                0x70] + list(range(0x30, 0x3E))


@settings(max_examples=3000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(first=st.one_of(st.sampled_from(valid_firsts), st.integers(0, 255)),
       body=st.one_of(st.binary(max_size=80), fuzz_bytes), v=st.sampled_from((4, 5)))
def test_random_framed_bodies(first, body, v):
    """Random bodies behind a correct fixed header reach every body parser."""
    pkt = publish.Packet()
    check_decode(pkt, frame(first, body), v)
    check_decode(pkt, body, v, first=first)


def _drain_framer(f, stream, v, split_points):
    """Feed stream in chunks; every packet the framer completes must be exactly the
    bytes it consumed (one minimal fixed header and the body) and fit its maximum."""
    pkt = publish.Packet()
    bounds = [0] + sorted(set(split_points)) + [len(stream)]
    start = 0
    for a, b in zip(bounds, bounds[1:]):
        off = a
        while off < b:
            off = host.feed(f, stream, off, b)
            if host.done(f):
                assert stream[start:off] == frame(f.first, f.buf[:f.rl])
                assert off - start <= f.max
                start = off
                check_decode(pkt, f.buf, v, 0, f.rl, first=f.first)


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(stream=st.one_of(st.binary(max_size=200), fuzz_bytes), max_packet=st.integers(2, 300),
       v=st.sampled_from((4, 5)), data=st.data())
def test_random_bytes_framer(stream, max_packet, v, data):
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=5), label="cuts")
    f = codec.Framer(max_packet)
    try:
        _drain_framer(f, stream, v, cuts)
    except codec.MQTTError as e:
        assert e.reason in DECODE_REASONS


# ---- 4. Framer ------------------------------------------------------------------

class ChunkStream:
    """A non-blocking stream: readinto() serves the chunks in order, returns None
    between chunks (no data now) and 0 at the end (peer closed)."""

    def __init__(self, chunks):
        self.chunks = [bytes(c) for c in chunks]
        self.i = 0
        self.pending_none = False

    def readinto(self, buf, n=-1):
        if self.pending_none:
            self.pending_none = False
            return None
        while self.i < len(self.chunks) and not self.chunks[self.i]:
            self.i += 1
        if self.i == len(self.chunks):
            return 0
        c = self.chunks[self.i]
        k = len(buf) if n < 0 else min(n, len(buf))
        k = min(k, len(c))
        buf[:k] = c[:k]
        self.chunks[self.i] = c[k:]
        if not self.chunks[self.i]:
            self.i += 1
            self.pending_none = True
        return k


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(v=st.sampled_from((4, 5)), data=st.data())
def test_framer_any_split(v, data):
    pkts = data.draw(st.lists(cases(v), min_size=1, max_size=6), label="packets")
    wires = [c.encode() for c in pkts]
    stream = b"".join(wires)
    biggest = max(len(w) for w in wires)
    max_packet = biggest + data.draw(st.sampled_from((0, 1, 100)), label="slack")
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(stream) - 1)), max_size=12),
                                label="cuts")))
    bounds = [0] + cuts + [len(stream)]
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    want = [canon(expected(c)) for c in pkts]

    # feed()
    f = codec.Framer(max_packet)
    pkt = publish.Packet()  # reused for every packet, as on the device
    got = []
    for chunk in chunks:
        off = 0
        while off < len(chunk):
            off = host.feed(f, chunk, off, len(chunk))
            if host.done(f):
                server.decode(pkt, f.first, f.buf, 0, f.rl, v)
                got.append(canon(summarize(pkt)))
    assert got == want

    # read_from() over a non-blocking stream delivering the same chunks
    f = codec.Framer(max_packet)
    s = ChunkStream(chunks)
    got = []
    while True:
        try:
            ready = host.read_from(f, s)
        except EOFError:
            break
        if ready:
            assert host.done(f)
            server.decode(pkt, f.first, f.buf, 0, f.rl, v)
            got.append(canon(summarize(pkt)))
    assert got == want


@settings(max_examples=150, deadline=None)
@given(case=any_case)
def test_framer_refuses_oversize_before_body(case):
    wire_bytes = case.encode()
    first, body = split_packet(wire_bytes)
    head = len(wire_bytes) - len(body)
    # exactly the maximum: accepted
    f = codec.Framer(len(wire_bytes))
    assert host.feed(f, wire_bytes, 0, len(wire_bytes)) == len(wire_bytes) and host.done(f)
    # one byte over: 0x95 as soon as the fixed header is complete
    f = codec.Framer(len(wire_bytes) - 1)
    assert host.feed(f, wire_bytes, 0, head - 1) == head - 1
    with pytest.raises(codec.MQTTError) as e:
        host.feed(f, wire_bytes, head - 1, head)
    assert e.value.reason == codec.PACKET_TOO_LARGE
