"""Export locks as a static wheelhouse any web server serves (I/O edge: network, disk).

``export_wheelhouse(locks, DIR)`` downloads (verified, resumable, through the wheel cache) every
wheel the locks install into ``DIR/files/``, writes the simple-repository pages, each lock
rewritten to point at the wheelhouse, and a manifest (layout: ``lock.wheelhouse``).

- Several locks (targets, Pythons) share one wheelhouse: a file is stored once, and the manifest
  says which locks install it. The same file name with two different sha256 is an error.
- A rerun is incremental: a file the previous manifest lists with the same sha256 and size is
  reused without a request (a second run downloads nothing), and a page, lock or manifest is
  only rewritten when its text changes.
- Every write is atomic (a temp file created exclusively, never through a link, then renamed) and
  the manifest is written last; files no longer in any lock stay until ``prune``, so a failed or
  partial run leaves the previous wheelhouse, its pages and its locks usable. Temp files a killed
  run left are swept once stale.
- A wheel's METADATA is read and checked (the project and version its file name says) before the
  wheel is placed in ``files/``; a wheel is copied or hard-linked only from the wheel cache, whose
  files are ours (a local ``path`` source is copied into it, never linked).
- Everything published is readable by others (a web server may run as another user): the pages,
  locks and manifest are 0o644 (a file already there keeps its mode), and so are ``files/``:
  a ``.metadata`` is written 0o644, a wheel is hard-linked from the wheel cache, whose verified
  files are 0o644 (``wheelcache.WHEEL_MODE``), and copied 0o644 instead when the cache's file is
  not readable by others (one an earlier version kept 0o600: its mode is left alone, a chmod would
  change it for the cache too). A wheel or ``.metadata`` an earlier run left unreadable is placed
  again.
- Writes and deletions stay inside: ``files/`` or ``simple/`` being a symbolic link is refused,
  ``prune`` deletes only regular files and real folders there, and only in a folder that is a
  wheelhouse already (it holds our manifest) or was empty.
- No credential reaches a published lock: a URL's ``user:password@`` is removed (with a warning).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..atomic import atomic_write, exclusive_temp, sweep_stale
from ..data.definitions import load_definitions
from ..errors import LockFileError, UsageError, WriteError
from ..lock.files import read_lock, write_texts
from ..lock.locked import LockedEntry, LockedFile, LockedWheel
from ..lock.pylock import plan_from_lock
from ..lock.wheelhouse import (
    FILES,
    MANIFEST,
    MANIFEST_SCHEMA,
    SIMPLE,
    by_filename,
    house_file,
    manifest_json,
    project_html,
    project_json,
    read_manifest,
    rewrite_lock_text,
    root_html,
    root_json,
    total_bytes,
)
from ..model.abi import WheelAbi
from ..net.cache import TEMP_MAX_AGE_S, is_temp_name
from ..net.download import DEFAULT_WORKERS, Downloader, DownloadProgress, FetchedWheel, WheelCache, fetch_verified, store_local
from ..net.scan.classify import ScanRecord
from ..net.scan.records import (
    INDEX_NAME,
    RECORDS_FOLDER,
    exports_document,
    exports_record_name,
    index_text,
    parse_exports,
    publishable,
    record_document,
    record_name,
    record_text,
)
from ..net.wheelcache import wheel_metadata
from ..urls import strip_credentials
from .confirm import confirm_verdicts, wheel_exports
from .lockinstall import local_wheel_path

REPORT_SCHEMA = "resolve-gpu-stack/wheelhouse-report/v1"  # `wheelhouse --format json`
PUBLISHED_MODE = 0o644  # files/: what a web server running as another user can read (the pages': atomic_write's)


@dataclass(frozen=True, slots=True, kw_only=True)
class WheelhouseReport:
    output: Path
    files: tuple[LockedEntry, ...]  # by file name, each with its one wheel (``lock.wheelhouse.house_file``)
    fetched: tuple[str, ...]  # wheels placed into files/ by this run
    reused: tuple[str, ...]  # wheels already there (previous manifest, same sha256 and size)
    written: tuple[str, ...]  # pages, locks and the manifest rewritten (paths relative to output)
    pruned: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def total_bytes(self) -> int:
        return total_bytes(self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "output": str(self.output),
            "files": len(self.files),
            "total-bytes": self.total_bytes,
            "fetched": list(self.fetched),
            "reused": list(self.reused),
            "written": list(self.written),
            "pruned": list(self.pruned),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class _Wanted:
    """One wheel to put in the wheelhouse: the entry of the first lock that names it."""

    entry: LockedEntry
    wheel: LockedWheel  # the one of ``entry.wheels`` wanted
    sha256: str  # the wheel's (every wheel of a lock exported has one)
    source: Path | None  # a local file (a ``path`` entry), else download ``wheel.url``
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
    was_ours, previous = _prepare(output, prune=prune)
    reused = {n: previous[n] for n, w in wanted.items() if _still_there(output, previous.get(n), w)}
    todo = [w for n, w in wanted.items() if n not in reused]

    def one(w: _Wanted) -> LockedEntry:
        fetched = _fetch(w, cache=wheel_cache, fetcher=fetcher, progress=progress, offline=offline)
        return _place(w, fetched, output)

    with wheel_cache.in_use():  # cache prune leaves the cache's files alone until they are placed
        if len(todo) > 1 and workers > 1:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="resolve-gpu-stack-wheelhouse") as pool:
                placed = list(pool.map(one, todo))
        else:
            placed = [one(w) for w in todo]
    files = [_with_locks(reused[n], wanted[n]) for n in reused] + [_with_locks(f, wanted[f.wheel.filename]) for f in placed]
    scans = _confirm(read, output)
    written = _write_pages(output, files)
    written += _write_records(output, files, scans)
    lock_names, warnings = _write_locks(output, read, base_url)
    written += lock_names
    if _write_if_changed(output, output / MANIFEST, manifest_json(files, [p.name for p, _ in read])):
        written.append(MANIFEST)
    pruned = _prune(output, files) if prune and was_ours else []
    return WheelhouseReport(
        output=output,
        files=tuple(by_filename(files)),
        fetched=tuple(sorted(f.wheel.filename for f in placed)),
        reused=tuple(sorted(reused)),
        written=tuple(written),
        pruned=tuple(pruned),
        warnings=tuple(warnings),
    )


def _confirm(read: Sequence[tuple[Path, LockedFile]], output: Path) -> dict[str, WheelAbi]:
    """Every compiled wheel's verdict in each lock, read again from the verified file placed in
    ``files/`` (``env/confirm.py``), before a page or a lock is written: ``VerdictMismatch``.
    What each file's members import, by file name (its scan record)."""
    defs = load_definitions()
    scans: dict[str, WheelAbi] = {}
    for _, locked in read:
        plan = plan_from_lock(locked)
        files: dict[str, Path] = {p.name: output / FILES / p.filename for p in plan.packages if p.filename and (output / FILES / p.filename).is_file()}
        for confirmed in confirm_verdicts(plan, files, None, defs, doing="wheelhouse"):
            if confirmed.abi is not None and confirmed.filename is not None:
                scans[confirmed.filename] = confirmed.abi
    return scans


