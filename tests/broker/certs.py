"""A throwaway PKI for TLS tests: one CA, a server certificate for 127.0.0.1/localhost,
and client certificates, written as PEM files into a test's directory.

Certificates carry what a real CA (cert-manager, a public CA) always sets and RFC 5280
requires: key identifiers (subject on every certificate, authority on those a CA issued),
key usage, extended key usage. Python 3.13 verifies in X.509 strict mode by default and
refuses a chain without them; ``make_nonconforming_server`` makes one on purpose."""
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


@dataclass(frozen=True)
class _Ca:
    name: str
    key: ec.EllipticCurvePrivateKey
    path: Path


def _make_ca(directory: Path, common_name: str) -> _Ca:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(common_name, common_name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    path = directory / f"{common_name}.pem"
    _write_cert(cert, path)
    return _Ca(common_name, key, path)


def _issue(directory: Path, name: str, common_name: str, ca: _Ca, server: bool,
           key_identifiers: bool = True) -> CertFiles:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (_builder(common_name, ca.name, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_agreement=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_cert_sign=False, crl_sign=False,
                                            encipher_only=False, decipher_only=False), critical=True))
    if key_identifiers:
        builder = (builder
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                                  critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        usage = ExtendedKeyUsageOID.SERVER_AUTH
    else:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH
    builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    files = CertFiles(directory / f"{name}.pem", directory / f"{name}.key")
    _write_cert(cert, files.cert)
    _write_key(key, files.key)
    return files


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _make_ca(directory, "test-ca")
    other = _make_ca(directory, "untrusted-ca")
    return Pki(
        ca=ca.path,
        server=_issue(directory, "server", "nsqd.test", ca, server=True),
        client=_issue(directory, "client", "alice", ca, server=False),
        stranger=_issue(directory, "stranger", "mallory", other, server=False),
    )


def make_nonconforming_server(directory: Path) -> tuple[Path, CertFiles]:
    """A CA and a server certificate it issued without key identifiers, as some home-made
    CAs do: RFC 5280 requires the authority key identifier, X.509 strict mode refuses it."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = _make_ca(directory, "lax-ca")
    return ca.path, _issue(directory, "lax-server", "nsqd.lax", ca, server=True, key_identifiers=False)
