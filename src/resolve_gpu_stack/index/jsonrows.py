"""A large PEP 691 page decoded row by row: its rows are left undecoded (``msgspec.Raw``) and a
row is decoded only once its filename says its target may use it (``parse._json_rows``). Pure.

Imported for the first page of at least ``parse.FAST_MIN`` bytes only: importing ``msgspec`` costs
about 28 ms, which a few small pages never win back.
"""

from __future__ import annotations

from typing import Any

import msgspec


class _Page(msgspec.Struct):
    meta: Any = None
    name: Any = None
    files: list[msgspec.Raw] | None = None
    projects: Any = None
    project_status: Any = msgspec.field(default=None, name="project-status")  # PEP 792


class _Filename(msgspec.Struct):
    filename: Any = None


_PAGE = msgspec.json.Decoder(_Page)
_FILENAME = msgspec.json.Decoder(_Filename)
_ANY = msgspec.json.Decoder()


def decode_page(text: str) -> tuple[object, object, list[msgspec.Raw] | None, object, object] | None:
    """``(meta, name, files, projects, project-status)`` of a page, its rows undecoded; None when ``msgspec``
    refuses it (not an object, ``files`` not a list, or JSON it is stricter about than the standard
    library, such as ``NaN``): the caller reads it whole."""
    try:
        page = _PAGE.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    return page.meta, page.name, page.files, page.projects, page.project_status


def row_filename(row: msgspec.Raw) -> object:
    """A row's ``filename`` value (None when the row is not an object or has none)."""
    try:
        return _FILENAME.decode(row).filename
    except msgspec.ValidationError:
        return None


def decode_row(row: msgspec.Raw) -> object:
    return _ANY.decode(row)
