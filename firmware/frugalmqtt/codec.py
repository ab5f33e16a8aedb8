# frugalmqtt codec core: errors, packet types, Variable Byte Integers, UTF-8
# strings, the decode cursor, the fixed header and the stream framer.
# No sockets here. Encoders write into caller-owned buffers; decoders read
# from a buffer and report offsets and lengths, never copies.
# Hot-path functions allocate nothing under MicroPython (tests prove it).
try:
    from micropython import const
except ImportError:
    const = int  # CPython

from .err import MQTTError  # noqa: F401  (re-exported: frugalmqtt.codec.MQTTError)

# Control packet types (first byte >> 4)
CONNECT = const(1)
CONNACK = const(2)
PUBLISH = const(3)
PUBACK = const(4)
PUBREC = const(5)
PUBREL = const(6)
PUBCOMP = const(7)
SUBSCRIBE = const(8)
SUBACK = const(9)
UNSUBSCRIBE = const(10)
UNSUBACK = const(11)
PINGREQ = const(12)
PINGRESP = const(13)
DISCONNECT = const(14)
AUTH = const(15)

# Reason codes the codec and session raise or send (MQTT 5.0 2.4)
MALFORMED = const(0x81)
PROTOCOL_ERROR = const(0x82)
RECEIVE_MAXIMUM_EXCEEDED = const(0x93)
TOPIC_ALIAS_INVALID = const(0x94)
PACKET_TOO_LARGE = const(0x95)
PAYLOAD_FORMAT_INVALID = const(0x99)

VBI_MAX = const(268435455)


# Protocol errors carry the reason code and (mostly) no text: the raise
# line in the traceback and its spec id comment say which check failed, and
# every message string costs heap on the device.
def malformed(msg=""):
    return MQTTError(MALFORMED, msg)


def protocol_error(msg=""):
    return MQTTError(PROTOCOL_ERROR, msg)


# ---- Variable Byte Integer [MQTT-1.5.5-1] ----------------------------------

def vbi_size(n):
    if n < 128:
        return 1
    if n < 16384:
        return 2
    if n < 2097152:
        return 3
    if n <= VBI_MAX:
        return 4
    raise ValueError("too large")


def put_vbi(buf, o, n):
    """Write n as a minimal Variable Byte Integer at o; return the new offset."""
    if n < 0 or n > VBI_MAX:
        raise ValueError("too large")
    while n > 127:
        buf[o] = (n & 0x7F) | 0x80
        n >>= 7
        o += 1
    buf[o] = n
    return o + 1


def put_u16(buf, o, n):
    buf[o] = (n >> 8) & 0xFF
    buf[o + 1] = n & 0xFF
    return o + 2


# ---- UTF-8 [MQTT-1.5.4-1..3] -----------------------------------------------

def check_utf8(buf, i, end):
    """Raise Malformed unless buf[i:end] is well-formed UTF-8 without U+0000.
    U+FEFF (EF BB BF) is valid and kept [MQTT-1.5.4-3]."""
    while i < end:
        c = buf[i]
        if c < 0x80:
            if c == 0:
                raise malformed()  # [MQTT-1.5.4-2] U+0000
            i += 1
            continue
        lo = 0x80
        hi = 0xBF
        if c < 0xC2:
            raise malformed("bad UTF-8")  # [MQTT-1.5.4-1]
        elif c < 0xE0:
            n = 1
        elif c < 0xF0:
            n = 2
            if c == 0xE0:
                lo = 0xA0  # overlong
            elif c == 0xED:
                hi = 0x9F  # U+D800..U+DFFF surrogates [MQTT-1.5.4-1]
        elif c < 0xF5:
            n = 3
            if c == 0xF0:
                lo = 0x90  # overlong
            elif c == 0xF4:
                hi = 0x8F  # above U+10FFFF
        else:
            raise malformed("bad UTF-8")  # [MQTT-1.5.4-1]
        if i + n >= end:
            raise malformed("bad UTF-8")  # [MQTT-1.5.4-1]
        c = buf[i + 1]
        if c < lo or c > hi:
            raise malformed("bad UTF-8")  # [MQTT-1.5.4-1]
        k = 2
        while k <= n:
            c = buf[i + k]
            if c < 0x80 or c > 0xBF:
                raise malformed("bad UTF-8")  # [MQTT-1.5.4-1]
            k += 1
        i += n + 1