def _write_records(output: Path, files: Sequence[LockedEntry], scans: Mapping[str, WheelAbi]) -> list[str]:
    """``records/<sha256>.json``: the scan record of each compiled wheel read from its start
    (``net/scan/records.py``), for nodes that resolve with ``--scan-records URL/records/``; and
    ``records/index.json``, all of them in one file (a node reads it with one request)."""
    written = []
    documents = []
    for f in files:
        abi = scans.get(f.wheel.filename)
        record = ScanRecord(abi=abi, file_size=f.wheel.size or 0) if abi is not None else None
        if record is None or not f.wheel.sha256 or not publishable(record):
            continue
        documents.append(record_document(f.wheel.sha256, f.wheel.filename, f.wheel.size or 0, record))
        leaf = f"{RECORDS_FOLDER}/{record_name(f.wheel.sha256)}"
        if _write_if_changed(output, output / leaf, record_text(f.wheel.sha256, f.wheel.filename, f.wheel.size or 0, record)):
            written.append(leaf)
    torches = _torch_exports(output, files)
    for doc in torches:
        leaf = f"{RECORDS_FOLDER}/{exports_record_name(doc['sha256'])}"
        if _write_if_changed(output, output / leaf, json.dumps(doc, sort_keys=True) + "\n"):
            written.append(leaf)
    leaf = f"{RECORDS_FOLDER}/{INDEX_NAME}"
    if (documents or torches) and _write_if_changed(output, output / leaf, index_text(documents, torches)):
        written.append(leaf)
    return written


