"""cert-manager's share of a test cluster: for every Certificate in the emulator it issues
a certificate from a test CA into the Secret the Certificate names (``tls.crt``,
``tls.key``, ``ca.crt``, type kubernetes.io/tls), with exactly the Certificate's DNS
names, a new key each time (its ``rotationPolicy: Always``); ``renew()`` issues again, as
cert-manager does before expiry. Certificates are conforming (key identifiers, key usage,
extended key usage), as cert-manager issues them."""
from __future__ import annotations

import asyncio
import base64
import datetime
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.operator.emulator import ADMIN

POLL = 0.2  # how often Certificates are listed (a polling period, not a synchronisation)
USAGES = {"server auth": ExtendedKeyUsageOID.SERVER_AUTH, "client auth": ExtendedKeyUsageOID.CLIENT_AUTH}


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _no_key_usage(**on: bool) -> x509.KeyUsage:
    flags = dict(digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
                 key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False, decipher_only=False)
    return x509.KeyUsage(**{**flags, **on})


class TestCa:
    def __init__(self, name: str = "nsq-test-ca") -> None:
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
                     .add_extension(_no_key_usage(digital_signature=True, key_cert_sign=True, crl_sign=True),
                                    critical=True)
                     .sign(self.key, hashes.SHA256()))

    @property
    def pem(self) -> bytes:
        return _pem(self.cert)

    def issue(self, spec: dict[str, Any]) -> dict[str, str]:
        """The Secret data cert-manager writes for a Certificate spec."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        usages = [USAGES[u] for u in spec.get("usages", ["server auth"]) if u in USAGES]
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, spec.get("commonName", "nsqd"))]))
                .issuer_name(self.name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(hours=2))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(_no_key_usage(digital_signature=True, key_encipherment=True), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                               critical=False)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in spec["dnsNames"]]), critical=False)
                .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                .sign(self.key, hashes.SHA256()))
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        return {"tls.crt": _b64(_pem(cert)), "tls.key": _b64(key_pem), "ca.crt": _b64(self.pem)}


@dataclass
class FakeCertManager:
    api: str
    namespace: str
    ca: TestCa = field(default_factory=TestCa)
    issued: dict[str, int] = field(default_factory=dict)  # Certificate -> how many times issued
    errors: list[BaseException] = field(default_factory=list)  # passes that failed (the next one tries again)
    _wanted: set[str] = field(default_factory=set)  # Certificates to issue again
    _task: asyncio.Task[None] | None = None
    _session: aiohttp.ClientSession | None = None

    async def start(self) -> "FakeCertManager":
        self._session = aiohttp.ClientSession(headers=ADMIN, timeout=aiohttp.ClientTimeout(total=5))
        self._task = asyncio.create_task(self._run(), name="fake-cert-manager")
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    def renew(self, certificate: str) -> None:
        self._wanted.add(certificate)

    async def _run(self) -> None:
        while True:
            try:
                await self._pass()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                # as cert-manager's controller: a failed pass (an API server slow or
                # dropping a kept-alive connection under load) is retried, not the end
                self.errors.append(e)
            await asyncio.sleep(POLL)

    def _url(self, path: str) -> str:
        return f"{self.api}{path}"

    async def _pass(self) -> None:
        assert self._session is not None
        base = f"/apis/cert-manager.io/v1/namespaces/{self.namespace}/certificates"
        async with self._session.get(self._url(base)) as r:
            certificates = (await r.json()).get("items", []) if r.status == 200 else []
        for certificate in certificates:
            name, spec = certificate["metadata"]["name"], certificate["spec"]
            secret_path = f"/api/v1/namespaces/{self.namespace}/secrets/{spec['secretName']}"
            async with self._session.get(self._url(secret_path)) as r:
                exists = r.status == 200
            if exists and name not in self._wanted:
                continue
            self._wanted.discard(name)
            secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                      "metadata": {"name": spec["secretName"], "namespace": self.namespace,
                                   "labels": dict((spec.get("secretTemplate") or {}).get("labels") or {}),
                                   "annotations": {"cert-manager.io/certificate-name": name}},
                      "data": self.ca.issue(spec)}
            if exists:
                async with self._session.patch(self._url(secret_path), json={"data": secret["data"]},
                                               headers={"Content-Type": "application/merge-patch+json"}) as r:
                    assert r.status < 400, await r.text()
            else:
                async with self._session.post(self._url(secret_path.rsplit("/", 1)[0]), json=secret) as r:
                    assert r.status < 400, await r.text()
            self.issued[name] = self.issued.get(name, 0) + 1
