"""URLs as text: credentials stripped, redacted or normalized. The one place that does it.

Ground floor (stdlib only): every floor above uses it, so credentials never reach models,
messages, caches or files.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from .errors import IndexDefinitionError

_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)?//[^/?#]*@")
# scheme://<netloc with an "@"> -> scheme://host, anywhere in a text; greedy so "a@b@host" loses
# everything up to the last "@".
_USERINFO_IN_TEXT = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s]*@")


def strip_userinfo(url: str) -> str:
    """The URL without any ``user:password@`` (everything else kept)."""
    if "@" not in url:  # most URLs (every file row of every page): no work
        return url
    return _USERINFO.sub(r"\1//", url, count=1)


def without_fragment(url: str) -> str:
    """The URL without its ``#fragment`` (a hash of a file, never sent to a server)."""
    return url.split("#", 1)[0]


def bare_url(url: str) -> str:
    """The URL with no ``user:password@`` and no fragment: a key for caches and records."""
    return without_fragment(strip_userinfo(url))


def origin(url: str) -> tuple[str, str, int]:
    """(scheme, lower-case host, port) of an http(s) URL, the port defaulted by scheme."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


def strip_credentials(text: str) -> str:
    """``text`` with the userinfo (``user:pass@``) of every URL in it removed entirely."""
    return _USERINFO_IN_TEXT.sub(lambda m: m.group("scheme"), text)


def scrub(value: Any) -> Any:
    """``value`` (str, dict, list, scalars) with credentials stripped from every string, keys included."""
    if isinstance(value, str):
        return strip_credentials(value)
    if isinstance(value, dict):
        return {strip_credentials(k): scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def redact_url(url: str) -> str:
    """The URL with any user:password replaced by ``***``, for messages. Never raises.

    A password holding ``/``, ``#`` or ``?`` makes a URL parser end the host early and read the
    rest of the password as a path; so an ``@`` anywhere after ``scheme://`` counts as the end of
    credentials, and everything before the last one is hidden.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries (or may carry) ``user:password@``: an ``@`` anywhere after ``scheme://``."""
    return "@" in url.partition("://")[2]


def normalize_base_url(url: str) -> str:
    """A base URL ending in ``/``; anything that is no well-formed http(s)/file URL is an
    ``IndexDefinitionError`` whose message never shows a password."""
    url = url.strip()
    shown = redact_url(url)
    scheme, _, rest = url.partition("://")
    if scheme.lower() != "file" and "@" in re.split(r"[/?#]", rest, maxsplit=1)[-1] and re.search(r"[/?#]", rest):
        raise IndexDefinitionError(
            f"not an index URL: {shown!r}: an '@' after the host (a password with '/', '#' or '?' in it?)",
            hint="percent-encode those characters in a password (%2F, %23, %3F), or put the credentials in netrc",
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise IndexDefinitionError(
            f"not an index URL: {shown!r} ({_no_secret(str(exc), url)})", hint="use http(s)://host[:port]/path/ with a port from 1 to 65535"
        ) from None
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
        raise IndexDefinitionError(f"not an index URL: {shown!r}", hint="use http(s)://host/path/")
    if port == 0:
        raise IndexDefinitionError(f"not an index URL: {shown!r} (port 0)", hint="use a port from 1 to 65535")
    return url if url.endswith("/") else url + "/"


def _no_secret(text: str, url: str) -> str:
    """``text`` (a parser's message about ``url``) with nothing of the URL's credentials in it."""
    if not has_credentials(url):
        return text
    secret = url.partition("://")[2].rsplit("@", 1)[0]
    return "malformed" if any(part and part in text for part in re.split(r"[:/?#]", secret)) else text


__all__ = ["bare_url", "has_credentials", "normalize_base_url", "origin", "redact_url", "scrub", "strip_credentials", "strip_userinfo", "without_fragment"]
