"""The asyncio client (AMQTTClient, CPython in-process: host_sim/fleet.py's
telemetry program) through the link simulator to a real mosquitto: links
that end at the worst moment for its connect."""
import asyncio

import pytest

from frugalmqtt.aclient import AMQTTClient
from frugalmqtt_host.ref.codec import CONNACK, PUBLISH
from host_sim.fleet import AsyncDeviceRun
from host_sim.link import Link, Rule
from host_sim.subscriber import Subscriber


@pytest.mark.parametrize("nth", [1, 2])
def test_link_lost_right_after_connack_is_a_lost_connection(mosquitto, nth):
    """The link ends right after the server's CONNACK: of the first
    connection (nth 1: the program's connect fails or its link is lost, and
    it goes on) or of a reconnect (nth 2, after a cut at the 2nd PUBLISH).
    Every QoS 2 message still gets through, acknowledged, end to end. (The
    interleaving that once lost them is played exactly by the next test.)"""
    b = mosquitto()
    rules = [Rule("s2c", CONNACK, nth=nth, action="after")]
    if nth == 2:
        rules.append(Rule("c2s", PUBLISH, nth=2, action="drop"))
    link = Link((b.host, b.port), rules).start()
    name = "aconn%d" % nth
    sub = Subscriber(b.host, b.port, "sim/%s/#" % name, "sub-" + name)
    try:
        run = AsyncDeviceRun(dict(host="127.0.0.1", port=link.port, version=5, cid="dev-" + name,
                                  topic="sim/%s/t" % name, qos=2, n=6, clean=False,
                                  keepalive=10, backoff_min_ms=10, backoff_max_ms=100,
                                  flush_ms=10000)).start().join(30)
        assert run.error is None and run.ended, (run.error, run.events[-3:])
        assert run.of("end")[0]["flushed"] and not run.of("pending")
        assert len(run.of("done")) == 6
        assert all(r.fired for r in link.rules)
        assert sub.wait_for([("dev-" + name, s) for s in range(6)]), sorted(sub.keys())
    finally:
        link.close()
        sub.stop()



def test_connect_whose_link_ends_right_after_its_connack_raises(mosquitto):
    """The reader handles the CONNACK, and on its next wake-up the EOF, both
    before connect()'s own task resumes (two event loop turns; a loaded
    machine's fleet run hit it): the link is then gone and was never taken
    for up, so nothing would reconnect it. connect() raises OSError, as for
    any connection lost before it returned, instead of returning as if
    connected. (The EOF is played by dropping the link at that moment.)"""
    b = mosquitto()

    async def main():
        c = AMQTTClient("c-eof", b.host, b.port, version=5, timeout_ms=3000)
        until_connack = c._until_connack

        async def connack_then_eof(link):
            await until_connack(link)
            c._drop(link)  # what the reader does at the EOF

        c._until_connack = connack_then_eof
        with pytest.raises(OSError):
            await c.connect()
        assert not c.up and c.connects == 0
        del c._until_connack  # the next attempt connects
        assert await c.connect() is False and c.up
        await c.disconnect()

    asyncio.run(main())
