"""HTTP/1.1 GETs over the standard library's ``http.client``: what ``transport.Transport`` sends
its requests with (it follows redirects, retries and applies the URL policy itself).

Chosen by measurement (``bench/httpclients.py``, figures in bench/README.md): on this workload
(many small GETs on kept-alive connections) a request costs ~120 us of CPU through
``http.client`` against ~230 us through urllib3 and ~400 us through httpx, and importing it ~28 ms
(with ``ssl``) against ~68 and ~63 ms. What httpx did for us is here, kept as it was:

- ``Client.send(url, headers)``: one GET, its answer streamed (``Response``: status, headers,
  ``iter_raw`` as sent, ``iter_bytes`` decoded, ``num_bytes_downloaded``);
- a pool of kept-alive connections per origin: at most ``max_connections`` requests in flight (a
  request waits for a slot up to its timeout); an idle connection is reused unless it is older than
  ``keepalive_expiry`` or the server closed it; a connection whose answer was not read to its end,
  or whose answer the caller refused (``Response.close(reuse=False)``), is closed, never reused; a
  reused connection that breaks before its answer's status line is tried once more on a fresh one
  (``send(fresh=True)`` never takes one from the pool);
- ``1xx`` interim answers (``100 Continue``, ``102 Processing``, ``103 Early Hints``) skipped, never
  taken for the answer, within the request's deadline (``deadline.py``: the headers phase earns no
  credit, so an endless stream of them ends);
- proxies from the environment with ``trust_env`` (``http_proxy``, ``https_proxy``, ``all_proxy``,
  ``no_proxy`` in either case, lower case first: ``EnvironmentProxies``, ``no_proxy`` read as curl
  reads it); plain http through the proxy, https through a ``CONNECT`` tunnel, credentials in the
  proxy URL sent as ``Proxy-Authorization``; the proxy is ``http://`` or ``https://`` (TLS to the
  proxy; an https origin then runs TLS inside it: ``_TunnelledTLS``), any other (``socks5``) is a
  ``ConfigurationError`` naming it; a proxy that cannot be reached, refuses the tunnel or fails its
  certificate check is named in the error;
- TLS with the trust store loaded at the first handshake (``tls.LazyTrustContext``), the host name
  checked; a certificate that does not verify, or a trust store setting that cannot be read, is a
  ``ConfigurationError``, never worth a retry; a new connection offers the TLS session (its
  ticket) of the last connection of its route (host, port, proxy) of this client, so a server
  that takes it skips the certificate; never offered to another host name, port or client;
- every connect, read and write kept to the deadline of the request it serves (``deadline.DeadlineSocket``);
- bodies decoded (``Content-Encoding`` gzip, deflate; others passed as sent) in steps of at most
  ``DECODE_STEP`` bytes, so a compressed bomb is stopped by the reader's cap, not by memory; a body
  of declared length read whole into one buffer of that size (``Response.read_sized``).

The parts: ``pool.py`` (``Client``), ``connection.py`` (a connection, its proxy tunnel and TLS),
``response.py`` (an answer and its decoding), ``proxies.py``, ``errors.py``.

Failures are ``TransportError`` (``ConnectError``, ``ConnectTimeout``, ``Timeout``, ``ReadError``,
``ConfigurationError``), ``DecodingError`` and ``InvalidURL``.
"""

from __future__ import annotations

from .connection import Prepared
from .errors import ConfigurationError, ConnectError, ConnectTimeout, DecodingError, HostNotFound, InvalidURL, ReadError, Timeout, TransportError
from .headers import parse_headers
from .pool import Client
from .proxies import EnvironmentProxies, environment_proxies, proxy_authorization
from .response import Headers, Response

__all__ = [
    "Client",
    "ConfigurationError",
    "ConnectError",
    "ConnectTimeout",
    "DecodingError",
    "EnvironmentProxies",
    "Headers",
    "HostNotFound",
    "InvalidURL",
    "Prepared",
    "ReadError",
    "Response",
    "Timeout",
    "TransportError",
    "environment_proxies",
    "parse_headers",
    "proxy_authorization",
]
