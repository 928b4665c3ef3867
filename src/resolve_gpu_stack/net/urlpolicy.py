"""What the HTTP edge may fetch and send: URL and redirect policy, credentials, page types.

Redirects never lead to a cloud metadata, link-local or private address unless the request began
on one (decided by the name and the literal address, never by resolving a name). Pure except for
reading a netrc file. ``transport.Transport`` applies these to every request and
every redirect hop; they live here so they can be tested (and reasoned about) without a server.
"""

from __future__ import annotations

import base64
import email.utils
import ipaddress
import json
import logging
import netrc
import re
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import CrawlError
from ..urls import has_credentials, origin, redact_url

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "application/vnd.pypi.simple.v1+html"})
JSON_TYPES = frozenset({"application/vnd.pypi.simple.v1+json", "application/json"})
# Types a static host may give an index page; the body decides.
SNIFFED_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream", "text/plain"})
CREDENTIALS_HINT = "the index wants credentials: put them in the index URL (https://USER:TOKEN@host/...) or in ~/.netrc"


# ``scheme://netloc`` of an http(s) URL as written (lower-case scheme): what ``urlsplit`` reads the
# scheme, host, port and userinfo from, and all a verdict on the URL's origin depends on
_ORIGIN_PREFIX = re.compile(r"https?://[^/?#]*")


def origin_prefix(url: str) -> str | None:
    """The ``http(s)://netloc`` an http(s) URL starts with, as written: two URLs with the same one
    have the same scheme, host, port and credentials (``urlsplit``). None for any other URL."""
    m = _ORIGIN_PREFIX.match(url)
    return m[0] if m is not None else None


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and ``localhost`` (plain http is fine there)."""
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url_allowed(url: str, allow_insecure_hosts: Iterable[str] = ()) -> None:
    """Refuse what we never fetch: non-HTTP schemes, and plain http to a non-loopback host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CrawlError(redact_url(url), f"cannot fetch a {parts.scheme or 'relative'}: URL over HTTP")
    if parts.scheme == "https" or is_loopback(parts.hostname):
        return
    host = parts.hostname.lower()
    allowed = {h.lower() for h in allow_insecure_hosts}
    if host in allowed or (parts.port and f"{host}:{parts.port}" in allowed):
        return
    raise CrawlError(redact_url(url), "plain http is refused (no TLS)", hint=f"use https, or pass --allow-insecure-host {host}")


# Cloud instance-metadata endpoints (AWS, GCP, Azure, ...): credentials live there.
METADATA_HOSTS = frozenset({"metadata.google.internal", "169.254.169.254", "fd00:ec2::254"})
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))
LINK_LOCAL_NETWORKS = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10"))


def _literal_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host names literally, legacy IPv4 forms included ("2852039166", "0xa9.254.169.254")."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        if not host or not all(c in "0123456789abcdefx." for c in host):
            return None
        try:
            ip = ipaddress.IPv4Address(socket.inet_aton(host))  # what the resolver makes of such a name
        except OSError:
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def internal_kind(host: str) -> str | None:
    """What makes ``host`` off-limits to a redirect (metadata, link-local, private), or None.

    Decided by the name and the literal address only; a host name is never resolved here.
    """
    name = host.lower().strip("[]").rstrip(".")
    if name in METADATA_HOSTS:
        return "a cloud metadata address"
    ip = _literal_ip(name)
    if ip is None:
        return None
    if str(ip) in METADATA_HOSTS:
        return "a cloud metadata address"
    if ip.is_unspecified:
        return "an unspecified address"
    if any(ip in net for net in LINK_LOCAL_NETWORKS):
        return "a link-local address"
    if any(ip in net for net in PRIVATE_NETWORKS):
        return "a private-network address"
    return None


def check_redirect(source: str, target: str, *, first: str | None = None) -> None:
    """A redirect may change host, but never leave HTTP(S), never drop https for http, and never
    lead to a metadata, link-local or private address unless the request began on one (``first``,
    the first URL of the chain: the user's own index on a private network)."""
    src, dst = urlsplit(source), urlsplit(target)
    first = first or source
    chain = f" (redirect chain from {redact_url(first)})" if first != source else ""
    if dst.scheme not in ("http", "https"):
        raise CrawlError(redact_url(source), f"redirected to a non-HTTP URL {redact_url(target)}{chain}")
    if src.scheme == "https" and dst.scheme != "https":
        raise CrawlError(redact_url(source), f"redirected from https to plain http ({redact_url(target)}); refused{chain}")
    kind = internal_kind(dst.hostname or "")
    if kind is not None and internal_kind(urlsplit(first).hostname or "") is None:
        raise CrawlError(
            redact_url(source),
            f"redirected to {redact_url(target)}, {kind}; refused{chain}",
            hint="only an index that is itself on such an address may redirect there",
        )


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); None if unusable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def page_content_type(header: str | None, body: bytes) -> str:
    """The content-type to hand the parser; ``ValueError`` when the body is no index page.

    HTML and JSON types pass as served. A generic type (octet-stream, text/plain, none) is
    decided by the body: markup is HTML, a PEP 691 object is JSON, anything else is refused.
    """
    header = (header or "").strip()
    mime = header.split(";", 1)[0].strip().lower()
    if mime in HTML_TYPES or mime in JSON_TYPES:
        return header
    sniffed = _sniffed(body) if mime in SNIFFED_TYPES else None
    if sniffed is not None:
        return sniffed
    raise ValueError(f"not an index page: content-type {header or '(none)'!r}, body is neither HTML nor JSON")


