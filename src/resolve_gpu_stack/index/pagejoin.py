"""How an index page's links become URLs: ``join_redacted`` joins a link to the page's URL as
``urllib.parse.urljoin`` does, with the credentials stripped (``redact``), taking a shortcut for the
shapes most links have (measured in bench/README.md: it pays). Pure."""

from __future__ import annotations

import re
from urllib.parse import urljoin

from ..urls import strip_userinfo

redact = strip_userinfo  # credentials never reach models or messages
# (base, a link's directory) -> the redacted join, "" when it does not join: one page's joins
Joins = dict[tuple[str, str], str]

UNSAFE_CHARS = re.compile(r"[\s\x00-\x1f\x7f]")
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9._~%+!$&'()*,=@-]+")
_ABSOLUTE = re.compile(r"https?://[^/?#;\\\[\]\s\x00-\x1f\x7f]+(?:/[^?#;\\\s\x00-\x1f\x7f]*)?")
# paths urljoin leaves as they are past their start: segments of plain characters, none empty, "." or ".."
_SEGMENTS = r"(?!\.\.?(?:/|$))[A-Za-z0-9._~%+!$&'()*,=@:_-]+(?:/(?!\.\.?(?:/|$))[A-Za-z0-9._~%+!$&'()*,=@:_-]+)*"
_ROOTED = re.compile("/" + _SEGMENTS)  # /packages/ab/cd/<hash>/x.whl
_DOTTED = re.compile(r"((?:\.\.?/)+)(" + _SEGMENTS + ")")  # ../../packages/ab/cd/<hash>/x.whl


def join(base: str, href: str) -> str | None:
    try:
        return urljoin(base, href)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return None


def join_redacted(base: str, href: str, joins: Joins) -> str | None:
    """``redact(urljoin(base, href))``, or None when the href cannot be joined.

    ``urljoin`` is the most expensive step of reading a row, so four common shapes skip it: an
    absolute http(s) URL with nothing ``urljoin`` would rewrite comes back as it is (PyPI's
    files); a path of plain segments after ``/`` or after ``../`` and ``./`` steps is that start,
    joined once per page, plus the segments (a mirror's or a snapshot's
    ``../../packages/ab/cd/<hash>/x.whl``: a directory per file); and a link whose last path
    segment is plain (``torch-2.12.0%2Bcu130-...whl``) is its directory, joined once per page,
    plus that segment. Anything else takes the general path.
    """
    fast = _fast_join(base, href, joins)
    if fast is not None:
        return fast
    joined = join(base, href)
    return None if joined is None else redact(joined)


def _fast_join(base: str, href: str, joins: Joins) -> str | None:
    """``join_redacted``'s shortcuts (see there); None: take the general path."""
    pre, _, fragment = href.partition("#")
    base_scheme = "https" if base.startswith("https://") else "http" if base.startswith("http://") else None
    if base_scheme is None or (fragment and UNSAFE_CHARS.search(fragment)):
        return None
    tail = "#" + fragment if fragment else ""  # urljoin re-assembles the URL: an empty "#" goes
    if _ABSOLUTE.fullmatch(pre) and href.isascii():
        if not pre.startswith(base_scheme + ":"):
            return redact(href)  # another scheme: urljoin returns the href verbatim
        return redact(pre) + tail  # same scheme, with a host: urljoin only re-assembles it
    return _relative_join(base, pre, tail, joins)


def _relative_join(base: str, pre: str, tail: str, joins: Joins) -> str | None:
    """The shortcuts for a relative link ``pre`` (its fragment ``tail``): a rooted or dotted path
    of plain segments, or a plain last segment after a directory that joins on its own."""
    start, rest = ("/", pre[1:]) if pre.startswith("/") and _ROOTED.fullmatch(pre) else _dotted(pre)
    if start:
        head = _joined_head(base, start, joins)
        return head + rest + tail if head else None
    head, last = _joined_directory(base, pre, joins)
    return head + last + tail if head else None


def _dotted(pre: str) -> tuple[str, str]:
    """(its ``../`` and ``./`` steps, the plain segments after them) of a relative path of that
    shape; ("", "") for any other."""
    m = _DOTTED.fullmatch(pre) if pre.startswith(".") else None
    return (m.group(1), m.group(2)) if m else ("", "")


def _joined_directory(base: str, pre: str, joins: Joins) -> tuple[str, str]:
    """(the redacted join of ``pre``'s directory, its last segment) when that segment is plain and
    the directory joins on its own (once per page and directory: ``joins``); ("", "") otherwise."""
    slash = pre.rfind("/")
    last = pre[slash + 1 :]
    if last in (".", "..") or not _PLAIN_SEGMENT.fullmatch(last) or not _separable(pre, slash):
        return "", ""
    return _joined_head(base, pre[: slash + 1] or "./", joins), last


def _joined_head(base: str, start: str, joins: Joins) -> str:
    """The redacted join of ``base`` and ``start``, once per page (``joins``); "": it does not join."""
    head = joins.get((base, start))
    if head is None:
        joined = join(base, start)
        head = joins[(base, start)] = redact(joined) if joined is not None else ""
    return head


def _separable(pre: str, slash: int) -> bool:
    """Whether ``pre[:slash + 1]`` joins on its own: a relative reference, or a network-path
    reference (``//host/...``) whose last "/" comes after its host. No scheme, query, parameters
    or odd bytes."""
    if "?" in pre or ";" in pre or "\\" in pre or UNSAFE_CHARS.search(pre):
        return False
    if pre.startswith("//"):
        host_end = pre.find("/", 2)
        return host_end != -1 and slash >= host_end
    colon = pre.find(":")
    first_slash = pre.find("/")
    return colon == -1 or (first_slash != -1 and first_slash < colon)  # no scheme


__all__ = ["UNSAFE_CHARS", "Joins", "join", "join_redacted", "redact"]
