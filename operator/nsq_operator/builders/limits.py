"""How long an NsqCluster's name may be: the longest name that every name derived from it
still fits. Computed from the name functions themselves, so a new or longer derived name
moves the limit with it (the CRD's rule and the operator's check both use it).

- Services are DNS-1035 labels: at most 63 characters (``<name>-nsqd-headless`` ...);
- the StatefulSet controller labels each pod ``controller-revision-hash:
  <statefulset>-<hash>``, a label value (at most 63) whose hash has up to 10 characters
  (a 32-bit FNV hash in decimal): ``<name>-lookupd`` + 11 must fit 63, the tightest;
- a StatefulSet pod's name is its hostname, a DNS label: ``<name>-nsqd-999``;
- ``app.kubernetes.io/instance: <name>`` is a label value itself.
cert-manager's commonName (64 bytes) also holds the namespace, which no rule on the name
can bound: the Certificate leaves it out when it would not fit (tls.py)."""
from __future__ import annotations

from typing import Callable

from ..models.cluster import ClusterRef
from ..models.cluster import NsqdSpec, LookupdSpec
from . import admin, names

DNS_LABEL = 63  # a DNS-1123/1035 label, and a label value
REVISION_HASH = 1 + 10  # "-" and the controller-revision-hash's hash, at its longest


def _suffix(name_of: Callable[[ClusterRef], str]) -> int:
    return len(name_of(ClusterRef("", "")))


def _max_ordinal(spec: type[NsqdSpec] | type[LookupdSpec]) -> int:
    bound = next(m.le for m in spec.model_fields["replicas"].metadata if getattr(m, "le", None) is not None)
    return int(bound) - 1


def _limits() -> dict[str, int]:
    services = {"Service " + f(ClusterRef("<name>", "")): DNS_LABEL - _suffix(f)
                for f in (names.nsqd_headless_service, names.nsqd_client_service, names.lookupd_headless_service,
                          admin.admin_name)}  # type: ignore[arg-type]
    revisions = {f"controller-revision-hash {f(ClusterRef('<name>', ''))}-<hash>": DNS_LABEL - REVISION_HASH - _suffix(f)
                 for f in (names.nsqd_statefulset, names.lookupd_statefulset)}
    hostnames = {
        f"pod {names.pod_name(names.nsqd_statefulset(ClusterRef('<name>', '')), _max_ordinal(NsqdSpec))}":
            DNS_LABEL - len(names.pod_name(names.nsqd_statefulset(ClusterRef("", "")), _max_ordinal(NsqdSpec))),
        f"pod {names.pod_name(names.lookupd_statefulset(ClusterRef('<name>', '')), _max_ordinal(LookupdSpec))}":
            DNS_LABEL - len(names.pod_name(names.lookupd_statefulset(ClusterRef("", "")), _max_ordinal(LookupdSpec))),
    }
    return {**services, **revisions, **hostnames, "label app.kubernetes.io/instance": DNS_LABEL}


LIMITS = _limits()  # what bounds the name, by derived name: the longest name it allows
MAX_CLUSTER_NAME = min(LIMITS.values())
TIGHTEST = min(LIMITS, key=LIMITS.__getitem__)


def name_too_long(name: str) -> str | None:
    """Why this NsqCluster name is too long, else None."""
    if len(name) <= MAX_CLUSTER_NAME:
        return None
    return (f"metadata.name {name!r} has {len(name)} characters, at most {MAX_CLUSTER_NAME} fit every name made "
            f"from it ({TIGHTEST} must fit {DNS_LABEL} characters)")
