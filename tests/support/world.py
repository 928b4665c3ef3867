"""Build small but real index worlds on disk for a loopback server: tiny real wheels, and index
pages in the real dialects (PyTorch's template with PEP 658 sidecars, FlashInfer's pages with
absolute release URLs, PyPI's PEP 691 JSON and PEP 503 HTML).

    world = World(tmp_path / "www")
    world.pytorch("torch", "2.12.0.dev20260307+cu130", tag="cp312-cp312-manylinux_2_28_x86_64", requires=[...])
    world.flashinfer("flashinfer-jit-cache", "0.6.5+cu130", tag="cp39-abi3-manylinux_2_28_x86_64", page="cu130/flashinfer-jit-cache")
    world.pypi("numpy", "2.2.0")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from packaging.utils import canonicalize_name

from support.wheels import BuiltWheel, build_wheel


@dataclass
class _Entry:
    wheel: BuiltWheel
    rel_path: str  # path of the wheel below the server root
    sidecar: bool = True
    yanked: str | None = None
    requires_python: str | None = None
    upload_time: str | None = None
    absolute: bool = False  # href is absolute (FlashInfer's release assets)


@dataclass
class World:
    root: Path
    pages: dict[str, list[_Entry]] = field(default_factory=dict)  # page path -> entries
    dialect: dict[str, str] = field(default_factory=dict)  # page path -> pytorch | flashinfer | pypi

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    # -- adding wheels -------------------------------------------------------------------------
    def pytorch(
        self,
        name: str,
        version: str,
        *,
        tag: str,
        requires: list[str] | tuple[str, ...] = (),
        channel: str = "nightly",
        variant: str = "cu130",
        at_root: bool = False,
        sidecar: bool = True,
        requires_python: str | None = None,
        padding: int = 0,
        files: dict[str, bytes] | None = None,
    ) -> BuiltWheel:
        prefix = f"whl/{channel}/" if channel != "stable" else "whl/"
        wheel_dir = prefix if at_root else f"{prefix}{variant}/"
        w = build_wheel(self.root / wheel_dir, name, version, tag, requires, requires_python=requires_python, padding=padding, files=files)
        if sidecar:
            (self.root / wheel_dir / (w.filename + ".metadata")).write_bytes(w.metadata)
        page = f"{prefix}{variant}/{canonicalize_name(name)}/"
        self._add(page, "pytorch", _Entry(w, wheel_dir + w.filename, sidecar=sidecar))
        return w

    def flashinfer(
        self, name: str, version: str, *, page: str, tag: str = "py3-none-any", requires: list[str] | tuple[str, ...] = (), padding: int = 0
    ) -> BuiltWheel:
        public = version.split("+", 1)[0].split(".dev", 1)[0]
        wheel_dir = f"releases/download/v{public}/"
        w = build_wheel(self.root / wheel_dir, name, version, tag, requires, padding=padding)
        self._add(f"fi/{page.strip('/')}/", "flashinfer", _Entry(w, wheel_dir + w.filename, absolute=True))
        return w

    def pypi(
        self,
        name: str,
        version: str,
        *,
        tag: str = "py3-none-any",
        requires: list[str] | tuple[str, ...] = (),
        requires_python: str | None = None,
        yanked: str | None = None,
        upload_time: str = "2026-01-01T00:00:00Z",
    ) -> BuiltWheel:
        w = build_wheel(self.root / "files", name, version, tag, requires, requires_python=requires_python)
        self._add(
            f"simple/{canonicalize_name(name)}/",
            "pypi",
            _Entry(w, "files/" + w.filename, sidecar=False, yanked=yanked, requires_python=requires_python, upload_time=upload_time),
        )
        return w

    def empty_page(self, page: str, dialect: str) -> None:
        self.pages.setdefault(page, [])
        self.dialect[page] = dialect

    def _add(self, page: str, dialect: str, entry: _Entry) -> None:
        self.pages.setdefault(page, []).append(entry)
        self.dialect[page] = dialect

    # -- writing -------------------------------------------------------------------------------
    def index_urls(self, base: str) -> dict[str, str]:
        return index_urls(base)

    def write(self, base: str) -> None:
        for page, entries in self.pages.items():
            out = self.root / page
            out.mkdir(parents=True, exist_ok=True)
            name = page.rstrip("/").rsplit("/", 1)[-1]
            kind = self.dialect[page]
            if kind == "pytorch":
                (out / "index.html").write_text(_pytorch_page(name, entries))
            elif kind == "flashinfer":
                (out / "index.html").write_text(_flashinfer_page(name, entries, base))
            else:
                (out / "index.html").write_text(_pypi_html(name, entries))
                (out / "index.json").write_text(_pypi_json(name, entries))


def _pytorch_page(name: str, entries: list[_Entry]) -> str:
    rows = []
    for e in sorted(entries, key=lambda e: e.rel_path):
        href = "/" + quote(e.rel_path, safe="/")
        attrs = ""
        if e.sidecar:
            digest = hashlib.sha256(e.wheel.metadata).hexdigest()
            attrs = f' data-dist-info-metadata="sha256={digest}" data-core-metadata="sha256={digest}"'
        rows.append(f'    <a href="{href}"{attrs}>{e.wheel.filename}</a><br/>')
    return "\n".join(["<!DOCTYPE html>", "<html>", "  <body>", f"    <h1>Links for {name}</h1>", *rows, "  </body>", "</html>", "<!--TIMESTAMP 1772870400-->"])


def _flashinfer_page(name: str, entries: list[_Entry], base: str) -> str:
    rows = sorted(f'<a href="{base}{e.rel_path}#sha256={e.wheel.sha256}">{e.wheel.filename}</a><br>\n' for e in entries)
    return f"<!DOCTYPE html>\n<html>\n<head><title>Links for {name}</title></head>\n<body>\n<h1>Links for {name}</h1>\n" + "".join(rows) + "</body>\n</html>\n"


def _pypi_html(name: str, entries: list[_Entry]) -> str:
    rows = []
    for e in entries:
        attrs = ""
        if e.requires_python:
            attrs += ' data-requires-python="' + e.requires_python.replace("<", "&lt;").replace(">", "&gt;") + '"'
        if e.yanked is not None:
            attrs += f' data-yanked="{e.yanked}"'
        if e.sidecar:  # PEP 658/714: the METADATA file is served beside the wheel
            attrs += f' data-core-metadata="sha256={hashlib.sha256(e.wheel.metadata).hexdigest()}"'
        rows.append(f'    <a href="../../{e.rel_path}#sha256={e.wheel.sha256}"{attrs}>{e.wheel.filename}</a><br />')
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
        f"    <title>Links for {name}</title>\n  </head>\n  <body>\n    <h1>Links for {name}</h1>\n" + "\n".join(rows) + "\n  </body>\n</html>\n"
    )


def _pypi_json(name: str, entries: list[_Entry]) -> str:
    files = [
        {
            "filename": e.wheel.filename,
            "url": f"../../{e.rel_path}",
            "hashes": {"sha256": e.wheel.sha256},
            "requires-python": e.requires_python,
            "size": e.wheel.size,
            "upload-time": e.upload_time,
            "yanked": e.yanked if e.yanked else (True if e.yanked == "" else False),
            **({"core-metadata": {"sha256": hashlib.sha256(e.wheel.metadata).hexdigest()}} if e.sidecar else {}),
        }
        for e in entries
    ]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": name, "files": files})


def index_urls(base: str) -> dict[str, str]:
    """Every world's three indexes, served at ``base``: PyTorch's, FlashInfer's and a PyPI."""
    return {"pytorch": base + "whl/", "flashinfer": base + "fi/", "pypi": base + "simple/"}
