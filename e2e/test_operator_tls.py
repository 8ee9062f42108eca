"""A secure cluster under load, on the emulated API server with the test kubelet and a
stand-in for cert-manager (tests.operator.cert_manager), serving the Prometheus Operator's
PodMonitor too: an NsqCluster whose spec.tls names an issuer gets a Certificate (and, its
metrics asked for, PodMonitors), nsqd serves the issued certificate with --tls-required=true
(plain TCP and HTTP closed: the operator and the kubelet's probes use HTTPS), and TLS
clients, ours and pynsq, both verifying nsqd's certificate and pod name, publish and
consume through lookupd. The certificate is renewed under that load: every nsqd is
replaced through the drain roller and serves the new certificate, and every acknowledged
message reaches every channel. Then spec.auth is added (the example auth server of
operator/examples): once that roll is done a client without a secret is refused and one
with a secret is served."""
from __future__ import annotations

import asyncio
import base64
import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
import pytest_asyncio

from e2e.pod_dns import child_environment, resolving_pods
from e2e.pod_ports import PodPorts
from e2e.pynsq_consumers import PynsqConsumers
from e2e.test_operator_rollout import PodWatch, cluster_state, serving, until
from nsq_client import Config, Consumer, Producer
from nsq_client.errors import NsqClientError
from nsq_local.kubeload import DiscoveringLoad, render, summary
from nsq_local.ledger import Ledger
from nsq_local.options import LoadOptions
from nsq_operator.builders import names
from nsq_operator.constants import TLS_REVISION_ANNOTATION
from tests.broker.tls_wire import TlsWireConn
from tests.operator.cert_manager import FakeCertManager
from tests.operator.harness import Backstage, OperatorUnderTest
from tests.servers import wait_for

pytestmark = pytest.mark.slow

NS = "nsq-e2e"
CLUSTER = "sec"
NSQDS = [f"{CLUSTER}-nsqd-{i}" for i in range(2)]
LOOKUPDS = [f"{CLUSTER}-lookupd-0"]
CERTIFICATE = f"{CLUSTER}-nsqd-tls"
TOPIC = "orders"
OUR_CHANNEL, PYNSQ_CHANNEL = "billing", "audit"
SECRET = "s3cr3t-billing"
EXAMPLES = Path(__file__).resolve().parents[1] / "operator" / "examples"
ROLL_TIMEOUT = 90.0


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[str]:
    """The example auth server, knowing one secret; yields its host:port."""
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({SECRET: {"identity": "billing", "authorizations": [
        {"topic": f"^{TOPIC}$", "channels": [".*"], "permissions": ["publish", "subscribe"]}]}}))
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / "auth_server.py"), "--listen", "127.0.0.1:0",
                             "--secrets", str(secrets), "--require-tls"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert "listening on" in line, line
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(10)


@pytest_asyncio.fixture
async def secure(tmp_path: Path) -> AsyncIterator[tuple[OperatorUnderTest, FakeCertManager]]:
    backstage = Backstage(tmp_path / "pods", NS, extra_apis=frozenset({"cert-manager.io/v1", "monitoring.coreos.com/v1"}))
    backstage.start()
    issuer = await FakeCertManager(backstage.url, NS).start()
    running = OperatorUnderTest(backstage, NS)
    try:
        with resolving_pods(running.pods.path):  # the operator calls nsqd by its pod name over HTTPS
            await running.start()
            yield running, issuer
    finally:
        await running.stop()
        await issuer.stop()
        backstage.stop()
        if backstage.kubelet_errors:
            print("test kubelet errors:", *backstage.kubelet_errors, sep="\n  ")
        if issuer.errors:
            print("test cert-manager errors:", *map(repr, issuer.errors), sep="\n  ")


def served_certificate(operator: OperatorUnderTest, pod: str) -> bytes:
    """The certificate the pod's nsqd presents on its HTTPS port (DER)."""
    entry = operator.pods.pods()[pod]
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate((entry["host"], entry["https_port"])))


async def issued_certificate(operator: OperatorUnderTest) -> bytes:
    secret = await operator.core(f"/api/v1/namespaces/{NS}/secrets/{CERTIFICATE}")
    return ssl.PEM_cert_to_DER_cert(base64.b64decode(secret["data"]["tls.crt"]).decode())


