"""The test cluster's DNS. nsqd pods broadcast their stable DNS names
(``<pod>.<service>.<namespace>.svc``), as in Kubernetes, so lookupd hands those names to
clients; here each name resolves to the loopback address the test kubelet gave that pod's
process (its address book). A pod without a process does not resolve, like a pod that is
not running.

    with resolving_pods(address_book_path):   # this process: socket.getaddrinfo
        ...
    child_environment(address_book_path)      # env for child interpreters (pynsq)

Children get it through ``pod_dns_site/sitecustomize.py`` on their PYTHONPATH, which
installs the same resolver when :data:`ADDRESS_BOOK_ENV` names an address book.
"""
from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ADDRESS_BOOK_ENV = "NSQ_E2E_ADDRESS_BOOK"
SITE_DIR = Path(__file__).with_name("pod_dns_site")
ROOT = Path(__file__).resolve().parents[1]
POD_DOMAINS = (".svc", ".svc.cluster.local")


def pod_of(name: str) -> str | None:
    """The pod a cluster DNS name points at (its first label), None for other names."""
    name = name.rstrip(".")
    if not name.endswith(POD_DOMAINS) or name.count(".") < 3:
        return None
    return name.split(".", 1)[0]


def pod_host(book: Path, pod: str) -> str | None:
    try:
        entry = json.loads(book.read_text()).get(pod)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return None if entry is None else str(entry["host"])


def resolver(book: Path, original: Callable[..., Any]) -> Callable[..., Any]:
    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        pod = pod_of(name) if isinstance(name, str) else None
        if pod is None:
            return original(host, port, *args, **kwargs)
        address = pod_host(book, pod)
        if address is None:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: no such pod running")
        return original(address, port, *args, **kwargs)
    getaddrinfo.pod_dns = True  # type: ignore[attr-defined]
    return getaddrinfo


def _pod_address(book: Path, address: Any) -> Any:
    """``(pod DNS name, port, ...)`` -> ``(its process's host, port, ...)``; others as given."""
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        pod = pod_of(address[0])
        if pod is not None:
            host = pod_host(book, pod)
            if host is None:
                raise socket.gaierror(socket.EAI_NONAME, f"{address[0]}: no such pod running")
            return (host, *address[1:])
    return address


def connector(book: Path, original: Callable[..., Any]) -> Callable[..., Any]:
    """socket.connect resolves names in C, past socket.getaddrinfo (tornado's IOStream,
    and so pynsq, connects that way)."""
    def connect(sock: socket.socket, address: Any) -> Any:
        return original(sock, _pod_address(book, address))
    return connect


_PATCHED = ((socket, "getaddrinfo", resolver), (socket.socket, "connect", connector),
            (socket.socket, "connect_ex", connector))


def install(book: Path) -> None:
    if not getattr(socket.getaddrinfo, "pod_dns", False):
        for owner, name, wrap in _PATCHED:
            setattr(owner, name, wrap(book, getattr(owner, name)))


@contextmanager
def resolving_pods(book: Path) -> Iterator[None]:
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _PATCHED]
    install(book)
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def child_environment(book: Path) -> dict[str, str]:
    """Variables that make a child interpreter resolve pod names from ``book``."""
    path = [str(SITE_DIR), str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {ADDRESS_BOOK_ENV: str(book), "PYTHONPATH": os.pathsep.join(path)}
