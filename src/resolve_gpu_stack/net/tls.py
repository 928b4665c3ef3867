"""A verifying TLS context that loads its trust store at the first handshake, not when made.

Loading certifi's ~150 certificates costs ~20-40 ms of CPU: a run whose indexes are all plain
``http://`` (a loopback mirror) or that never reaches the network would pay it for nothing.
``LazyTrustContext`` is the verifying context httpx made (``httpx.create_ssl_context``, itself
``ssl.create_default_context`` for a server: TLS client, hostname checked, certificate required,
``SSLKEYLOGFILE`` honoured) whose certificates are loaded once, under a lock, by the first
``wrap_socket`` / ``wrap_bio``. Where they come from is the rule httpx had: ``SSL_CERT_FILE``, else
``SSL_CERT_DIR`` (both only with ``trust_env``), else certifi's bundle.
"""

from __future__ import annotations

import os
import ssl
import sys
import threading
from typing import Any


class LazyTrustContext(ssl.SSLContext):
    """A verifying client context (``ssl.create_default_context``), its certificates loaded at first use."""

    def __new__(cls, *, trust_env: bool = True) -> LazyTrustContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, *, trust_env: bool = True) -> None:
        super().__init__()
        self.trust_env = trust_env
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
            cert_file = os.environ.get("SSL_CERT_FILE") if self.trust_env else None
            cert_dir = os.environ.get("SSL_CERT_DIR") if self.trust_env else None
            if cert_file:
                self.load_verify_locations(cafile=cert_file)
            elif cert_dir:
                self.load_verify_locations(capath=cert_dir)
            else:
                import certifi

                self.load_verify_locations(cafile=certifi.where())
            self.loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self.load_trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self.load_trust()
        return super().wrap_bio(*args, **kwargs)


__all__ = ["LazyTrustContext"]
