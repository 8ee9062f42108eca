"""TLS for nsqd's listeners and the in-band upgrade after IDENTIFY."""
from __future__ import annotations

import ssl

from .options import NsqdOptions
from .tls_any_client_cert import require_any_client_certificate

_VERSIONS = {
    "ssl3.0": ssl.TLSVersion.TLSv1,  # SSLv3 is gone from OpenSSL; TLS 1.0 is the floor
    "tls1.0": ssl.TLSVersion.TLSv1,
    "tls1.1": ssl.TLSVersion.TLSv1_1,
    "tls1.2": ssl.TLSVersion.TLSv1_2,
    "tls1.3": ssl.TLSVersion.TLSv1_3,
}


def server_context(opts: NsqdOptions) -> ssl.SSLContext | None:
    """The server context, or None when no certificate is configured.

    ``--tls-client-auth-policy`` as nsqd reads it: none asks for no client certificate
    (``--tls-root-ca-file`` is then unused); ``require`` demands a certificate but
    accepts any, verified or not (Go's RequireAnyClientCert, see tls_any_client_cert);
    ``require-verify`` demands one signed by the root CA file, or by the system's CAs
    without one (Go's RequireAndVerifyClientCert).
    """
    if not opts.tls_enabled:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    ctx.minimum_version = _VERSIONS[opts.tls_min_version]
    if opts.tls_client_auth_policy in ("require", "require-verify"):
        if opts.tls_root_ca_file:
            ctx.load_verify_locations(cafile=opts.tls_root_ca_file)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        ctx.verify_mode = ssl.CERT_REQUIRED
        if opts.tls_client_auth_policy == "require":
            require_any_client_certificate(ctx)
    else:
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def peer_common_name(ssl_object: ssl.SSLObject | None) -> str:
    if ssl_object is None:
        return ""
    cert = ssl_object.getpeercert()
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""
