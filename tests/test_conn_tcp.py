"""conn.tcp(), the one way the drivers open their stream, against a real
loopback listener (CPython: the unix port's socket has no way to make
setsockopt fail on purpose; the device suites run it there through every
connect)."""
import errno
import socket

import pytest

from frugalmqtt import conn


@pytest.fixture
def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s
    s.close()


def test_tcp_turns_nagle_off_and_sets_the_timeout(listener):
    s = conn.tcp("127.0.0.1", listener.getsockname()[1], 2500, None)
    try:
        assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert s.gettimeout() == 2.5
        assert s.getpeername() == listener.getsockname()
    finally:
        s.close()


def test_tcp_connects_on_a_stack_without_tcp_nodelay(listener, monkeypatch):
    # lwIP builds without TCP_NODELAY raise from setsockopt: the connection
    # still works (each packet still leaves in one write; only Nagle may
    # delay a small one), so tcp() carries on instead of failing
    refused = []

    class NoNodelay(socket.socket):
        def setsockopt(self, *a):
            refused.append(a)
            raise OSError(errno.ENOPROTOOPT, "no TCP_NODELAY")

    monkeypatch.setattr(socket, "socket", NoNodelay)
    s = conn.tcp("127.0.0.1", listener.getsockname()[1], 1000, None)
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
        conn.tcp("127.0.0.1", port, 1000, None)
    assert e.value.errno == errno.ECONNREFUSED
    assert len(made) == 1 and made[0].fileno() == -1  # closed, not leaked
