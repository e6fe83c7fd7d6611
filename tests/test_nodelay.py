"""views/nodelay.py: Nagle off on the server's TCP sockets, nothing else touched."""

from __future__ import annotations

import socket

import pytest

from views.nodelay import set_nodelay_on_tcp_sockets

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_NODELAY"), reason="no TCP_NODELAY on this platform")


def nodelay(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_listener_bound_like_streamlit_passes_nodelay_to_later_connections():
    listener = socket.socket(family=socket.AF_INET)  # protocol number 0, as Streamlit 1.67 binds it
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    with listener:
        before = socket.create_connection(listener.getsockname())
        accepted_before, _ = listener.accept()
        assert nodelay(accepted_before) == 0  # the bug: Nagle is on for what the server accepts
        assert set_nodelay_on_tcp_sockets() >= 2  # at least the listener and the connection already accepted
        assert nodelay(listener) == 1
        assert nodelay(accepted_before) == 1
        after = socket.create_connection(listener.getsockname())
        accepted_after, _ = listener.accept()
        assert nodelay(accepted_after) == 1  # inherited from the listener
        for s in (before, accepted_before, after, accepted_after):
            s.close()


def test_other_sockets_are_left_open_and_working():
    left, right = socket.socketpair()  # not TCP: skipped, and its descriptors must stay usable
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with left, right, udp:
        set_nodelay_on_tcp_sockets()
        left.sendall(b"still open")
        assert right.recv(32) == b"still open"
        udp.bind(("127.0.0.1", 0))
        assert udp.fileno() >= 0
