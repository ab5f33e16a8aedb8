"""lconn.open(), the one way the drivers open their stream, against a real
loopback listener (CPython: the unix port's socket has no way to make
setsockopt fail on purpose; the device suites run it there through every
connect)."""
import errno
import socket

import pytest

from frugalmqtt import lconn


class Client:
    """What lconn.open() reads of a client: the settings in its state."""

    def __init__(self, port, timeout_ms):
        self.state = [0] * 31
        self.state[lconn._SERVER] = "127.0.0.1"
        self.state[lconn._PORT] = port
        self.state[lconn._TMO] = timeout_ms
        self.state[lconn._SSL] = None
        self.sock = None


def tcp(port, timeout_ms):
    c = Client(port, timeout_ms)
    s = lconn.open(c, timeout_ms)
    assert c.sock is s  # the client's stream (its close() closes it)
    return s


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s
    s.close()


def test_tcp_turns_nagle_off_and_sets_the_timeout(listener):
    s = tcp(listener.getsockname()[1], 2500)
    try:
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert s.gettimeout() == 2.5
        assert s.getpeername() == listener.getsockname()
    finally:
        s.close()


def test_tcp_connects_on_a_stack_without_tcp_nodelay(listener, monkeypatch):
    # lwIP builds without TCP_NODELAY raise from setsockopt: the connection
    # still works (each packet still leaves in one write; only Nagle may
    # delay a small one), so open() carries on instead of failing
    refused = []

    class NoNodelay(socket.socket):
        def setsockopt(self, *a):
            refused.append(a)
            raise OSError(errno.ENOPROTOOPT, "no TCP_NODELAY")

    monkeypatch.setattr(socket, "socket", NoNodelay)
    s = tcp(listener.getsockname()[1], 1000)
    try:
        assert refused == [(6, 1, 1)]
        assert s.getpeername() == listener.getsockname() and s.gettimeout() == 1.0
        assert not s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        s.close()


def test_tcp_closes_its_socket_when_the_connect_fails(monkeypatch):
    made = []

    class Tracked(socket.socket):
        def __init__(self, *a):
            super().__init__(*a)
            made.append(self)

    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    monkeypatch.setattr(socket, "socket", Tracked)
    with pytest.raises(OSError) as e:
        tcp(port, 1000)
    assert e.value.errno == errno.ECONNREFUSED
    assert len(made) == 1 and made[0].fileno() == -1  # closed, not leaked