def str_len(s):
    """Encoded byte length of a str/bytes/bytearray/memoryview value, after
    checking it is a valid MQTT UTF-8 string (bad user input -> ValueError)."""
    if type(s) is str:
        n = 0
        for ch in s:
            c = ord(ch)
            if c == 0:
                raise ValueError("U+0000")  # [MQTT-1.5.4-2]
            if c < 0x80:
                n += 1
            elif c < 0x800:
                n += 2
            elif c < 0x10000:
                if 0xD800 <= c <= 0xDFFF:
                    raise ValueError("bad UTF-8")  # [MQTT-1.5.4-1]
                n += 3
            else:
                n += 4
    else:
        n = len(s)
        try:
            check_utf8(s, 0, n)
        except MQTTError:
            raise ValueError("bad UTF-8")  # or U+0000
    if n > 65535:
        raise ValueError("too long")  # [MQTT-4.7.3-3]
    return n


def bin_len(b):
    """Length of a Binary Data field (bad user input -> ValueError)."""
    n = len(b)
    if n > 65535:
        raise ValueError("too long")  # [MQTT-1.5.6-1]
    return n


def put_raw(buf, o, s, n):
    """Copy n encoded bytes of s (str or buffer) to buf[o:]; return the new offset."""
    if type(s) is not str:
        buf[o:o + n] = s
        return o + n
    for ch in s:  # UTF-8 encode by hand: str.encode() would allocate
        c = ord(ch)
        if c < 0x80:
            buf[o] = c
            o += 1
        elif c < 0x800:
            buf[o] = 0xC0 | (c >> 6)
            buf[o + 1] = 0x80 | (c & 0x3F)
            o += 2
        elif c < 0x10000:
            buf[o] = 0xE0 | (c >> 12)
            buf[o + 1] = 0x80 | ((c >> 6) & 0x3F)
            buf[o + 2] = 0x80 | (c & 0x3F)
            o += 3
        else:
            buf[o] = 0xF0 | (c >> 18)
            buf[o + 1] = 0x80 | ((c >> 12) & 0x3F)
            buf[o + 2] = 0x80 | ((c >> 6) & 0x3F)
            buf[o + 3] = 0x80 | (c & 0x3F)
            o += 4
    return o


def put_str(buf, o, s, n):
    """Write a length-prefixed string or binary field of n encoded bytes."""
    return put_raw(buf, put_u16(buf, o, n), s, n)


def has_wildcard(s):
    """True if a topic name (str or bytes) contains '+' or '#'."""
    if type(s) is str:
        return "+" in s or "#" in s
    # A loop, not `0x2B in s`: MicroPython's bytearray and memoryview do not
    # implement `int in` (NotImplementedError).
    for c in s:
        if c == 0x2B or c == 0x23:
            return True
    return False


def topic_len(s, allow_empty=False):
    """Validate a topic name for sending and return its encoded length."""
    n = str_len(s)
    if n == 0 and not allow_empty:
        raise ValueError("no topic")  # [MQTT-4.7.3-1]
    if has_wildcard(s):
        raise ValueError("wildcard")  # [MQTT-3.3.2-2] [MQTT-4.7.0-1]
    return n


def check_filter(s):
    """Validate a topic filter [MQTT-4.7.1-1] [MQTT-4.7.1-2]; return its encoded length."""
    n = str_len(s)
    if n == 0:
        raise ValueError("no filter")  # [MQTT-4.7.3-1]
    if type(s) is not str:
        s = bytes(s).decode()
    if s.startswith("$share/"):
        name = s[7:].split("/", 1)
        if not name[0] or "+" in name[0] or "#" in name[0] or len(name) < 2 or not name[1]:
            raise ValueError("bad $share")  # [MQTT-4.8.2-1] [MQTT-4.8.2-2]
    prev = "/"
    i = 0
    for ch in s:
        if ch == "#":
            if prev != "/" or i != len(s) - 1:
                raise ValueError("bad filter")  # [MQTT-4.7.1-1]
        elif ch == "+":
            if prev != "/" or (i + 1 < len(s) and s[i + 1] != "/"):
                raise ValueError("bad filter")  # [MQTT-4.7.1-2]
        prev = ch
        i += 1
    return n


