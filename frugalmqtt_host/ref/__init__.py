"""The reference stack: frugalmqtt's first implementation of the protocol
(codec, control, publish, props, session, base, transport), kept host-side
as an independent implementation of the same rules. Tests and the host
simulator build and check packets with it; the differential test runs the
device's core against its Session. Never installed on a device."""
