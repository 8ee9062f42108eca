"""The client's TLS context for the in-band upgrade nsqd performs after IDENTIFY."""
from __future__ import annotations

import ssl

from .config import Config

_MIN_VERSIONS = {
    "tls1.0": ssl.TLSVersion.TLSv1,
    "tls1.1": ssl.TLSVersion.TLSv1_1,
    "tls1.2": ssl.TLSVersion.TLSv1_2,
    "tls1.3": ssl.TLSVersion.TLSv1_3,
}


# What Python 3.13's default context verifies, on every Python we support, so a certificate
# is accepted or refused the same way whatever the interpreter: X.509 strict mode (RFC 5280:
# key identifiers, well-formed extensions), and a trusted intermediate may end the chain.
STRICT_VERIFY_FLAGS = ssl.VERIFY_X509_STRICT | ssl.VERIFY_X509_PARTIAL_CHAIN


def client_context(config: Config) -> ssl.SSLContext:
    """``config.tls_context`` if given (used as is: the way to trust a CA that breaks RFC
    5280); else verify nsqd strictly against ``tls_root_ca_file`` (or the system's CAs),
    present ``tls_cert``/``tls_key`` when set, and skip verification entirely with
    ``tls_insecure_skip_verify``."""
    if config.tls_context is not None:
        return config.tls_context
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=config.tls_root_ca_file)
    ctx.verify_flags |= STRICT_VERIFY_FLAGS
    ctx.minimum_version = _MIN_VERSIONS[config.tls_min_version]
    if config.tls_cert and config.tls_key:
        ctx.load_cert_chain(config.tls_cert, config.tls_key)
    if config.tls_insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