def _torch_exports(output: Path, files: Sequence[LockedEntry]) -> list[dict[str, Any]]:
    """The full exports record (``exports-record/v1``) of each torch wheel the wheelhouse serves
    (the one its locks install, or keep on the nodes), read from its verified file in ``files/``
    (every library of ``torch/lib``, as install's confirmation reads it): a node judging a
    version-locked wheel against that torch reads none of its wheel. A record already there for
    that sha256 is kept; a wheel whose exports cannot be read gets none."""
    out = []
    for f in files:
        if f.name != "torch" or not f.wheel.sha256:
            continue
        sha256 = f.wheel.sha256.lower()
        there = output / RECORDS_FOLDER / exports_record_name(sha256)
        try:
            kept, _ = parse_exports(sha256, there.read_bytes())
        except OSError:
            kept = None
        if kept is not None and kept.universe is None:
            out.append(json.loads(there.read_text(encoding="utf-8")))
            continue
        found = wheel_exports(output / FILES / f.wheel.filename, str(f.version))
        if found.symbols:
            out.append(exports_document(sha256, f.wheel.filename, f.wheel.size or 0, found.symbols))
    return out


def _prepare(output: Path, *, prune: bool) -> tuple[bool, dict[str, LockedEntry]]:
    """Make ``output`` a place to export into; whether ``prune`` may delete there (it holds our
    manifest, or nothing at all), and the files the previous manifest lists (its one reading).
    ``UsageError`` for a file, for ``files/`` or ``simple/`` being a link (writes would land in
    whatever it points at), and for ``prune`` in a folder that is not a wheelhouse; ``WriteError``
    when the folders cannot be made. Stale temp files a killed run left are swept."""
    if output.exists() and not output.is_dir():
        raise UsageError(f"--output {output}: a file is there, not a folder", hint="name a folder for the wheelhouse (it is created)")
    for sub in (FILES, SIMPLE):
        if (output / sub).is_symlink():
            raise UsageError(
                f"{output / sub} is a symbolic link; a wheelhouse writes and deletes only in its own folders",
                hint="replace the link by a real folder, or export into another folder",
            )
    try:
        empty = not output.exists() or not any(output.iterdir())
    except OSError as exc:
        raise WriteError(f"cannot read {output}: {exc.strerror or exc}") from None
    try:
        manifest: str | None = (output / MANIFEST).read_text(encoding="utf-8")
    except OSError:
        manifest = None
    ours = empty or _is_manifest(manifest)
    if prune and not ours:
        raise UsageError(
            f"--prune: {output} is not a wheelhouse (no {MANIFEST} of ours in it); nothing there is deleted",
            hint="export into a new or empty folder (or one an earlier export made), or leave out --prune",
        )
    try:
        (output / FILES).mkdir(parents=True, exist_ok=True)
        (output / SIMPLE).mkdir(exist_ok=True)
    except OSError as exc:
        raise WriteError(
            f"cannot create the wheelhouse folders in {output}: {exc.strerror or exc}",
            hint="nothing was written; make the folder writable, or pick another --output",
        ) from None
    sweep_stale(output / FILES, is_temp_name, TEMP_MAX_AGE_S)  # what a killed export left (never a running one's)
    return ours, read_manifest(manifest) if manifest is not None else {}


def _is_manifest(text: str | None) -> bool:
    """A manifest of ours, even one that lists no file (a wheelhouse of locks that install nothing)."""
    try:
        return text is not None and json.loads(text).get("schema") == MANIFEST_SCHEMA
    except (ValueError, AttributeError):
        return False


# -- what the locks install ------------------------------------------------------------------------