async def _create(operator: OperatorUnderTest) -> None:
    await operator.create("NsqCluster", CLUSTER, {
        "nsqd": {"replicas": len(NSQDS), "options": {"msg-timeout": "10s"}}, "lookupd": {"replicas": 1},
        "drainTimeoutSeconds": 10, "tls": {"issuerRef": {"name": "test-ca", "kind": "ClusterIssuer"}},
        "metrics": {"prometheus": {"enabled": True}}})
    await operator.create("NsqTopic", f"{CLUSTER}-{TOPIC}", {"cluster": CLUSTER, "topicName": TOPIC})
    for channel in (OUR_CHANNEL, PYNSQ_CHANNEL):
        await operator.create("NsqChannel", f"{CLUSTER}-{channel}", {"cluster": CLUSTER, "topic": TOPIC,
                                                                    "channelName": channel})
    await operator.ready("NsqCluster", CLUSTER, timeout=120)  # a TLS cluster on a loaded 2-core machine took over 60 s
    for channel in (OUR_CHANNEL, PYNSQ_CHANNEL):  # the operator reached every nsqd over HTTPS
        await operator.ready("NsqChannel", f"{CLUSTER}-{channel}", timeout=30)
    # this API server serves the Prometheus Operator's kinds: nsqd is scraped over HTTPS
    monitor = await operator.core(f"/apis/monitoring.coreos.com/v1/namespaces/{NS}/podmonitors/{CLUSTER}-nsqd")
    assert monitor["spec"]["podMetricsEndpoints"][0]["scheme"] == "https"


async def rolled_onto(operator: OperatorUnderTest, watch: PodWatch, annotation: str, value: str) -> None:
    async def done() -> bool:
        pods = await watch.pods()
        nsqds = [p for name, p in pods.items() if name in NSQDS]
        return len(nsqds) == len(NSQDS) and all(
            p["metadata"]["annotations"].get(annotation) == value and _ready(p) for p in nsqds)
    await until(f"every nsqd replaced and Ready with {annotation}={value}", ROLL_TIMEOUT, done,
                cluster_state(operator, watch))


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])) \
        and not pod["metadata"].get("deletionTimestamp")


async def template_annotation(operator: OperatorUnderTest, name: str) -> str | None:
    sts = await operator.core(f"/apis/apps/v1/namespaces/{NS}/statefulsets/{CLUSTER}-nsqd")
    return (sts or {}).get("spec", {}).get("template", {}).get("metadata", {}).get("annotations", {}).get(name)


