"""pynsq and gnsq, unchanged from PyPI, against our nsqd with TLS (client certificates
required) and auth: each publishes and consumes with a secret the auth server knows.
Each client runs in its own interpreter (tornado and gevent each own their process)."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.broker.auth_server import AuthServer, Grant, Identity
from tests.broker.certs import Pki, make_pki
from tests.broker.tls_nsqd import TlsNsqd

pytestmark = pytest.mark.interop

SCRIPTS = Path(__file__).with_name("secure_clients")
COUNT = 5


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    server = AuthServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def secure_nsqd(tmp_path_factory: pytest.TempPathFactory, pki: Pki, auth_server: AuthServer) -> Iterator[TlsNsqd]:
    server = TlsNsqd(tmp_path_factory.mktemp("nsqd"), pki, {
        "auth-http-address": auth_server.address, "tls-client-auth-policy": "require-verify",
        "tls-root-ca-file": str(pki.ca)}).start()
    yield server
    server.stop()


def run_client(script: str, server: TlsNsqd, pki: Pki, topic: str, secret: str) -> dict[str, Any]:
    argv = [sys.executable, str(SCRIPTS / script), f"--nsqd={server.tcp_address}", f"--topic={topic}",
            f"--secret={secret}", f"--ca={pki.ca}", f"--cert={pki.client.cert}", f"--key={pki.client.key}",
            f"--count={COUNT}", "--deadline=20"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=SCRIPTS)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, f"{script} failed: {done.stdout}\n{done.stderr[-3000:]}"
    return json.loads(lines[-1])


@pytest.mark.parametrize("script,name", [("pynsq_tls_auth.py", "pynsq"), ("gnsq_tls_auth.py", "gnsq")])
def test_client_publishes_and_consumes_over_tls_with_auth(secure_nsqd: TlsNsqd, pki: Pki, auth_server: AuthServer,
                                                         script: str, name: str) -> None:
    topic = f"secure-{name}-{uuid.uuid4().hex[:8]}"
    secret = f"secret-{uuid.uuid4().hex}"
    # a publish is checked against channel "", so publishing needs a pattern matching it
    auth_server.grant(secret, Identity("alice", [Grant(f"^{topic}$", [".*"], ["publish"]),
                                                 Grant(f"^{topic}$", ["^ch$"], ["subscribe"])]))
    result = run_client(script, secure_nsqd, pki, topic, secret)
    assert result["errors"] == []
    assert result["acked"] == COUNT
    assert sorted(result["received"]) == [f"{name}-{i}" for i in range(COUNT)]
    queries = auth_server.queries_for(secret)
    assert queries and all(q["tls"] == "true" and q["common_name"] == "alice" for q in queries)


@pytest.mark.parametrize("script", ["pynsq_tls_auth.py", "gnsq_tls_auth.py"])
def test_client_with_a_secret_for_another_topic_is_refused(secure_nsqd: TlsNsqd, pki: Pki, auth_server: AuthServer,
                                                           script: str) -> None:
    topic = f"secure-denied-{uuid.uuid4().hex[:8]}"
    secret = f"secret-{uuid.uuid4().hex}"
    auth_server.grant(secret, Identity("bob", [Grant("^somewhere-else$", [".*"], ["publish", "subscribe"])]))
    result = run_client(script, secure_nsqd, pki, topic, secret)
    assert result["acked"] == 0 and result["received"] == []
    # pynsq quotes the error frame; gnsq raises its NSQUnauthorized with the description
    assert any(f'AUTH failed for PUB on "{topic}" ""' in e for e in result["errors"]), result["errors"]