def _read_locks(locks: Sequence[Path]) -> list[tuple[Path, LockedFile]]:
    out: list[tuple[Path, LockedFile]] = []
    names: set[str] = set()
    for path in locks:
        locked = read_lock(path)
        plan_from_lock(locked)  # ours, and consistent (one wheel per package, kept packages apart)
        if path.name in names:
            raise UsageError(f"two locks are named {path.name}; the wheelhouse keeps each under its own file name", hint="name them pylock.<target>.toml")
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
                    have = wanted[wheel.filename] = _Wanted(entry=entry, wheel=wheel, sha256=wheel.sha256, source=local_wheel_path(wheel.url, path.parent))
                elif have.sha256 != wheel.sha256:
                    raise LockFileError(
                        f"{wheel.filename}: sha256 {have.sha256} in {have.locks[0]}, {wheel.sha256} in {path.name}",
                        hint="two locks name different bytes under one file name; lock them again from the same index",
                    )
                if path.name not in have.locks:
                    have.locks.append(path.name)
    return wanted


def _still_there(output: Path, old: LockedEntry | None, w: _Wanted) -> bool:
    if old is None or old.wheel.sha256 != w.sha256 or (w.wheel.size is not None and old.wheel.size != w.wheel.size):
        return False
    try:
        wheel, metadata = (output / FILES / old.wheel.filename).stat(), (output / FILES / (old.wheel.filename + ".metadata")).stat()
    except OSError:
        return False
    return wheel.st_size == old.wheel.size and stat.S_ISREG(metadata.st_mode) and _readable(wheel) and _readable(metadata)


def _readable(st: os.stat_result) -> bool:
    """Readable by group and others: what a web server running as another user needs."""
    return st.st_mode & 0o044 == 0o044


def _with_locks(f: LockedEntry, w: _Wanted) -> LockedEntry:
    return replace(f, wheels=(replace(f.wheel, upload_time=f.wheel.upload_time or w.wheel.upload_time),), locks=tuple(sorted(w.locks)))


# -- one wheel -------------------------------------------------------------------------------------


def _fetch(w: _Wanted, *, cache: WheelCache, fetcher: Downloader | None, progress: DownloadProgress | None, offline: bool) -> FetchedWheel:
    if w.source is not None:
        return store_local(w.source, sha256=w.sha256, size=w.wheel.size, cache=cache, filename=w.wheel.filename)
    return fetch_verified(
        w.wheel.url, sha256=w.sha256, size=w.wheel.size, cache=cache, fetcher=fetcher, filename=w.wheel.filename, progress=progress, offline=offline
    )


def _place(w: _Wanted, fetched: FetchedWheel, output: Path) -> LockedEntry:
    """Check the verified wheel's METADATA, then link (or copy) it from the wheel cache into
    ``files/`` and write its ``.metadata`` beside it: nothing that is not the wheel its name says
    is ever placed."""
    metadata = wheel_metadata(fetched.path, w.wheel.filename, w.wheel.filename)
    target = inside(output, output / FILES / w.wheel.filename)
    _replace_exclusively(target, lambda tmp: _link_or_copy(fetched.path, tmp))
    atomic_write(inside(output, target.with_name(target.name + ".metadata")), metadata, mode=PUBLISHED_MODE)
    requires_python = BytesHeaderParser().parsebytes(metadata).get("Requires-Python") or w.entry.requires_python
    return house_file(
        filename=w.wheel.filename,
        name=w.entry.name,
        version=w.entry.version,
        sha256=fetched.sha256,
        size=fetched.size,
        metadata_sha256=hashlib.sha256(metadata).hexdigest(),
        requires_python=str(requires_python).strip() if requires_python else None,
    )


def _replace_exclusively(target: Path, fill: Callable[[str], object]) -> None:
    """``target`` replaced atomically by what ``fill(tmp)`` writes into a temp file created
    exclusively beside it (never a name planted there, never through a link)."""
    fd, tmp = exclusive_temp(target)
    os.close(fd)
    try:
        fill(tmp)
        os.replace(tmp, target)
    except BaseException:
        _unlink(Path(tmp))
        raise


def _link_or_copy(source: Path, tmp: str) -> None:
    """The wheel cache's file at ``tmp`` (an empty temp file of ours): a hard link where the cache
    and the wheelhouse share a file system and the cache's file is readable by others, else a
    copy (``PUBLISHED_MODE``)."""
    os.unlink(tmp)
    if _readable(os.stat(source)):
        try:
            os.link(source, tmp)  # fails on an existing name: nothing planted meanwhile is written through
            return
        except OSError:
            pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PUBLISHED_MODE)
    os.fchmod(fd, PUBLISHED_MODE)  # whatever the umask, as the pages
    with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)


