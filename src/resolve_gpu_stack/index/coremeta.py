"""A core-metadata file's header block, read as ``packaging.metadata.parse_email`` reads it, for
the fields the resolver uses (``core_metadata_fields``). Pure."""

from __future__ import annotations

import re

# The header fields the resolver reads: those used once (a repeated one is unusable) and the lists.
_SINGLE_FIELDS = frozenset({"metadata-version", "name", "version", "requires-python"})
_LIST_FIELDS = frozenset({"requires-dist", "provides-extra", "dynamic"})
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_HEADER_LINE = re.compile(r"From |[\x21-\x39\x3b-\x7e]*:|[\t ]")  # the email parser's headerRE


def core_metadata_fields(raw: bytes) -> tuple[dict[str, str | list[str]], frozenset[str]]:
    """The header block of a core-metadata file, read as ``packaging.metadata.parse_email`` reads
    it (the standard library's email parser, ``compat32``) for the fields the resolver uses:
    (field -> its value, or its values for Requires-Dist and Provides-Extra; the fields that are
    repeated or not valid UTF-8). Names are lower case. Without the email package: it is ~10 ms
    of imports and ~0.2 ms a file, and this reads a header block as that parser does -- lines
    split at CR, LF or CRLF, the block ending at the first line that is no header (a blank line
    or not), a folded line joined to its header with its line break, ``From `` lines and lines
    starting with ``:`` skipped, a value not valid UTF-8 unusable
    (``tests/index/test_parse_properties.py`` holds the two to the same answers)."""
    values, bad = _field_values(_headers(raw.decode("ascii", "surrogateescape")))
    fields: dict[str, str | list[str]] = {}
    for name, found in values.items():
        if name in bad or (name in _SINGLE_FIELDS and len(found) != 1):
            continue
        fields[name] = found[0] if name in _SINGLE_FIELDS else found
    return fields, frozenset(name for name in values if name not in fields)


def _headers(text: str) -> list[tuple[str, list[str]]]:
    """(name in lower case, its value's lines) of each header of the block, in order."""
    headers: list[tuple[str, list[str]]] = []
    current: list[str] | None = None  # the header a folded line continues
    for line in _LINES.findall(text):
        if not _HEADER_LINE.match(line):
            break  # a blank line, or a line no header parser would take: the body begins
        if line[0] in " \t":
            if current is not None:
                current.append(line)
            continue
        current = None
        colon = line.find(":")
        if colon <= 0 or line.startswith("From "):
            continue  # a Unix "From " line (first or misplaced), or no header name
        current = [line[colon + 1 :].lstrip(" \t")]
        headers.append((line[:colon].lower(), current))
    return headers


def _field_values(headers: list[tuple[str, list[str]]]) -> tuple[dict[str, list[str]], set[str]]:
    """(each field the resolver reads -> its values, the fields with a value not valid UTF-8)."""
    values: dict[str, list[str]] = {}
    bad: set[str] = set()
    for name, parts in headers:
        if name not in _SINGLE_FIELDS and name not in _LIST_FIELDS:
            continue
        value = "".join(parts).rstrip("\r\n")
        if not value.isascii():  # bytes above 127: usable only as UTF-8
            try:
                value = value.encode("ascii", "surrogateescape").decode("utf-8")
            except UnicodeError:
                bad.add(name)
        values.setdefault(name, []).append(value)
    return values, bad


__all__ = ["core_metadata_fields"]
