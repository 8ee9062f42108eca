"""nsqd's TLS: the Secret it serves, the cert-manager Certificate the operator asks for
when given an issuer, and the flags, volume and ports that go with them.

The Certificate names every nsqd pod with a wildcard over its headless Service rather
than one name per pod: scaling nsqd then changes no certificate, so it rolls no pod.
nsqlookupd has no TLS in NSQ (its traffic is addresses and registrations, not
messages), so only nsqd's names are in it."""
from __future__ import annotations

from typing import Any

from ..constants import NSQ_TLS_DIR, NSQD_HTTPS_PORT
from ..models import NsqCluster
from ..models.security import TlsSpec
from . import labels, names
from .ownership import object_meta

TLS_VOLUME = "tls"
CERT_FILE, KEY_FILE, CA_FILE = "tls.crt", "tls.key", "ca.crt"
CERT_MANAGER_API = "cert-manager.io/v1"
COMMON_NAME_MAX = 64  # bytes: cert-manager (and X.509's ub-common-name) refuse a longer one


def secret_name(cluster: NsqCluster) -> str | None:
    """The Secret nsqd serves, None without spec.tls."""
    tls = cluster.spec.tls
    if tls is None:
        return None
    return tls.secret_name or f"{cluster.name}-nsqd-tls"


def certificate_name(cluster: NsqCluster) -> str:
    return f"{cluster.name}-nsqd-tls"


def _service_names(service: str, namespace: str, domain: str) -> list[str]:
    found = [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
    return found + ([f"{service}.{namespace}.svc.{domain}"] if domain else [])


def dns_names(cluster: NsqCluster) -> list[str]:
    """Every name a client may dial an nsqd by: each pod (one wildcard over the headless
    Service, with and without the cluster domain), the headless and the client Service."""
    headless, client = names.nsqd_headless_service(cluster), names.nsqd_client_service(cluster)
    pods = [f"*.{headless}.{cluster.namespace}.svc"]
    if cluster.domain:
        pods.append(f"*.{headless}.{cluster.namespace}.svc.{cluster.domain}")
    return pods + _service_names(headless, cluster.namespace, cluster.domain) + \
        _service_names(client, cluster.namespace, cluster.domain)


def build_certificate(cluster: NsqCluster) -> dict[str, Any] | None:
    """The cert-manager Certificate, when spec.tls names an issuer (else None)."""
    tls = cluster.spec.tls
    if tls is None or tls.issuer_ref is None:
        return None
    secret = secret_name(cluster)
    spec: dict[str, Any] = {
        "secretName": secret,
        # the Secret carries the cluster's labels, so `kubectl get secret -l` finds it
        "secretTemplate": {"labels": labels.labels(cluster, labels.NSQD)},
    }
    common = f"{names.nsqd_client_service(cluster)}.{cluster.namespace}.svc"
    if len(common.encode()) <= COMMON_NAME_MAX:  # else left out: dnsNames name the Service all the same
        spec["commonName"] = common
    return {
        "apiVersion": CERT_MANAGER_API,
        "kind": "Certificate",
        "metadata": object_meta(cluster, certificate_name(cluster), labels.NSQD),
        "spec": {
            **spec,
            "dnsNames": dns_names(cluster),
            "duration": tls.duration,
            "renewBefore": tls.renew_before,
            # nsqd serves with it; the operator (and nsqd's handoff) show it as a client certificate
            "usages": ["server auth", "client auth", "digital signature", "key encipherment"],
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "issuerRef": tls.issuer_ref.wire(),
        },
    }


def nsqd_args(tls: TlsSpec) -> list[str]:
    args = [f"--tls-cert={NSQ_TLS_DIR}/{CERT_FILE}", f"--tls-key={NSQ_TLS_DIR}/{KEY_FILE}",
            f"--tls-required={tls.required}", f"--tls-min-version={tls.min_version}",
            f"--https-address=0.0.0.0:{NSQD_HTTPS_PORT}"]
    if tls.client_auth_policy:
        args.append(f"--tls-client-auth-policy={tls.client_auth_policy}")
    if tls.client_auth_policy or tls.https_only:
        # verifies clients' certificates; and, plain HTTP closed, the nsqds a scale-down hands off to
        args.append(f"--tls-root-ca-file={NSQ_TLS_DIR}/{CA_FILE}")
    return args


def volume(cluster: NsqCluster) -> dict[str, Any]:
    return {"name": TLS_VOLUME, "secret": {"secretName": secret_name(cluster), "defaultMode": 0o440}}


def mount() -> dict[str, Any]:
    return {"name": TLS_VOLUME, "mountPath": NSQ_TLS_DIR, "readOnly": True}
