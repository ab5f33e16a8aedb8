# frugalmqtt.drain: the full client's answer to an inbound packet over its
# max_packet (client.MQTTClient.oversize, which documents it), imported only
# when one comes: a device holds none of this code until then.
from errno import ECONNRESET
from .lite import MQTTError

try:
    from micropython import const
except ImportError:  # CPython
    from .time import const

_DRAIN_MAX = const(1048576)  # the largest inbound PUBLISH read through
_V = const(10)  # lite's state[_V]


def _fill(c, r, k, n):
    """Read r[k:n] (blocking, up to the socket's timeout): client._fill's
    twin (importing client from here would be an import circle)."""
    while k < n:
        # a memoryview only for a part split across reads
        got = c.sock.readinto(memoryview(r)[k:n] if k else r, n - k)
        if not got:
            c.close()
            raise OSError(ECONNRESET)  # the server closed the connection
        k += got


def oversize(c, rl):
    """client.MQTTClient.oversize(rl) for client c: lite's framing read the
    fixed header (its first byte still in data[0]); returns -1 once the
    packet is read through and answered (recv.Receiver.input() then sees a
    PINGRESP), raises MQTTError (the framing answers it) when refused."""
    r = c.data
    v = c.state[_V]
    c._cbe = None
    first = r[0]
    qos = first >> 1 & 3
    if first >> 4 != 3 or qos == 3 or rl > _DRAIN_MAX:
        raise MQTTError(0x95)
    pos = pid = 0
    while pos < rl:  # read through data from 0 (no memoryview)
        m = min(rl - pos, len(r))
        _fill(c, r, 0, m)
        if not pos:
            po = 2 + (r[0] << 8 | r[1])  # where the packet id is
            topic = bytes(r[2:min(po, m)])
            if v == 5:
                break
        k = po - pos
        if qos and -1 <= k < m:  # the packet id is (partly) in this part
            if k >= 0:
                pid = r[k] << 8
            if k + 1 < m:
                pid |= r[k + 1]
        pos += m
    c.in_callback = True
    try:
        if c.on_oversize:
            c.on_oversize(topic, 2 + rl + (rl > 127) + (rl > 16383) + (rl > 2097151))
    except Exception as e:  # raised once the packet is handled
        c._cb_failed(e)
    finally:
        c.in_callback = False
    if v == 5:
        raise MQTTError(0x95)
    if qos and not pid:
        raise MQTTError(0x82)  # [MQTT-2.2.1-3]
    if qos == 1:
        c.send(0x40, pid)  # [MQTT-4.3.2-4]
    elif qos == 2:
        s = c.in_pid
        if pid not in s and 0 in s:
            s[s.index(0)] = pid  # its PUBREL finds it [MQTT-4.3.3-11]
        c.send(0x50, pid)  # [MQTT-4.3.3-8]
    if c._cbe is not None:
        raise c._cbe  # on_oversize's, the message acknowledged
    # nothing left to dispatch: what input() then sees is a PINGRESP,
    # which only notes that the server is there (it just sent this)
    return -1
