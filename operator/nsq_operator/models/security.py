"""NsqCluster's ``spec.tls`` and ``spec.auth``: nsqd's TLS listeners and certificate, and
NSQ's authorization through an auth server."""
from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from .common import CrdModel, GoDuration

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class IssuerRef(CrdModel):
    name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN,
                      description="name of the cert-manager Issuer or ClusterIssuer")
    kind: Literal["Issuer", "ClusterIssuer"] = Field("Issuer", description="Issuer (in the cluster's namespace) "
                                                     "or ClusterIssuer")
    group: str = Field("cert-manager.io", min_length=1, description="API group of the issuer (cert-manager.io, or an "
                       "external issuer's group)")


CLIENT_AUTH_NEEDS_PLAIN_HTTP = (
    "clientAuthPolicy asks every TLS peer for a certificate, and the kubelet's probes show none: with it, use "
    "required: tcp-https (TCP clients need TLS and a certificate, HTTP stays plain for the probes)")
TLS_RULES = [
    {"rule": "has(self.secretName) || has(self.issuerRef)", "message": "tls needs a secretName, an issuerRef, or both"},
    {"rule": "!has(self.clientAuthPolicy) || self.clientAuthPolicy == '' || !has(self.required) || "
             "self.required != 'true'", "message": CLIENT_AUTH_NEEDS_PLAIN_HTTP},
]


class TlsSpec(CrdModel):
    """Either a Secret the owner keeps (``secretName`` alone), or an issuer from which the
    operator asks cert-manager for a certificate written to ``secretName`` (default
    ``<cluster>-nsqd-tls``). The Secret holds ``tls.crt``, ``tls.key`` and, for client
    certificates and for the operator to verify nsqd, ``ca.crt``."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": TLS_RULES})

    secret_name: str | None = Field(None, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN,
                                    description="the kubernetes.io/tls Secret nsqd serves (tls.crt, tls.key, ca.crt); "
                                                "with issuerRef, where cert-manager writes it (default <cluster>-nsqd-tls)")
    issuer_ref: IssuerRef | None = Field(None, description="a cert-manager Issuer or ClusterIssuer: the operator makes a "
                                         "Certificate for every nsqd pod and Service name and cert-manager keeps it renewed")
    required: Literal["true", "false", "tcp-https"] = Field(
        "true", description="nsqd's --tls-required: true refuses plain TCP clients and closes plain HTTP (probes, "
                            "the operator and nsqadmin then use HTTPS); tcp-https refuses plain TCP clients but keeps "
                            "plain HTTP; false offers TLS to clients that ask for it")
    client_auth_policy: Literal["", "require", "require-verify"] = Field(
        "", description="nsqd's --tls-client-auth-policy: require asks clients for a certificate, require-verify for "
                        "one signed by ca.crt (the operator presents the Secret's own certificate)")
    min_version: Literal["tls1.2", "tls1.3"] = Field("tls1.2", description="nsqd's --tls-min-version")
    duration: GoDuration = Field("2160h", description="with issuerRef: lifetime of each certificate cert-manager issues")
    renew_before: GoDuration = Field("360h", description="with issuerRef: how long before expiry cert-manager renews it")

    @model_validator(mode="after")
    def _a_source(self) -> "TlsSpec":
        if self.secret_name is None and self.issuer_ref is None:
            raise ValueError("tls needs a secretName, an issuerRef, or both")
        if self.client_auth_policy and self.required == "true":
            raise ValueError(CLIENT_AUTH_NEEDS_PLAIN_HTTP)
        return self

    @property
    def https_only(self) -> bool:
        """Plain HTTP is closed: probes and every caller of nsqd's HTTP API use HTTPS."""
        return self.required == "true"


class AuthSpec(CrdModel):
    http_addresses: list[str] = Field(
        min_length=1, max_length=16,
        json_schema_extra={"items": {"type": "string", "minLength": 1, "maxLength": 2048}},
        description="nsqd's --auth-http-address: each auth server as host:port or a full http(s):// URL; nsqd asks "
                    "them in turn and every client must send AUTH with a secret the server accepts")
    request_method: Literal["get", "post"] = Field("get", description="nsqd's --auth-http-request-method: get or post")
