"""Proxies from the environment (``http_proxy``, ``https_proxy``, ``all_proxy``, ``no_proxy`` in either case, lower case first), ``no_proxy`` read as curl reads it, and the ``Proxy-Authorization`` a proxy URL's credentials make."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ..urlpolicy import basic_authorization


# -- proxies from the environment --------------------------------------------------------------
def environment_proxies(environ: Mapping[str, str]) -> dict[str, str]:
    """``urllib.request.getproxies_environment``: ``<scheme>_proxy`` variables in any case, the
    lower-case one winning; ``HTTP_PROXY`` ignored in a CGI script (``REQUEST_METHOD`` set)."""
    proxies: dict[str, str] = {}
    for name, value in environ.items():
        if value and name.lower().endswith("_proxy"):
            proxies[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in environ:
        proxies.pop("http", None)
    for name, value in environ.items():
        if name.endswith("_proxy"):  # lower case only: these win
            if value:
                proxies[name[:-6].lower()] = value
            else:
                proxies.pop(name[:-6].lower(), None)
    return proxies


_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class _Bypass:
    """A ``no_proxy`` entry, read as curl reads it: a name matches itself and its subdomains (a
    leading ``.`` or ``*.`` changes nothing: ``.example.com`` matches ``example.com`` too); an
    address or a CIDR range (``127.0.0.0/8``, ``::1``) matches the addresses in it, and an address
    is never matched as a name (``.0.0.1`` does not match 127.0.0.1). Beyond curl: a ``:port``
    (as requests reads it) and a ``scheme://`` (as httpx did) narrow an entry."""

    scheme: str  # "" for any
    name: str  # lower case, no leading dot; "" for an address entry
    network: _Network | None
    port: int | None

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if not self._narrowed_to(scheme, port):
            return False
        address = _address(host)
        if self.network is not None:
            return address is not None and address.version == self.network.version and address in self.network
        return address is None and (host == self.name or host.endswith("." + self.name))

    def _narrowed_to(self, scheme: str, port: int) -> bool:
        """Whether the entry's ``scheme://`` and ``:port``, when it has them, are these."""
        return (not self.scheme or self.scheme == scheme) and (self.port is None or self.port == port)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _network(text: str) -> _Network | None:
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None


def _bypass(entry: str) -> _Bypass | None:
    scheme, _, rest = entry.rpartition("://")
    scheme = "" if scheme in ("", "all") else scheme.lower()
    rest = rest.strip().rstrip("/")
    port: int | None = None
    network = _network(rest)
    if network is None:
        hostport = rest
        if hostport.startswith("["):  # an IPv6 literal with a port, maybe a range
            inner, _, tail = hostport[1:].partition("]")
            hostport, port = inner, (int(tail[1:]) if tail.startswith(":") and tail[1:].isdigit() else None)
        elif hostport.count(":") == 1:
            hostport, _, p = hostport.partition(":")
            port = int(p) if p.isdigit() else None
        network = _network(hostport)
        rest = hostport
    if network is not None:
        return _Bypass(scheme, "", network, port)
    name = rest.lower().lstrip("*").lstrip(".").rstrip(".")
    return _Bypass(scheme, name, None, port) if name else None


class EnvironmentProxies:
    """Which proxy a URL goes through, from the environment's variables: ``no_proxy`` ``*`` turns
    every proxy off; other entries as ``_Bypass`` reads them (curl's reading)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        found = environment_proxies(environ)
        self.by_scheme = {s: (v if "://" in v else f"http://{v}") for s in ("http", "https", "all") if (v := found.get(s))}
        entries = [e.strip() for e in found.get("no", "").split(",")]
        if "*" in entries:
            self.by_scheme = {}
        self.bypass = [b for e in entries if e and (b := _bypass(e)) is not None]

    def __bool__(self) -> bool:
        return bool(self.by_scheme)

    def for_url(self, scheme: str, host: str, port: int) -> str | None:
        """The proxy URL for a request to ``scheme://host:port``, or None to go direct."""
        host = host.lower().rstrip(".")
        if not self.by_scheme or any(b.matches(scheme, host, port) for b in self.bypass):
            return None
        return self.by_scheme.get(scheme) or self.by_scheme.get("all")


# -- connections -------------------------------------------------------------------------------


def proxy_authorization(proxy: str) -> str | None:
    """Basic credentials for the ``user:password@`` of a proxy URL, or None."""
    parts = urlsplit(proxy)
    if parts.username is None:
        return None
    return basic_authorization(unquote(parts.username), unquote(parts.password or ""))
