# frugalmqtt.hello: the CONNECT body a client sends on every connect, built
# once when the client is made (core.Core.__init__, which drops this module
# again: a device does not keep the builder's code).
_HEAD = 5  # core._HEAD: bytes before each image for its fixed header


def body(client_id, version, user, password, keepalive, clean, session_expiry, will,
         max_packet, rx_size, props):
    """The CONNECT's variable header and payload (Core.begin() sets the
    Clean Start bit): a bytearray. ValueError when it does not fit max_packet.
    (The error words are in why.py, imported only to raise.)"""
    # 5.0: we take no packet larger than rx
    # [MQTT-3.1.2-24], acks without reason strings [MQTT-3.1.2-29], and a
    # persistent session needs a session expiry [MQTT-3.1.2-23].
    b = bytearray(b"\x00\x04MQTT")
    w = will
    b.append(version)
    b.append((4 | w[2] << 3 | (32 if w[3] else 0) if w else 0) |
             (128 if user is not None else 0) | (64 if password is not None else 0))
    b += keepalive.to_bytes(2, "big")
    if version == 5:
        if session_expiry is None and not clean:
            session_expiry = 0xFFFFFFFF
        p = b"\x27" + rx_size.to_bytes(4, "big") + b"\x17\x00" + props
        if session_expiry:
            p += b"\x11" + session_expiry.to_bytes(4, "big")
        field(b, -2, p)
    field(b, -1, client_id)
    if w:
        if version == 5:
            field(b, -2, w[4] if len(w) > 4 and w[4] else b"")
        field(b, -1, w[0])
        field(b, -1, w[1])
    for s in (user, password):
        if s is not None:
            field(b, -1, s)
    if len(b) + _HEAD > max_packet:
        from .why import why
        raise why("connect_size", (len(b), max_packet))
    return b


def field(b, pid, s):
    """Append property id pid (unless < 0) and s after its length: two bytes,
    or (pid -2, a property block) a Variable Byte Integer."""
    if pid >= 0:
        b.append(pid)
    if isinstance(s, str):
        s = s.encode()
    n = len(s)
    if pid == -2:
        while n > 127:
            b.append(n & 0x7F | 0x80)
            n >>= 7
        b.append(n)
    elif n > 65535:
        from .why import why
        raise why("long_string", (n,))  # [MQTT-1.5.4-1]
    else:
        b += n.to_bytes(2, "big")
    b += s
