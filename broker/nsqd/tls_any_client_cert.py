"""Require a client certificate without verifying it (Go's tls.RequireAnyClientCert).

Python's ssl has no verify callback (CPython issue #75425): a server context that asks
for client certificates (CERT_OPTIONAL or CERT_REQUIRED) makes OpenSSL fail the handshake
on any certificate its trust store cannot verify. So this module sets the callback on
the context's OpenSSL ``SSL_CTX`` itself, through the libssl the interpreter's ``_ssl``
module is linked with. The callback accepts every certificate, so OpenSSL still demands
a certificate (``SSL_VERIFY_FAIL_IF_NO_PEER_CERT``) and still checks that the client
holds its private key (the CertificateVerify signature), exactly what Go does, and
``getpeercert()`` still decodes the certificate (for the auth server's common_name).
"""
from __future__ import annotations

import ctypes
import ssl
import sys

_SSL_VERIFY_PEER = 0x01
_SSL_VERIFY_FAIL_IF_NO_PEER_CERT = 0x02
_REQUIRE = _SSL_VERIFY_PEER | _SSL_VERIFY_FAIL_IF_NO_PEER_CERT

_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _accept(preverify_ok: int, store_ctx: int | None) -> int:
    return 1


# OpenSSL keeps only the function pointer: the ctypes object must live as long as the process
_ACCEPT_EVERY_CERTIFICATE = _VerifyCallback(_accept)


class UnsupportedSsl(ValueError):
    """The interpreter's ssl cannot be reached to require certificates without verifying
    (a ValueError, so nsqd's command line reports it as a configuration it cannot serve)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"--tls-client-auth-policy=require is not available: {why}")


def _libssl() -> ctypes.CDLL:
    import _ssl

    # dlsym on the extension module's handle also searches the libraries it links to
    candidates = [getattr(_ssl, "__file__", None), None]  # None: a Python built with OpenSSL inside
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
            lib.SSL_CTX_set_verify
            lib.SSL_CTX_get_verify_mode
            lib.SSL_CTX_get_options
        except (OSError, AttributeError):
            continue
        lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.SSL_CTX_set_verify.restype = None
        lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_options.restype = ctypes.c_uint64
        return lib
    raise UnsupportedSsl("cannot find OpenSSL's SSL_CTX_set_verify in this Python")


def _ssl_ctx_pointer(ctx: ssl.SSLContext, lib: ctypes.CDLL) -> int:
    """CPython's SSLContext object holds its ``SSL_CTX *`` right after the object header.
    Read it, then prove it is the right pointer by asking OpenSSL for two settings
    Python just made, before anything is written through it."""
    if sys.implementation.name != "cpython":
        raise UnsupportedSsl(f"needs CPython's ssl module, not {sys.implementation.name}'s")
    pointer = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not pointer:
        raise UnsupportedSsl("the SSL context has no OpenSSL context")
    if lib.SSL_CTX_get_verify_mode(pointer) != _REQUIRE or lib.SSL_CTX_get_options(pointer) != int(ctx.options):
        raise UnsupportedSsl("the SSL context does not match OpenSSL's view of it")
    return pointer


def require_any_client_certificate(ctx: ssl.SSLContext) -> None:
    """Make a server context demand a client certificate and accept it unverified."""
    lib = _libssl()
    ctx.verify_mode = ssl.CERT_REQUIRED  # SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
    pointer = _ssl_ctx_pointer(ctx, lib)
    callback = ctypes.cast(_ACCEPT_EVERY_CERTIFICATE, ctypes.c_void_p)
    lib.SSL_CTX_set_verify(pointer, _REQUIRE, callback)
    # Python keeps the context's callback whenever verify_mode is set again