# ---- Decode cursor ---------------------------------------------------------

class Cur:
    """A read position over buf[pos:end]. Every read checks the bound and
    raises Malformed when the packet is shorter than its fields."""

    def __init__(self):
        self.buf = None
        self.pos = 0
        self.end = 0
        self.n = 0  # length of the last string/binary read

    def set(self, buf, pos, end):
        self.buf = buf
        self.pos = pos
        self.end = end

    def need(self, n):
        if self.pos + n > self.end:
            raise malformed()  # the packet is shorter than its fields

    def u8(self):
        self.need(1)
        self.pos += 1
        return self.buf[self.pos - 1]

    def u16(self):
        self.need(2)
        b = self.buf
        p = self.pos
        self.pos = p + 2
        return (b[p] << 8) | b[p + 1]

    def u32(self):
        self.need(4)
        b = self.buf
        p = self.pos
        self.pos = p + 4
        return (b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]

    def vbi(self):
        """Variable Byte Integer: at most 4 bytes [U-1.5.5-a], minimal [MQTT-1.5.5-1]."""
        v = 0
        shift = 0
        while True:
            c = self.u8()
            v |= (c & 0x7F) << shift
            if not c & 0x80:
                if c == 0 and shift:
                    raise malformed()  # [MQTT-1.5.5-1] not minimal
                return v
            shift += 7
            if shift == 28:
                raise malformed()  # [U-1.5.5-a] more than 4 bytes

    def binary(self):
        """Skip a length-prefixed field; return its data offset, length in self.n."""
        n = self.u16()
        self.need(n)
        self.n = n
        self.pos += n
        return self.pos - n

    def string(self):
        """Like binary(), and check UTF-8 [MQTT-1.5.4-1] [MQTT-1.5.4-2]."""
        o = self.binary()
        check_utf8(self.buf, o, o + self.n)
        return o


# ---- Fixed header [MQTT-2.1.3-1] -------------------------------------------

def check_first(first, v):
    """Validate the first byte of a packet received on protocol level v
    (4 = 3.1.1, 5 = 5.0); return the packet type."""
    t = first >> 4
    f = first & 0x0F
    if t == PUBLISH:
        if f & 0x06 == 0x06:
            raise malformed("QoS 3")  # [MQTT-3.3.1-4]
        if f & 0x08 and not f & 0x06:
            raise malformed()  # [MQTT-3.3.1-2] DUP on QoS 0
        return t
    if t == 0 or (t == AUTH and v < 5):
        raise malformed()  # reserved packet type
    if t == PUBREL or t == SUBSCRIBE or t == UNSUBSCRIBE:
        if f != 2:
            raise malformed()  # [MQTT-3.6.1-1] [MQTT-2.1.3-1] flags must be 0010
    elif f:
        raise malformed()  # [MQTT-2.1.3-1] flags must be 0000
    return t


_HEAD = const(0)  # framer states: waiting for the type byte
_LEN = const(1)  # reading the remaining length
_BODY = const(2)  # reading the body
_DONE = const(3)  # a whole packet is in the buffer
_CHUNK = const(128)  # read_packet: most bytes asked for at once (small packets)


