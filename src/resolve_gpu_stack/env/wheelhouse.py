"""Export locks as a static wheelhouse any web server serves (I/O edge: network, disk).

``export_wheelhouse(locks, DIR)`` downloads (verified, resumable, through the wheel cache) every
wheel the locks install into ``DIR/files/``, writes the simple-repository pages, each lock
rewritten to point at the wheelhouse, and a manifest (layout: ``lock.wheelhouse``).

- Several locks (targets, Pythons) share one wheelhouse: a file is stored once, and the manifest
  says which locks install it. The same file name with two different sha256 is an error.
- A rerun is incremental: a file the previous manifest lists with the same sha256 and size is
  reused without a request (a second run downloads nothing), and a page, lock or manifest is
  only rewritten when its text changes.
- Every write is atomic (temp file + rename) and the manifest is written last; files no longer in
  any lock stay until ``prune``, so a failed or partial run leaves the previous wheelhouse, its
  pages and its locks usable.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from packaging.utils import NormalizedName, canonicalize_name

from ..atomic import atomic_write
from ..errors import LockFileError, UsageError
from ..lock.files import read_lock, write_texts
from ..lock.locked import LockedFile, LockedWheel
from ..lock.pylock import plan_from_lock
from ..lock.wheelhouse import (
    FILES,
    MANIFEST,
    SIMPLE,
    HouseFile,
    manifest_json,
    project_html,
    project_json,
    read_manifest,
    rewrite_lock_text,
    root_html,
    root_json,
)
from ..net.download import DEFAULT_WORKERS, Downloader, DownloadProgress, FetchedWheel, WheelCache, fetch_verified, store_local
from .lockinstall import local_wheel_path

MAX_METADATA_BYTES = 5 * 1024 * 1024
REPORT_SCHEMA = "resolve-gpu-stack/wheelhouse-report/v1"  # `wheelhouse --format json`


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelhouseReport:
    output: Path
    files: tuple[HouseFile, ...]
    fetched: tuple[str, ...]  # wheels placed into files/ by this run
    reused: tuple[str, ...]  # wheels already there (previous manifest, same sha256 and size)
    written: tuple[str, ...]  # pages, locks and the manifest rewritten (paths relative to output)
    pruned: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"schema": REPORT_SCHEMA, "output": str(self.output), "files": len(self.files), "total-bytes": self.total_bytes,
                "fetched": list(self.fetched), "reused": list(self.reused), "written": list(self.written), "pruned": list(self.pruned)}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Wanted:
    """One wheel to put in the wheelhouse, as the first lock that names it describes it."""

    name: NormalizedName
    version: str
    wheel: LockedWheel
    sha256: str
    source: Path | None  # a local file (a ``path`` entry), else download ``wheel.url``
    requires_python: str | None
    locks: list[str] = field(default_factory=list)


def export_wheelhouse(
    locks: Sequence[Path],
    output: Path,
    *,
    wheel_cache: WheelCache,
    fetcher: Downloader | None = None,
    base_url: str | None = None,
    progress: DownloadProgress | None = None,
    offline: bool = False,
    prune: bool = False,
    workers: int = DEFAULT_WORKERS,
) -> WheelhouseReport:
    """Export ``locks`` into the wheelhouse ``output`` (see the module docstring).

    ``base_url``: the URL the wheelhouse will be served at; the rewritten locks then point at
    ``<base_url>/files/<wheel>``. Without it they name ``files/<wheel>`` as a relative ``path``.
    """
    if not locks:
        raise UsageError("no lock to export", hint="pass one or more pylock.<name>.toml files")
    read = _read_locks(locks)
    wanted = _wanted(read)
    output.mkdir(parents=True, exist_ok=True)
    (output / FILES).mkdir(exist_ok=True)
    previous = _previous(output)
    reused = {n: previous[n] for n, w in wanted.items() if _still_there(output, previous.get(n), w)}
    todo = [w for n, w in wanted.items() if n not in reused]

    def one(w: _Wanted) -> HouseFile:
        fetched = _fetch(w, cache=wheel_cache, fetcher=fetcher, progress=progress, offline=offline)
        return _place(w, fetched, output)

    if len(todo) > 1 and workers > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="resolve-gpu-stack-wheelhouse") as pool:
            placed = list(pool.map(one, todo))
    else:
        placed = [one(w) for w in todo]
    files = [_with_locks(reused[n], wanted[n]) for n in reused] + [_with_locks(f, wanted[f.filename]) for f in placed]
    written = _write_pages(output, files)
    written += _write_locks(output, read, base_url)
    if _write_if_changed(output / MANIFEST, manifest_json(files, [p.name for p, _ in read])):
        written.append(MANIFEST)
    pruned = _prune(output, files) if prune else []
    return WheelhouseReport(output=output, files=tuple(sorted(files, key=lambda f: f.filename)), fetched=tuple(sorted(f.filename for f in placed)),
                            reused=tuple(sorted(reused)), written=tuple(written), pruned=tuple(pruned))


# -- what the locks install ------------------------------------------------------------------------


def _read_locks(locks: Sequence[Path]) -> list[tuple[Path, LockedFile]]:
    out: list[tuple[Path, LockedFile]] = []
    names: set[str] = set()
    for path in locks:
        locked = read_lock(path)
        plan_from_lock(locked)  # ours, and consistent (one wheel per package, kept packages apart)
        if path.name in names:
            raise UsageError(f"two locks are named {path.name}; the wheelhouse keeps each under its own file name",
                             hint="name them pylock.<target>.toml")
        names.add(path.name)
        out.append((path, locked))
    return out


def _wanted(read: Sequence[tuple[Path, LockedFile]]) -> dict[str, _Wanted]:
    wanted: dict[str, _Wanted] = {}
    for path, locked in read:
        for entry in locked.entries:
            for wheel in entry.wheels:
                if not wheel.sha256:
                    raise LockFileError(f"{path}: {entry.name} {entry.version}: no sha256 for {wheel.filename}")
                if "/" in wheel.filename or wheel.filename in ("", ".", "..") or not wheel.filename.endswith(".whl"):
                    raise LockFileError(f"{path}: {entry.name}: {wheel.filename!r} is not a wheel file name")
                have = wanted.get(wheel.filename)
                if have is None:
                    have = wanted[wheel.filename] = _Wanted(
                        name=entry.name, version=str(entry.version), wheel=wheel, sha256=wheel.sha256,
                        source=local_wheel_path(wheel.url, path.parent), requires_python=entry.requires_python,
                    )
                elif have.sha256 != wheel.sha256:
                    raise LockFileError(f"{wheel.filename}: sha256 {have.sha256} in {have.locks[0]}, {wheel.sha256} in {path.name}",
                                        hint="two locks name different bytes under one file name; lock them again from the same index")
                if path.name not in have.locks:
                    have.locks.append(path.name)
    return wanted


def _previous(output: Path) -> dict[str, HouseFile]:
    try:
        return read_manifest((output / MANIFEST).read_text(encoding="utf-8"))
    except OSError:
        return {}


def _still_there(output: Path, old: HouseFile | None, w: _Wanted) -> bool:
    if old is None or old.sha256 != w.sha256 or (w.wheel.size is not None and old.size != w.wheel.size):
        return False
    try:
        return (output / FILES / old.filename).stat().st_size == old.size and (output / FILES / (old.filename + ".metadata")).is_file()
    except OSError:
        return False


def _with_locks(f: HouseFile, w: _Wanted) -> HouseFile:
    return HouseFile(filename=f.filename, name=f.name, version=f.version, sha256=f.sha256, size=f.size, metadata_sha256=f.metadata_sha256,
                     requires_python=f.requires_python, upload_time=f.upload_time or w.wheel.upload_time, locks=tuple(sorted(w.locks)))


# -- one wheel -------------------------------------------------------------------------------------


def _fetch(w: _Wanted, *, cache: WheelCache, fetcher: Downloader | None, progress: DownloadProgress | None, offline: bool) -> FetchedWheel:
    if w.source is not None:
        return store_local(w.source, sha256=w.sha256, size=w.wheel.size, cache=cache, filename=w.wheel.filename)
    return fetch_verified(w.wheel.url, sha256=w.sha256, size=w.wheel.size, cache=cache, fetcher=fetcher,
                          filename=w.wheel.filename, progress=progress, offline=offline)


def _place(w: _Wanted, fetched: FetchedWheel, output: Path) -> HouseFile:
    """Link (or copy) the verified wheel into ``files/`` and write its ``.metadata`` beside it."""
    target = output / FILES / w.wheel.filename
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    _unlink(tmp)
    try:
        os.link(fetched.path, tmp)
    except OSError:
        shutil.copyfile(fetched.path, tmp)
    os.replace(tmp, target)
    metadata = wheel_metadata(target, w.name)
    atomic_write(target.with_name(target.name + ".metadata"), metadata)
    requires_python = BytesHeaderParser().parsebytes(metadata).get("Requires-Python") or w.requires_python
    return HouseFile(filename=w.wheel.filename, name=w.name, version=w.version, sha256=fetched.sha256, size=fetched.size,
                     metadata_sha256=hashlib.sha256(metadata).hexdigest(), requires_python=str(requires_python).strip() if requires_python else None)


def wheel_metadata(path: Path, name: str) -> bytes:
    """The bytes of ``<dist>-<version>.dist-info/METADATA`` inside a wheel."""
    key = canonicalize_name(name)
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                folder, _, leaf = info.filename.partition("/")
                if leaf == "METADATA" and folder.endswith(".dist-info") and canonicalize_name(folder[: -len(".dist-info")].rsplit("-", 1)[0]) == key:
                    if info.file_size > MAX_METADATA_BYTES:
                        break
                    return zf.read(info)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise LockFileError(f"{path}: not a readable wheel ({exc})") from exc
    raise LockFileError(f"{path}: no {key} .dist-info/METADATA (or one over {MAX_METADATA_BYTES} bytes) in the wheel")


# -- pages, locks, manifest ------------------------------------------------------------------------


def _write_pages(output: Path, files: Sequence[HouseFile]) -> list[str]:
    by_name: dict[str, list[HouseFile]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    written = []
    for name, group in sorted(by_name.items()):
        for leaf, text in (("index.html", project_html(name, group)), ("index.json", project_json(name, group))):
            if _write_if_changed(output / SIMPLE / name / leaf, text):
                written.append(f"{SIMPLE}/{name}/{leaf}")
    for leaf, text in (("index.html", root_html(by_name)), ("index.json", root_json(by_name))):
        if _write_if_changed(output / SIMPLE / leaf, text):
            written.append(f"{SIMPLE}/{leaf}")
    return written


def _write_locks(output: Path, read: Sequence[tuple[Path, LockedFile]], base_url: str | None) -> list[str]:
    written = []
    for path, locked in read:
        where: Mapping[str, str] = {
            w.url: (f"{base_url.rstrip('/')}/{FILES}/{quote(w.filename)}" if base_url else f"{FILES}/{w.filename}")
            for e in locked.entries for w in e.wheels
        }
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise LockFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
        if _write_if_changed(output / path.name, rewrite_lock_text(text, where, as_path=base_url is None, source=str(path))):
            written.append(path.name)
    return written


def _write_if_changed(path: Path, text: str) -> bool:
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_texts([(path, text)])
    return True


def _prune(output: Path, files: Sequence[HouseFile]) -> list[str]:
    keep = {f.filename for f in files} | {f.filename + ".metadata" for f in files}
    names = {f.name for f in files}
    pruned = []
    for p in sorted((output / FILES).iterdir()):
        if p.is_file() and p.name not in keep:
            p.unlink()
            pruned.append(f"{FILES}/{p.name}")
    for d in sorted((output / SIMPLE).iterdir()):
        if d.is_dir() and d.name not in names:
            shutil.rmtree(d)
            pruned.append(f"{SIMPLE}/{d.name}/")
    return pruned


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


__all__ = ["REPORT_SCHEMA", "WheelhouseReport", "export_wheelhouse", "wheel_metadata"]
