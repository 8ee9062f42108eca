"""A throwaway PKI for TLS tests: one CA, a server certificate for 127.0.0.1/localhost,
and client certificates, written as PEM files into a test's directory."""
from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: CertFiles
    client: CertFiles
    stranger: CertFiles  # a client certificate signed by a CA nobody trusts

    def client_context(self, with_cert: CertFiles | None = None, verify: bool = True) -> ssl.SSLContext:
        """A client context that trusts our CA (or nothing, with ``verify=False``)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if verify:
            ctx.load_verify_locations(cafile=str(self.ca))
        else:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if with_cert is not None:
            ctx.load_cert_chain(str(with_cert.cert), str(with_cert.key))
        return ctx


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _write_cert(cert: x509.Certificate, path: Path) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(subject: str, issuer: str, public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(_name(subject)).issuer_name(_name(issuer))
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _make_ca(directory: Path, common_name: str) -> tuple[ec.EllipticCurvePrivateKey, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(common_name, common_name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    path = directory / f"{common_name}.pem"
    _write_cert(cert, path)
    return key, path


def _issue(directory: Path, name: str, common_name: str, ca_key: ec.EllipticCurvePrivateKey,
           ca_name: str, server: bool) -> CertFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _builder(common_name, ca_name, key.public_key()).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True)
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        usage = ExtendedKeyUsageOID.SERVER_AUTH
    else:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH
    builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    files = CertFiles(directory / f"{name}.pem", directory / f"{name}.key")
    _write_cert(cert, files.cert)
    _write_key(key, files.key)
    return files


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_path = _make_ca(directory, "test-ca")
    other_key, _ = _make_ca(directory, "untrusted-ca")
    return Pki(
        ca=ca_path,
        server=_issue(directory, "server", "nsqd.test", ca_key, "test-ca", server=True),
        client=_issue(directory, "client", "alice", ca_key, "test-ca", server=False),
        stranger=_issue(directory, "stranger", "mallory", other_key, "untrusted-ca", server=False),
    )