class Framer:
    """Assembles packets from a byte stream into one fixed buffer.

    A packet whose total size exceeds the maximum packet size raises
    PACKET_TOO_LARGE (0x95) as soon as its fixed header is complete, before
    anything more is read, so no buffer is ever sized by the peer. When a
    packet is complete, `first` holds its first byte and buf[off:off + rl]
    its body; the next call starts on the next packet.

    read_packet() reads whatever the stream has, up to c bytes at once, and
    frames every packet in it without more reads. (Hosts and tests also frame
    from a buffer or byte by byte: frugalmqtt_host.codec.feed / read_from,
    which use state, nlen and got; reset() in between.)"""

    def __init__(self, max_packet):
        self.max = max_packet
        c = max_packet if max_packet < _CHUNK else _CHUNK
        if c < 8:
            c = 8  # room for a partial fixed header and more
        self.c = c
        # buf[0:c] takes the start of a packet split across reads, so that
        # the rest, read at buf[c:], follows it; buf[max:] takes the pieces
        # of a large packet the network split (gathered at buf[0:]).
        self.buf = bytearray(c + (max_packet if max_packet > c else c))
        self.mv = memoryview(self.buf)
        self.rv = self.mv[c:]
        self.tv = self.mv[max_packet:]
        self.one = bytearray(1)
        self.reset()

    def reset(self):
        self.state = _HEAD
        self.first = 0
        self.nlen = 0  # remaining-length bytes read so far
        self.rl = 0
        self.got = 0  # body bytes received
        self.off = 0  # where the body starts in buf
        self.r = self.w = self.c  # read_packet: bytes read, not framed yet: buf[r:w]
        self.big = 0  # read_packet: size of a large packet gathered at buf[0:w]

    def read_packet(self, stream):
        """Frame the next packet from a non-blocking stream with readinto().
        Returns True when one is complete (body at buf[off:off + rl]), False
        when the stream has nothing more now; raises EOFError when the peer
        closed. One read takes what the stream has (up to c bytes, or the
        rest of a larger packet): the packets in it come from the next calls
        without reading, and a packet split across reads is joined. Allocates
        nothing: the start of a split packet is moved to end at buf[c], where
        reads land; a large packet the network split further is gathered at
        buf[0:] from pieces read at buf[max:]."""
        b = self.buf
        c = self.c
        self.state = _HEAD
        while True:
            r = self.r
            w = self.w
            L = self.big
            if L:
                n = stream.readinto(self.tv, L - w if L - w < c else c)
                if n is None:
                    return False
                if not n:
                    raise EOFError
                m = self.max
                i = 0
                while i < n:
                    b[w + i] = b[m + i]
                    i += 1
                w += n
                self.w = w
                if w < L:
                    continue
                self.big = 0  # whole: framed below from buf[0:L]
            # The fixed header at buf[r], as far as it has arrived
            L = 0
            o = r + 1
            rl = 0
            sh = 0
            while o < w:
                x = b[o]
                o += 1
                if sh and not x:
                    raise malformed()  # [MQTT-1.5.5-1] remaining length not minimal
                rl |= (x & 0x7F) << sh
                if x < 0x80:
                    L = o - r + rl
                    if L > self.max:
                        # Refused before anything more is read (MQTT 5: DISCONNECT 0x95)
                        raise MQTTError(PACKET_TOO_LARGE)
                    break
                sh += 7
                if sh == 28:
                    raise malformed()  # [U-1.5.5-a] remaining length over 4 bytes
            if L and r + L <= w:
                self.first = b[r]
                self.off = o
                self.rl = rl
                r += L
                if r == w:
                    r = w = c
                self.r = r
                self.w = w
                self.state = _DONE
                return True
            # More is needed: what there is of this packet (k <= c bytes)
            # moves to end at buf[c], where the next read lands.
            k = w - r
            if w != c:
                d = c - k
                i = 0
                while i < k:
                    b[d + i] = b[r + i]
                    i += 1
                r = self.r = d
                w = self.w = c
            # A large packet: just its rest; else at most c bytes in all.
            n = stream.readinto(self.rv, L - k if L > c else c - k)
            if n is None:
                return False
            if not n:
                raise EOFError
            w += n
            self.w = w
            if L > c and w - r < L:
                # Still not whole: gather it at buf[0:] from here on
                k = w - r
                i = 0
                while i < k:
                    b[i] = b[r + i]
                    i += 1
                self.r = 0
                self.w = k
                self.big = L
