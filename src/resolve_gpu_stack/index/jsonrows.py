"""A PEP 691 page decoded row by row: its rows are left undecoded (``msgspec.Raw``), every row's
filename is read in one more pass over the page (``row_filenames``), and the rows the target's
filter keeps are decoded then, at once (``decode_rows``; ``parse._json_rows``). Pure.

Imported for the first page of at least ``parse.FAST_MIN`` bytes only (then every later page of the
crawl is read so): importing ``msgspec`` costs about 28 ms, which a few small pages never win back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec


class _Page(msgspec.Struct):
    meta: Any = None
    name: Any = None
    files: list[msgspec.Raw] | None = None
    projects: Any = None
    project_status: Any = msgspec.field(default=None, name="project-status")  # PEP 792


class _Filename(msgspec.Struct, gc=False):
    filename: Any = None


class _Name(msgspec.Struct, gc=False):
    filename: str | None = None


class _Filenames(msgspec.Struct):
    files: list[_Name]


_PAGE = msgspec.json.Decoder(_Page)
_FILENAME = msgspec.json.Decoder(_Filename)
_FILENAMES = msgspec.json.Decoder(_Filenames)
_ROWS = msgspec.json.Decoder(list[Any])


def decode_page(text: str) -> tuple[object, object, list[msgspec.Raw] | None, object, object] | None:
    """``(meta, name, files, projects, project-status)`` of a page, its rows undecoded; None when ``msgspec``
    refuses it (not an object, ``files`` not a list, or JSON it is stricter about than the standard
    library, such as ``NaN``): the caller reads it whole."""
    try:
        page = _PAGE.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    return page.meta, page.name, page.files, page.projects, page.project_status


def row_filenames(text: str) -> list[str | None] | None:
    """Each row's ``filename`` (None where a row has none, or null), read in one pass over the
    page; None when a row is not an object or its filename not a string (``row_filename`` then
    reads each row)."""
    try:
        return [row.filename for row in _FILENAMES.decode(text).files]
    except (msgspec.DecodeError, RecursionError):
        return None


def row_filename(row: msgspec.Raw) -> object:
    """A row's ``filename`` value (None when the row is not an object or has none)."""
    try:
        return _FILENAME.decode(row).filename
    except msgspec.ValidationError:
        return None


def decode_rows(rows: list[msgspec.Raw], positions: Sequence[int]) -> list[tuple[int, object]] | None:
    """The rows at ``positions``, numbered and decoded (at once, as one array); None when one does
    not decode on its own: a number beyond msgspec's range (``1e400``, which ``json`` reads as
    ``inf``) is not checked while a row is left raw."""
    try:
        decoded = _ROWS.decode(b"[" + b",".join(rows[i] for i in positions) + b"]")
    except (msgspec.DecodeError, RecursionError):
        return None
    return list(zip(positions, decoded, strict=True))
