"""TLS for nsqd's listeners and the in-band upgrade after IDENTIFY."""
from __future__ import annotations

import ssl
import warnings

from .options import NsqdOptions
from .tls_any_client_cert import require_any_client_certificate

_VERSIONS = {
    "ssl3.0": ssl.TLSVersion.TLSv1,  # SSLv3 is gone from OpenSSL (and from Go); TLS 1.0 is the floor
    "tls1.0": ssl.TLSVersion.TLSv1,
    "tls1.1": ssl.TLSVersion.TLSv1_1,
    "tls1.2": ssl.TLSVersion.TLSv1_2,
    "tls1.3": ssl.TLSVersion.TLSv1_3,
}
_BUILT_WITH = {ssl.TLSVersion.TLSv1: ssl.HAS_TLSv1, ssl.TLSVersion.TLSv1_1: ssl.HAS_TLSv1_1}


class TlsSetupError(ValueError):
    """The TLS options ask for something this process cannot do; nsqd does not start."""


def _admit_versions_below_1_2(ctx: ssl.SSLContext, option: str) -> None:
    """TLS 1.0 and 1.1 sign their handshakes with SHA-1, which OpenSSL 3's default security
    level refuses: the floor the operator asked for is only real at level 0."""
    minimum = _VERSIONS[option]
    if not _BUILT_WITH.get(minimum, True):
        raise TlsSetupError(f"--tls-min-version={option}: this Python's OpenSSL ({ssl.OPENSSL_VERSION}) "
                            "was built without that protocol version; use tls1.2 or tls1.3")
    try:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    except ssl.SSLError as e:
        raise TlsSetupError(f"--tls-min-version={option}: OpenSSL ({ssl.OPENSSL_VERSION}) refuses "
                            f"security level 0, which TLS 1.0 and 1.1 handshakes need: {e}") from None


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
    with warnings.catch_warnings():  # Python deprecates TLS 1.0/1.1; the option asks for them
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx.minimum_version = _VERSIONS[opts.tls_min_version]
    if _VERSIONS[opts.tls_min_version] < ssl.TLSVersion.TLSv1_2:
        _admit_versions_below_1_2(ctx, opts.tls_min_version)
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


def handoff_context(opts: NsqdOptions) -> ssl.SSLContext | None:
    """What a scale-down's handoff verifies https:// targets with: --tls-root-ca-file
    (the cluster's CA), showing this nsqd's own certificate in case a target asks for
    one; None without either (the system's CAs, no certificate)."""
    if not opts.tls_root_ca_file and not opts.tls_enabled:
        return None
    ctx = ssl.create_default_context(cafile=opts.tls_root_ca_file or None)
    if opts.tls_enabled:
        ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
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
