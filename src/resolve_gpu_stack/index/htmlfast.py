"""A fast reader for plain index HTML, with ``html.parser`` as the reference for anything else.

``html.parser`` costs ~13 µs a row on a PyTorch page of 1,260 rows (half of parsing it). Index
pages are nearly always plain: ``<a href="..." data-...="...">name</a><br/>`` rows between a few
simple tags. ``tokens`` reads such a page with one regular expression and returns what
``HTMLParser`` would call its handlers with, in order; it returns None, and the caller uses
``HTMLParser``, as soon as anything is not plainly spelled: a character reference (``&``), an
unquoted or single-quoted attribute value, a ``<`` that does not open one of the token shapes
below, a comment with a ``-`` in it, ``<?...>``, ``<![CDATA[``, or an element whose content
``html.parser`` reads raw (``script``, ``style``, ...; ``title`` only when its text has no
``<``). On what it accepts, ``HTMLParser`` gives the same calls (tag and attribute names in lower
case, values without quotes, a ``<x/>`` as a start tag and an end tag), except that it may cut
text into more pieces, which the collector joins (``tests/index/test_parse_fastpaths.py`` holds the
two to the same anchors, headings and base on random plain and not-so-plain pages).
"""

from __future__ import annotations

import re

_WS = "[ \t\n\r\f]"
_TOKEN = re.compile(
    r"(?P<text>[^<&]+)"
    rf"|<(?P<tag>[a-zA-Z][a-zA-Z0-9]*)(?P<attrs>(?:{_WS}+[a-zA-Z][a-zA-Z0-9_.:-]*(?:=\"[^\"&<>]*\")?)*){_WS}*(?P<close>/?)>"
    r"|</(?P<end>[a-zA-Z][a-zA-Z0-9]*)>"
    r"|<!--[^<>-]*-->"
    r"|<!(?i:doctype)[^>]*>"
)
_ATTR = re.compile(r"([a-zA-Z][a-zA-Z0-9_.:-]*)(?:(=)\"([^\"]*)\")?")
# Elements whose content html.parser reads raw in some Python version (the HTML spec's raw text
# and RCDATA elements): a page with one is read by html.parser, except a title of plain text.
_RAW = frozenset({"script", "style", "textarea", "xmp", "iframe", "noembed", "noframes", "noscript", "plaintext"})

# (kind, a, b): ("start", tag, attrs), ("end", tag, None), ("data", text, None)
Token = tuple[str, str, "list[tuple[str, str | None]] | None"]


def tokens(text: str) -> list[Token] | None:
    """The handler calls ``HTMLParser`` would make on ``text``, or None when it is not plain."""
    out: list[Token] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() != pos:
            return None  # something between two tokens that none of them reads
        pos = m.end()
        kind = m.lastgroup  # "text", "close" (a start tag: its last group), "end", or None
        if kind == "text":
            out.append(("data", m.group("text"), None))
        elif kind == "close":
            tag = m.group("tag").lower()
            if tag in _RAW or (tag == "title" and not _plain_title(text, pos)):
                return None
            out += _start(tag, m)
        elif kind == "end":
            out.append(("end", m.group("end").lower(), None))
        # comments and the doctype make no call the collector uses
    return out if pos == len(text) else None


def _start(tag: str, m: re.Match[str]) -> list[Token]:
    """A start tag's calls: its attributes as ``HTMLParser`` gives them (names lowercased; no value:
    None), and its end when it closes itself (``<br/>``)."""
    raw = m.group("attrs")
    start: Token = ("start", tag, [(name.lower(), value if eq else None) for name, eq, value in _ATTR.findall(raw)] if raw else [])
    return [start, ("end", tag, None)] if m.group("close") else [start]


def _plain_title(text: str, pos: int) -> bool:
    """Whether the title's content from ``pos`` has no markup: the next ``<`` closes it."""
    lt = text.find("<", pos)
    return lt >= 0 and text[lt : lt + 8].lower() == "</title>"


__all__ = ["Token", "tokens"]
