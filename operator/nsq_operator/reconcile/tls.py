"""A pass's look at the cluster's TLS Secret: the revision its data makes (a renewed or
replaced certificate changes it, and with it nsqd's pod template, so the roller replaces
every nsqd), and what keeps nsqd from getting a certificate: cert-manager not installed,
a Certificate not issued yet, a Secret missing or without the keys nsqd needs."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..builders import tls
from ..models import NsqCluster
from ..runtime import Runtime
from .health import Problem

CERT_MANAGER_MISSING = "CertManagerMissing"
TLS_SECRET_MISSING = "TlsSecretMissing"
TLS_SECRET_INCOMPLETE = "TlsSecretIncomplete"


@dataclass(frozen=True)
class TlsLook:
    revision: str | None  # None: no certificate to run nsqd with yet (nsqd's StatefulSet is left as it is)
    problem: Problem | None = None  # Degraded: it will not come by itself
    waiting: str | None = None  # Progressing: it should come (cert-manager is issuing)


def needed_keys(cluster: NsqCluster) -> list[str]:
    """ca.crt too when plain HTTP is closed: the operator and nsqadmin verify nsqd with it."""
    spec = cluster.spec.tls
    assert spec is not None
    return [tls.CERT_FILE, tls.KEY_FILE] + ([tls.CA_FILE] if spec.https_only or spec.client_auth_policy else [])


def revision_of(data: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for key in (tls.CERT_FILE, tls.KEY_FILE, tls.CA_FILE):
        digest.update(key.encode() + b"=" + data.get(key, "").encode() + b"\n")
    return digest.hexdigest()[:16]


async def look(rt: Runtime, cluster: NsqCluster) -> TlsLook:
    spec = cluster.spec.tls
    if spec is None:
        return TlsLook(revision="")
    name = str(tls.secret_name(cluster))
    if spec.issuer_ref is not None and not await rt.discovery.serves(rt.kube, "Certificate"):
        return TlsLook(None, Problem(CERT_MANAGER_MISSING, f"spec.tls.issuerRef names a cert-manager "
                                     f"{spec.issuer_ref.kind}, but this cluster does not serve cert-manager's "
                                     f"Certificate ({tls.CERT_MANAGER_API}): install cert-manager, or give "
                                     f"spec.tls.secretName alone"))
    secret = await rt.kube.get("Secret", cluster.namespace, name)
    if secret is None:
        if spec.issuer_ref is not None:
            return TlsLook(None, waiting=f"waiting for cert-manager to issue Certificate "
                                         f"{tls.certificate_name(cluster)} into Secret {name}")
        return TlsLook(None, Problem(TLS_SECRET_MISSING, f"Secret {name} of spec.tls.secretName does not exist"))
    data = dict(secret.get("data") or {})
    missing = [key for key in needed_keys(cluster) if not data.get(key)]
    if missing:
        return TlsLook(None, Problem(TLS_SECRET_INCOMPLETE, f"Secret {name} has no {', '.join(missing)}"))
    rt.trust.remember(cluster.namespace, name, secret)
    return TlsLook(revision_of(data))
