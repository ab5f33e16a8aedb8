# Whole MQTT packets as bytes, from the codec's encoders: what a scripted
# broker sends (host_sim/scripted.py) and what the device tests feed a client
# or compare its output with. Runs on CPython and MicroPython.
from frugalmqtt import control
from frugalmqtt.publish import encode_ack
from .codec import encode_publish
from . import server

_BUF = bytearray(1 << 16)


def publish(v, topic, payload, qos=0, pid=0, retain=False, dup=False, props=None, alias=0):
    n = encode_publish(_BUF, 0, v, topic, payload, qos, pid, retain, dup, props, alias)
    return bytes(_BUF[:n])


def ack(v, ptype, pid, reason=0, props=None):
    """PUBACK, PUBREC, PUBREL or PUBCOMP (ptype: codec.PUBACK ...)."""
    n = encode_ack(_BUF, 0, v, ptype, pid, reason, props)
    return bytes(_BUF[:n])


def connack(v, sp=False, reason=0, props=None):
    n = server.encode_connack(_BUF, 0, v, sp, reason, props)
    return bytes(_BUF[:n])


def suback(v, pid, codes, props=None):
    n = server.encode_suback(_BUF, 0, v, pid, codes, props)
    return bytes(_BUF[:n])


def disconnect(v, reason=0, props=None):
    n = control.encode_disconnect(_BUF, 0, v, reason, props)
    return bytes(_BUF[:n])