@pytest.mark.timeout(300)
async def test_certificate_rotation_under_tls_load_then_auth(
        secure: tuple[OperatorUnderTest, FakeCertManager], auth_server: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    operator, issuer = secure
    await _create(operator)
    book = operator.pods.path
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(issuer.ca.pem)
    tls = {"tls_v1": True, "tls_root_ca_file": str(ca_file)}
    # plain TCP and plain HTTP are closed; the certificate names the pod (checked by the clients)
    entry = operator.pods.pods()[NSQDS[0]]
    with pytest.raises(NsqClientError):
        async with Producer(f"{entry['host']}:{entry['tcp_port']}") as plain:
            await plain.publish(TOPIC, b"plain")
    first = await issued_certificate(operator)
    assert all(served_certificate(operator, pod) == first for pod in NSQDS)

    watch = PodWatch(operator, CLUSTER)
    await watch.start()
    ledger = Ledger([TOPIC], [OUR_CHANNEL, PYNSQ_CHANNEL], first_phase="before")
    options = LoadOptions(topics=[TOPIC], channels=[OUR_CHANNEL], rate=100, batch=5, max_in_flight=50,
                          lookupd_poll_interval=0.5)
    for name, value in child_environment(book).items():
        monkeypatch.setenv(name, value)
    async with PodPorts(operator.pods, LOOKUPDS, "http_port") as lookupd_ports:
        # producers find nsqds through lookupd too: their pod names are what the certificate carries
        load = DiscoveringLoad(options, ledger, [], lookupd_ports.addresses, connection=tls)
        pynsq = PynsqConsumers([(TOPIC, PYNSQ_CHANNEL)], lookupd_ports.addresses, tmp_path, max_in_flight=50,
                               lookupd_poll_interval=1, tls_ca_file=str(ca_file),
                               on_delivery=lambda d: ledger.delivered(d.topic, d.channel, d.body, d.nsqd))
        try:
            await pynsq.start()
            await load.start()
            await until("every nsqd serving TLS clients before the renewal", 30, serving(ledger, "before", NSQDS))

            # -- cert-manager renews the certificate: the pods roll onto it ----------------------
            ledger.begin_phase("renewal")
            before = await template_annotation(operator, TLS_REVISION_ANNOTATION)
            issuer.renew(CERTIFICATE)

            async def new_revision() -> str | None:
                now = await template_annotation(operator, TLS_REVISION_ANNOTATION)
                return now if now and now != before else None
            await until("a new TLS revision on nsqd's pod template", 20, new_revision)
            revision = str(await new_revision())
            await rolled_onto(operator, watch, TLS_REVISION_ANNOTATION, revision)
            await operator.ready("NsqCluster", CLUSTER, timeout=30)
            ledger.begin_phase("after")
            await until("TLS clients back on every renewed nsqd", 30, serving(ledger, "after", NSQDS))

            ledger.begin_phase("settle")
            await load.stop_publishing()
            pynsq.catch_up()
            delivered = await load.wait_all_delivered(30)
        finally:
            await load.stop()
            await pynsq.stop()
            await watch.stop()
    result = summary(ledger.tally(), delivered)
    text = render(result)
    print(text)
    renewed = await issued_certificate(operator)
    assert renewed != first and issuer.issued[CERTIFICATE] == 2
    assert all(served_certificate(operator, pod) == renewed for pod in NSQDS)
    assert sorted(set(watch.replaced) & set(NSQDS)) == sorted(NSQDS), watch.replaced
    phases = {p["name"]: p for p in result["phases"]}
    assert all(phases[name]["acknowledged"] > 0 for name in ("before", "renewal", "after")), text
    assert result["acknowledged"] > 0 and result["lost"] == 0 and delivered and result["ok"], text
    assert [(c["channel"], c["lost"]) for c in result["channels"]] == [(OUR_CHANNEL, 0), (PYNSQ_CHANNEL, 0)], text

    # -- authorization: the example auth server, on a rolled cluster ------------------------------
    await operator.patch("NsqCluster", CLUSTER, {"spec": {"auth": {"httpAddresses": [auth_server]}}})

    async def auth_everywhere() -> bool:
        pods = await watch.pods()
        nsqds = [pods.get(name) for name in NSQDS]
        return all(p is not None and _ready(p) and f"--auth-http-address={auth_server}" in
                   p["spec"]["containers"][0]["args"] for p in nsqds)
    watch = PodWatch(operator, CLUSTER)
    await watch.start()
    try:
        await until("every nsqd replaced with --auth-http-address", ROLL_TIMEOUT, auth_everywhere,
                    cluster_state(operator, watch))
        await operator.ready("NsqCluster", CLUSTER, timeout=30)
    finally:
        await watch.stop()
    await _auth_refuses_strangers_and_serves_the_secret(operator, tls, ca_file)


async def _auth_refuses_strangers_and_serves_the_secret(operator: OperatorUnderTest, tls: dict[str, Any],
                                                       ca_file: Path) -> None:
    pod_name = names.pod_dns(NSQDS[0], f"{CLUSTER}-nsqd-headless", NS)
    entry = operator.pods.pods()[NSQDS[0]]
    context = ssl.create_default_context(cafile=str(ca_file))

    def refused(secret: str | None, code: str) -> dict[str, Any]:
        """nsqd's own answer, on the wire: a client without (or with a wrong) secret."""
        conn = TlsWireConn((entry["host"], entry["tcp_port"]))
        try:
            answer = conn.negotiate_tls(context, server_hostname=pod_name)
            if secret is not None:
                conn.auth(secret)
            else:
                conn.pub(TOPIC, b"no secret")
            conn.expect_error(code)
            return dict(answer)
        finally:
            conn.close()
    identified = await asyncio.to_thread(refused, None, "E_AUTH_FIRST")
    assert identified["auth_required"] is True and identified["tls_v1"] is True
    await asyncio.to_thread(refused, "not-the-secret", "E_AUTH_FAILED")

    address = f"{pod_name}:{entry['tcp_port']}"
    got: list[bytes] = []

    async def keep(message: Any) -> None:
        got.append(message.body)
    with resolving_pods(operator.pods.path):
        consumer = Consumer(TOPIC, "authorized", Config(**tls, auth_secret=SECRET), handler=keep)
        await consumer.connect_to_nsqd(address)
        try:
            async with Producer(address, Config(**tls, auth_secret=SECRET)) as producer:
                await producer.publish(TOPIC, b"with the secret")
            await asyncio.to_thread(wait_for, lambda: b"with the secret" in got, 10, 0.05, "the message delivered")
        finally:
            await consumer.stop()
