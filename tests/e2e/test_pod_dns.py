"""The e2e tests' cluster DNS: pod names resolve to the test kubelet's process addresses,
in this interpreter (asyncio connections included) and in child interpreters."""
from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.pod_dns import child_environment, pod_of, resolving_pods

POD = "roll-nsqd-1.roll-nsqd-headless.nsq-test.svc"


def _book(tmp_path: Path, host: str) -> Path:
    book = tmp_path / "pods.json"
    book.write_text(json.dumps({"roll-nsqd-1": {"component": "nsqd", "host": host, "tcp_port": 1, "http_port": 2}}))
    return book


def test_only_cluster_names_are_pods() -> None:
    assert pod_of(POD) == "roll-nsqd-1"
    assert pod_of(POD + ".cluster.local.") == "roll-nsqd-1"
    assert pod_of("localhost") is None and pod_of("127.0.0.1") is None and pod_of("example.svc") is None


async def test_a_pod_name_connects_to_its_process_and_a_missing_pod_does_not_resolve(tmp_path: Path) -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.7", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with resolving_pods(_book(tmp_path, "127.0.0.7")):
            reader, writer = await asyncio.open_connection(POD, port)
            assert writer.get_extra_info("peername")[0] == "127.0.0.7"
            writer.close()
            with pytest.raises(socket.gaierror):
                socket.getaddrinfo("roll-nsqd-2.roll-nsqd-headless.nsq-test.svc", port)
            assert socket.getaddrinfo("127.0.0.1", port)[0][4][0] == "127.0.0.1"
    finally:
        server.close()
        await server.wait_closed()
    assert not hasattr(socket.getaddrinfo, "pod_dns")
    assert socket.socket.connect.__qualname__ != "connector.<locals>.connect"


def test_a_plain_socket_connect_to_a_pod_name_reaches_its_process(tmp_path: Path) -> None:
    """socket.connect resolves in C, not through socket.getaddrinfo (tornado, so pynsq)."""
    with socket.create_server(("127.0.0.8", 0)) as server, resolving_pods(_book(tmp_path, "127.0.0.8")):
        with socket.socket() as client:
            client.connect((POD, server.getsockname()[1]))
            assert client.getpeername()[0] == "127.0.0.8"
        with socket.socket() as client, pytest.raises(socket.gaierror):
            client.connect(("roll-nsqd-2.roll-nsqd-headless.nsq-test.svc", 1))


def test_child_interpreters_resolve_pod_names(tmp_path: Path) -> None:
    code = (f"import socket; print(socket.getaddrinfo({POD!r}, 4150)[0][4][0]); "
            f"s = socket.socket(); print(s.connect_ex(({POD!r}, 1)) != 0)")
    env = {**os.environ, **child_environment(_book(tmp_path, "127.0.0.9"))}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["127.0.0.9", "True"]  # resolved; refused (nothing listens), not a name error