def _sniffed(body: bytes) -> str | None:
    """The content-type a body served as a generic type is: markup is HTML, a PEP 691 object is JSON."""
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(b"<") and any(t in head for t in (b"<!doctype html", b"<html", b"<a ", b"<body", b"<head")):
        return "text/html"
    if head.startswith(b"{"):
        try:
            data = json.loads(body)
        except ValueError:
            return None
        if isinstance(data, dict) and ("files" in data or "meta" in data):
            return "application/vnd.pypi.simple.v1+json"
    return None


def basic_authorization(user: str, password: str) -> str:
    """The ``Basic`` value of an ``Authorization`` (or ``Proxy-Authorization``) header."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


OriginCredentials = tuple[tuple[tuple[str, str, int], tuple[str, str]], ...]  # ((scheme, host, port), (user, password)), ...


class Credentials:
    """Basic-auth credentials per origin, from URLs seen and from a netrc file. Never printed.

    ``remember`` records the ``user:token@`` of a URL for its origin (scheme, host, port); a
    request gets an ``Authorization`` header only for its own origin, or from the netrc entry
    of its own host name, so a redirect to another host never carries them.
    """

    def __init__(self, netrc_path: Path | None) -> None:
        self._netrc_path = netrc_path
        self._netrc: netrc.netrc | None = None
        self._loaded = False
        self._by_origin: dict[tuple[str, str, int], tuple[str, str]] = {}
        # ``_lookup``'s answer by ``origin_prefix`` (every request asks; a page's files share an
        # origin): emptied, and its generation moved on, whenever ``_by_origin`` changes
        self._looked_up: dict[str, tuple[str, str] | None] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def remember(self, url: str) -> None:
        if not has_credentials(url):  # no "@" after "scheme://": no user to remember (every page and file URL)
            return
        parts = urlsplit(url)
        if parts.username is not None:
            with self._lock:
                self._by_origin[origin(url)] = (unquote(parts.username), unquote(parts.password or ""))
                self._forget_lookups()

    def remembered(self) -> OriginCredentials:
        """What ``remember`` recorded, by origin: for a second process's transport (``restore``)."""
        with self._lock:
            return tuple(self._by_origin.items())

    def restore(self, pairs: OriginCredentials) -> None:
        """Remember ``pairs`` (another ``Credentials``' ``remembered``) as if their URLs were seen here."""
        with self._lock:
            self._by_origin.update(pairs)
            self._forget_lookups()

    def _forget_lookups(self) -> None:
        """``_by_origin`` changed (the lock held): no look-up made before holds."""
        self._looked_up.clear()
        self._generation += 1

    def header_for(self, url: str) -> str | None:
        """The ``Authorization`` value for a request to ``url`` (its own origin only), or None."""
        pair = self._lookup(url)
        return None if pair is None else basic_authorization(*pair)

    def _lookup(self, url: str) -> tuple[str, str] | None:
        key = origin_prefix(url)
        if key is None:
            return self._look_up(url)
        with self._lock:
            if key in self._looked_up:
                return self._looked_up[key]
            generation = self._generation
        found = self._look_up(url)
        with self._lock:
            if generation == self._generation:  # nothing remembered meanwhile
                self._looked_up[key] = found
        return found

    def _look_up(self, url: str) -> tuple[str, str] | None:
        parts = urlsplit(url)
        if parts.username is not None:
            return unquote(parts.username), unquote(parts.password or "")
        with self._lock:
            found = self._by_origin.get(origin(url))
        if found:
            return found
        rc = self._load_netrc()
        entry = rc.authenticators(parts.hostname or "") if rc is not None else None
        if entry and entry[0] is not None:
            return entry[0], entry[2] or ""
        return None

    def _load_netrc(self) -> netrc.netrc | None:
        with self._lock:
            if not self._loaded:
                self._loaded = True
                path = self._netrc_path or Path.home() / ".netrc"
                if path.is_file():
                    try:
                        self._netrc = netrc.netrc(str(path))
                    except (netrc.NetrcParseError, OSError) as exc:
                        # The parser's message may quote a token (a password): never show it.
                        line = exc.lineno if isinstance(exc, netrc.NetrcParseError) else None
                        log.warning("cannot read netrc file %s%s; ignoring it", path, f" (line {line})" if line else "")
            return self._netrc


__all__ = [
    "CREDENTIALS_HINT",
    "Credentials",
    "OriginCredentials",
    "basic_authorization",
    "check_redirect",
    "check_url_allowed",
    "internal_kind",
    "is_loopback",
    "page_content_type",
    "parse_retry_after",
]