# -- pages, locks, manifest ------------------------------------------------------------------------


def _write_pages(output: Path, files: Sequence[LockedEntry]) -> list[str]:
    by_name: dict[str, list[LockedEntry]] = {}
    for f in files:
        by_name.setdefault(f.name, []).append(f)
    written = []
    for name, group in sorted(by_name.items()):
        for leaf, text in (("index.html", project_html(name, group)), ("index.json", project_json(name, group))):
            if _write_if_changed(output, output / SIMPLE / name / leaf, text):
                written.append(f"{SIMPLE}/{name}/{leaf}")
    for leaf, text in (("index.html", root_html(by_name)), ("index.json", root_json(by_name))):
        if _write_if_changed(output, output / SIMPLE / leaf, text):
            written.append(f"{SIMPLE}/{leaf}")
    return written


def _write_locks(output: Path, read: Sequence[tuple[Path, LockedFile]], base_url: str | None) -> tuple[list[str], list[str]]:
    """Each lock rewritten into ``output`` (what was written), with no credential in any URL
    (a warning for each lock that held one)."""
    written, warnings = [], []
    for path, locked in read:
        where: Mapping[str, str] = {
            w.url: (f"{base_url.rstrip('/')}/{FILES}/{quote(w.filename)}" if base_url else f"{FILES}/{w.filename}") for e in locked.entries for w in e.wheels
        }
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise LockFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
        rewritten = rewrite_lock_text(text, where, as_path=base_url is None, source=str(path))
        published = strip_credentials(rewritten)
        if published != rewritten:
            warnings.append(
                f"{path}: a URL in it carried credentials; the published {path.name} has them removed "
                "(nodes send their own, from netrc or a keyring; rotate them if the lock was shared)"
            )
        if _write_if_changed(output, output / path.name, published):
            written.append(path.name)
    return written, warnings


def inside(output: Path, path: Path) -> Path:
    """``path``, checked to lie inside the wheelhouse ``output``: no folder on the way from
    ``output`` to it (nor ``path`` itself) is a link, and it resolves below ``output`` resolved.
    ``UsageError`` naming the link otherwise (a symlinked ``simple/<project>`` included): every
    path a wheelhouse writes or deletes goes through here."""
    root = output.resolve()
    current = output
    for part in path.relative_to(output).parts:
        current = current / part
        if current.is_symlink():
            raise UsageError(
                f"{current} is a symbolic link; a wheelhouse writes and deletes only in its own folders",
                hint="replace the link by a real folder (or remove it), or export into another folder",
            )
    if not (path.parent.resolve() / path.name).is_relative_to(root):
        raise UsageError(f"{path} is outside the wheelhouse {output}; refused")
    return path


def _write_if_changed(output: Path, path: Path, text: str) -> bool:
    path = inside(output, path)
    data = text.encode("utf-8")
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_texts([(path, text)])
    return True


def _prune(output: Path, files: Sequence[LockedEntry]) -> list[str]:
    """Delete what no lock installs any more: regular files in ``files/`` and real folders in
    ``simple/`` (never a link, nor what it points at; ``_prepare`` refused a linked ``files/`` or
    ``simple/``), and temp files only when stale."""
    keep = {f.wheel.filename for f in files} | {f.wheel.filename + ".metadata" for f in files}
    names = {f.name for f in files}
    pruned = []
    for entry in sorted(os.scandir(output / FILES), key=lambda e: e.name):
        if entry.is_file(follow_symlinks=False) and entry.name not in keep and not is_temp_name(entry.name):
            os.unlink(inside(output, Path(entry.path)))
            pruned.append(f"{FILES}/{entry.name}")
    for entry in sorted(os.scandir(output / SIMPLE), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False) and entry.name not in names:
            shutil.rmtree(inside(output, Path(entry.path)))  # rmtree never follows a link inside
            pruned.append(f"{SIMPLE}/{entry.name}/")
    return pruned


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


__all__ = ["REPORT_SCHEMA", "WheelhouseReport", "export_wheelhouse"]
