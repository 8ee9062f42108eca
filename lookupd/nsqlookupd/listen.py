"""Listening addresses: ``host:port`` as NSQ's flags spell them, bound sockets, and back."""
from __future__ import annotations

import socket

from nsq_protocol.host_port import join_host_port, split_listen_address


def bind_listener(address: str, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket on ``address``; an empty host means every IPv4 interface."""
    host, port = split_listen_address(address)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def format_address(sockname: object) -> str:
    """``host:port`` of a socket address, IPv6 hosts in brackets."""
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        return join_host_port(str(sockname[0]), int(sockname[1]))
    return str(sockname)


def bound_port(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])
