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
    """The URL with any user:password replaced by ``***``, for messages."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]).geturl()


def normalize_base_url(url: str) -> str:
    """A base URL ending in ``/``; anything that is no http(s)/file URL is an ``IndexDefinitionError``."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "file") or (parts.scheme != "file" and not parts.hostname):
        raise IndexDefinitionError(f"not an index URL: {redact_url(url)!r}", hint="use http(s)://host/path/")
    return url if url.endswith("/") else url + "/"


__all__ = ["bare_url", "normalize_base_url", "origin", "redact_url", "scrub", "strip_credentials", "strip_userinfo", "without_fragment"]
