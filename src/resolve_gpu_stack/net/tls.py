"""A verifying TLS context that loads its trust store at the first handshake, not when made.

Loading certifi's ~150 certificates costs ~20-40 ms of CPU: a run whose indexes are all plain
``http://`` (a loopback mirror) or that never reaches the network would pay it for nothing.
``LazyTrustContext`` is the verifying context httpx made (``httpx.create_ssl_context``, itself
``ssl.create_default_context`` for a server: TLS client, hostname checked, certificate required,
``SSLKEYLOGFILE`` honoured) whose certificates are loaded once, under a lock, by the first
``wrap_socket`` / ``wrap_bio``. Where they come from is the rule httpx had: ``SSL_CERT_FILE``, else
``SSL_CERT_DIR`` (both only with ``trust_env``), else certifi's bundle. A variable that names a file
or folder that cannot be read is a ``TrustSettingError`` naming the variable (never a retry).

``trust_context(system=True)`` (the ``--system-certs`` flag) is the system
trust store instead, as pip's ``truststore`` feature and uv's ``--native-tls`` are: on macOS and
Windows the ``truststore`` package's context (the OS verifier); on Linux, where the platform's
verifier is OpenSSL with the distribution's CA bundle, that bundle loaded into a context of our own
(OpenSSL's default paths, else the first of the distributions' bundle files that exists, as
truststore looks them up): truststore's context holds one lock through every handshake, so the
connections of a burst would shake hands one at a time (seen: a pool's 2 s connect timeouts).
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any

import certifi

SYSTEM_CERTS_HINT = "--system-certs uses the system trust store"


class TrustSettingError(ValueError):
    """A trust store setting (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) names what cannot be loaded."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def trust_hint(context: ssl.SSLContext) -> str:
    """What to do about a certificate that does not verify, by where ``context`` trusts from."""
    if isinstance(context, LazyTrustContext) and context.trust_env and (name := context.setting()) is not None:
        return f"the trust store is {name}={os.environ[name]}; add the server's CA there, or unset it ({SYSTEM_CERTS_HINT})"
    if isinstance(context, LazyTrustContext) and not context.system:
        return f"the trust store is certifi's bundle: point SSL_CERT_FILE at a bundle with the server's CA, or {SYSTEM_CERTS_HINT}"
    return "the trust store is the system's: add the server's CA to it, or point SSL_CERT_FILE at a bundle that has it"


def trust_context(*, trust_env: bool = True, system: bool = False) -> ssl.SSLContext:
    """The verifying context for https: certifi's (or ``SSL_CERT_FILE``/``SSL_CERT_DIR``'s) loaded
    at the first handshake, or with ``system`` the system trust store."""
    if system:
        if sys.platform.startswith("linux"):
            return LazyTrustContext(trust_env=trust_env, system=True)
        try:
            import truststore  # platform: the OS verifier of macOS and Windows
        except ImportError:
            return LazyTrustContext(trust_env=trust_env, system=True)
        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return LazyTrustContext(trust_env=trust_env)


# Where Linux distributions keep their CA bundle, when OpenSSL's own default paths hold none (a
# Python built elsewhere): Alpine/Arch/Fedora/BSD, Fedora 44+/RHEL 11+, older Fedora/RHEL/CentOS,
# Debian/Ubuntu, SUSE (the list truststore and certifi-system-store look through).
SYSTEM_CA_FILES = (
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/pki/tls/cert.pem",
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/ssl/ca-bundle.pem",
)


def _load_system_store(context: ssl.SSLContext) -> None:
    """OpenSSL's default verify paths when they hold certificates, else the first distribution
    bundle of ``SYSTEM_CA_FILES`` that exists."""
    defaults = ssl.get_default_verify_paths()
    if defaults.cafile or (defaults.capath and os.path.isdir(defaults.capath) and any(n.endswith(".0") for n in os.listdir(defaults.capath))):
        context.set_default_verify_paths()
        return
    for cafile in SYSTEM_CA_FILES:
        if os.path.isfile(cafile):
            context.load_verify_locations(cafile=cafile)
            return
    context.set_default_verify_paths()


class LazyTrustContext(ssl.SSLContext):
    """A verifying client context (``ssl.create_default_context``), its certificates loaded at first use."""

    def __new__(cls, *, trust_env: bool = True, system: bool = False) -> LazyTrustContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, *, trust_env: bool = True, system: bool = False) -> None:
        super().__init__()
        self.trust_env = trust_env
        self.system = system
        self.loaded = False
        self._load_lock = threading.Lock()
        # As ssl.create_default_context(Purpose.SERVER_AUTH): PROTOCOL_TLS_CLIENT already
        # requires a certificate and checks the host name; state both, as it does.
        self.verify_mode = ssl.CERT_REQUIRED
        self.check_hostname = True
        if sys.version_info >= (3, 13):  # create_default_context's stricter chain checks
            self.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:
            self.keylog_filename = keylog

    def load_trust(self) -> None:
        """Load the certificates (once; later calls return at once)."""
        if self.loaded:
            return
        with self._load_lock:
            if self.loaded:
                return
            name = self.setting() if self.trust_env else None
            try:
                if name == "SSL_CERT_FILE":
                    self.load_verify_locations(cafile=os.environ[name])
                elif name == "SSL_CERT_DIR":
                    if not os.path.isdir(os.environ[name]):
                        raise FileNotFoundError(2, "No such folder")
                    self.load_verify_locations(capath=os.environ[name])
                elif self.system:
                    _load_system_store(self)
                else:
                    self.load_verify_locations(cafile=certifi.where())
            except (OSError, ssl.SSLError) as exc:
                if name is None:
                    raise
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise TrustSettingError(
                    f"{name}={os.environ[name]} cannot be loaded as a trust store ({why})",
                    hint=f"point {name} at a readable PEM {'bundle' if name == 'SSL_CERT_FILE' else 'folder (c_rehash layout)'}, or unset it",
                ) from None
            self.loaded = True

    def setting(self) -> str | None:
        """The variable the certificates come from (``SSL_CERT_FILE``, else ``SSL_CERT_DIR``), or None."""
        for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
            if os.environ.get(name):
                return name
        return None

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self.load_trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self.load_trust()
        return super().wrap_bio(*args, **kwargs)


__all__ = ["SYSTEM_CERTS_HINT", "LazyTrustContext", "TrustSettingError", "trust_context", "trust_hint"]
