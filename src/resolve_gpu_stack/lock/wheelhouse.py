"""A wheelhouse's static files, rendered (pure): simple-repository pages, the manifest, and a
pylock rewritten to point at the wheelhouse.

Layout (``env.wheelhouse.export_wheelhouse`` writes it)::

    DIR/files/<wheel>                 the wheels, verified
    DIR/files/<wheel>.metadata        each wheel's METADATA (PEP 658 / 714)
    DIR/simple/index.html             PEP 503 project list     DIR/simple/index.json   PEP 691
    DIR/simple/<name>/index.html      PEP 503 project page     DIR/simple/<name>/index.json
    DIR/pylock.<name>.toml            each lock, its wheels under --base-url or as relative paths
    DIR/wheelhouse.json               the manifest

Every link is relative (``../../files/<wheel>``), so the same tree works behind any web server,
under any prefix, and on a shared filesystem. Pages list ``#sha256=`` on every link,
``data-requires-python`` (HTML-escaped) and ``data-core-metadata`` / ``data-dist-info-metadata``
with the sha256 of the ``.metadata`` file; the JSON form carries the same facts (API 1.1).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import tomli_w
from packaging.utils import NormalizedName
from packaging.version import Version

from ..data.toml import parse_toml
from ..errors import LockFileError
from .locked import LockedEntry, LockedWheel

MANIFEST_SCHEMA = "resolve-gpu-stack/wheelhouse/v1"
FILES = "files"
SIMPLE = "simple"
MANIFEST = "wheelhouse.json"


def house_file(
    *,
    filename: str,
    name: NormalizedName,
    version: Version | None,
    sha256: str,
    size: int,
    metadata_sha256: str,
    requires_python: str | None = None,
    upload_time: str | None = None,
    locks: tuple[str, ...] = (),
) -> LockedEntry:
    """One wheel of a wheelhouse, as the one model of a locked package: its package, the one wheel
    (at ``files/<wheel>``, its ``.metadata`` beside it) and the file names of the locks that install it."""
    wheel = LockedWheel(filename=filename, url=f"{FILES}/{filename}", sha256=sha256, size=size, upload_time=upload_time, metadata_sha256=metadata_sha256)
    return LockedEntry(name=name, version=version, requires_python=requires_python, wheels=(wheel,), locks=locks)


def _file_json(f: LockedEntry) -> dict[str, Any]:
    """A wheelhouse file as the manifest lists it."""
    out: dict[str, Any] = {
        "filename": f.wheel.filename,
        "name": f.name,
        "version": str(f.version),
        "sha256": f.wheel.sha256,
        "size": f.wheel.size,
        "metadata-sha256": f.wheel.metadata_sha256,
    }
    if f.requires_python:
        out["requires-python"] = f.requires_python
    if f.wheel.upload_time:
        out["upload-time"] = f.wheel.upload_time
    out["locks"] = list(f.locks)
    return out


def _file_from_json(data: Mapping[str, Any]) -> LockedEntry:
    return house_file(
        filename=str(data["filename"]),
        name=NormalizedName(str(data["name"])),
        version=Version(str(data["version"])),
        sha256=str(data["sha256"]),
        size=int(data["size"]),
        metadata_sha256=str(data["metadata-sha256"]),
        requires_python=data.get("requires-python"),
        upload_time=data.get("upload-time"),
        locks=tuple(str(x) for x in data.get("locks", ())),
    )


def by_filename(files: Iterable[LockedEntry]) -> list[LockedEntry]:
    """Wheelhouse files in the order of their file names."""
    return sorted(files, key=lambda f: f.wheel.filename)


def file_href(filename: str) -> str:
    """The link from ``simple/<name>/`` to a wheel (``+`` of local versions as ``%2B``)."""
    return f"../../{FILES}/{quote(filename)}"


def project_html(name: str, files: Sequence[LockedEntry]) -> str:
    rows = []
    for f in by_filename(files):
        wheel = f.wheel
        attrs = [f'href="{html.escape(file_href(wheel.filename))}#sha256={wheel.sha256}"']
        if f.requires_python:
            attrs.append(f'data-requires-python="{html.escape(f.requires_python)}"')
        attrs.append(f'data-dist-info-metadata="sha256={wheel.metadata_sha256}"')
        attrs.append(f'data-core-metadata="sha256={wheel.metadata_sha256}"')
        rows.append(f"    <a {' '.join(attrs)}>{html.escape(wheel.filename)}</a><br/>")
    title = html.escape(f"Links for {name}")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html>",
            "  <head>",
            '    <meta name="pypi:repository-version" content="1.1">',
            f"    <title>{title}</title>",
            "  </head>",
            "  <body>",
            f"    <h1>{title}</h1>",
            *rows,
            "  </body>",
            "</html>",
            "",
        ]
    )


def project_json(name: str, files: Sequence[LockedEntry]) -> str:
    entries = []
    for f in by_filename(files):
        wheel = f.wheel
        entry: dict[str, Any] = {"filename": wheel.filename, "url": file_href(wheel.filename), "hashes": {"sha256": wheel.sha256}}
        if f.requires_python:
            entry["requires-python"] = f.requires_python
        entry["core-metadata"] = {"sha256": wheel.metadata_sha256}
        entry["dist-info-metadata"] = {"sha256": wheel.metadata_sha256}
        entry["size"] = wheel.size
        if wheel.upload_time:
            entry["upload-time"] = wheel.upload_time
        entry["yanked"] = False
        entries.append(entry)
    versions = sorted({str(f.version) for f in files})
    doc = {"meta": {"api-version": "1.1"}, "name": name, "versions": versions, "files": entries}
    return json.dumps(doc, indent=1, sort_keys=False) + "\n"


def root_html(names: Iterable[str]) -> str:
    rows = [f'    <a href="{html.escape(quote(n))}/">{html.escape(n)}</a><br/>' for n in sorted(names)]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html>",
            "  <head>",
            '    <meta name="pypi:repository-version" content="1.1">',
            "    <title>Simple index</title>",
            "  </head>",
            "  <body>",
            *rows,
            "  </body>",
            "</html>",
            "",
        ]
    )


def root_json(names: Iterable[str]) -> str:
    doc = {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in sorted(names)]}
    return json.dumps(doc, indent=1) + "\n"


def manifest_json(files: Sequence[LockedEntry], locks: Sequence[str]) -> str:
    ordered = by_filename(files)
    doc = {
        "schema": MANIFEST_SCHEMA,
        "locks": sorted(locks),
        "files": [_file_json(f) for f in ordered],
        "total-bytes": total_bytes(ordered),
    }
    return json.dumps(doc, indent=1) + "\n"


def total_bytes(files: Iterable[LockedEntry]) -> int:
    return sum(f.wheel.size or 0 for f in files)


def read_manifest(text: str) -> dict[str, LockedEntry]:
    """The files of a previous manifest by file name ({} when it is not one of ours)."""
    try:
        doc = json.loads(text)
        if doc.get("schema") != MANIFEST_SCHEMA:
            return {}
        files = [_file_from_json(f) for f in doc.get("files", [])]
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}
    return {f.wheel.filename: f for f in files}


_WHEEL_HEADER = "[[packages.wheels]]"
_URL_LINE = re.compile(r"^(?:url|path)\s*=\s*(?P<value>\".*\")\s*$")


def rewrite_lock_text(text: str, where: Mapping[str, str], *, as_path: bool, source: str) -> str:
    """The pylock ``text`` with the ``url`` (or ``path``) of every ``[[packages.wheels]]`` replaced by
    ``where[<old value>]``: a ``url = ...`` line, or a ``path = ...`` line when ``as_path``.

    Everything else (hashes, sizes, the tool table, the order of lines) stays byte for byte.
    """
    out = []
    section = None
    seen = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        m = _URL_LINE.match(stripped) if section == _WHEEL_HEADER else None
        if m is None:
            out.append(line)
            continue
        old = parse_toml(f"v = {m.group('value')}", source, error=LockFileError)["v"]
        if old not in where:
            raise LockFileError(f"{source}: no wheelhouse file for {old}")
        key = "path" if as_path else "url"
        out.append(tomli_w.dumps({key: where[old]}))
        seen += 1
    expected = sum(len(p.get("wheels", [])) for p in parse_toml(text, source, error=LockFileError).get("packages", []))
    if seen != expected:
        raise LockFileError(f"{source}: rewrote {seen} wheel URLs of {expected}; the lock is not laid out as resolve-gpu-stack writes it")
    return "".join(out)


__all__ = [
    "FILES",
    "MANIFEST",
    "MANIFEST_SCHEMA",
    "SIMPLE",
    "by_filename",
    "file_href",
    "house_file",
    "manifest_json",
    "project_html",
    "project_json",
    "read_manifest",
    "rewrite_lock_text",
    "root_html",
    "root_json",
    "total_bytes",
]
