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


def client_context(config: Config) -> ssl.SSLContext:
    """``config.tls_context`` if given; else verify nsqd against ``tls_root_ca_file`` (or the
    system's CAs), present ``tls_cert``/``tls_key`` when set, and skip verification
    entirely with ``tls_insecure_skip_verify``."""
    if config.tls_context is not None:
        return config.tls_context
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=config.tls_root_ca_file)
    ctx.minimum_version = _MIN_VERSIONS[config.tls_min_version]
    if config.tls_cert and config.tls_key:
        ctx.load_cert_chain(config.tls_cert, config.tls_key)
    if config.tls_insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
