"""Turn Nagle's algorithm off on the app server's TCP sockets.

Streamlit 1.67 binds its listening socket itself with `socket.socket(family)`, so the socket's protocol number
is 0; asyncio only sets TCP_NODELAY on accepted connections whose protocol number is IPPROTO_TCP, so it sets it
on none (uvicorn issue #3149 is the same bug). With Nagle on, every response on a kept-alive connection after
the first waits for the browser's delayed ACK, about 40 ms on Linux. A page load fetches some 40 script chunks
over six kept-alive connections after the first widgets arrive, and paid that wait for almost every one.
"""

from __future__ import annotations

import functools
import os
import socket
import stat

FD_FOLDERS = ("/proc/self/fd", "/dev/fd")  # Linux, then macOS and the BSDs; Windows has neither (left as it is)


def _open_fds() -> list[int]:
    for folder in FD_FOLDERS:
        try:
            return [int(name) for name in os.listdir(folder)]
        except OSError:
            continue
    return []


def _set_nodelay(fd: int) -> bool:
    """TCP_NODELAY on the file descriptor if it is a TCP socket; True when set. Never closes the descriptor."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return False
        sock = socket.socket(fileno=fd)
    except OSError:  # closed meanwhile, or not a socket Python can wrap
        return False
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return True
    except OSError:
        return False
    finally:
        sock.detach()  # the descriptor stays open and owned by whoever opened it


def set_nodelay_on_tcp_sockets() -> int:
    """TCP_NODELAY on every TCP socket this process holds; how many. Set on a listening socket, it is inherited by
    every connection accepted later (Linux and macOS), so one call covers the server's lifetime."""
    return sum(_set_nodelay(fd) for fd in _open_fds())


@functools.cache
def disable_nagle_once() -> int:
    """set_nodelay_on_tcp_sockets, the first time only: the app calls it on every run."""
    return set_nodelay_on_tcp_sockets()
