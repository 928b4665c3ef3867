"""The transport's failures: ``TransportError`` (``ConnectError``, ``HostNotFound``, ``ConnectTimeout``, ``Timeout``, ``ReadError``, ``ConfigurationError``), ``DecodingError`` and ``InvalidURL``."""

from __future__ import annotations


class TransportError(Exception):
    """A request failed on the wire: connect, TLS, a reset, a timeout, a broken answer."""


class ConnectError(TransportError):
    """No connection (refused, no such host, TLS refused, a proxy that said no)."""


class HostNotFound(ConnectError):
    """The host name does not resolve (DNS): no retry helps within a run."""


class Timeout(TransportError):
    """A read or write took longer than the timeout, or the request's deadline passed."""


class ConnectTimeout(Timeout, ConnectError):
    """Connecting (TCP, TLS, a proxy tunnel) took longer than the timeout."""


class ConfigurationError(ConnectError):
    """A setting is at fault (the proxy URL, the trust store, a certificate that does not verify):
    another attempt would fail the same way. ``hint`` says what to change."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class ReadError(TransportError):
    """The connection broke or the answer was not HTTP (a reset, a truncated chunk, a bad status line)."""


class DecodingError(Exception):
    """A body whose ``Content-Encoding`` could not be decoded."""


class InvalidURL(ValueError):
    """A URL no request can be made for (scheme, host, port)."""
