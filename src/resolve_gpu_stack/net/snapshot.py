"""Recorded index snapshots: record every page and metadata file a run reads, replay them offline.

Layout of a snapshot directory::

    manifest.json            {"schema": "resolve-gpu-stack/snapshot/v1", "indexes": {...},
                              "pages": {KEY: {"status": 200|404, "content_type": ..., "file": ...}},
                              "metadata": {KEY: {"file": ..., "sha256": ...}},
                              "scans": {SCAN-KEY: {"kind": ..., "evidence": ..., ...}}}
    pages/<index>/<path>     page bodies as served
    metadata/<index>/<path>  METADATA bytes of each wheel (however they were obtained)
    README.md                what is recorded and what is reconstructed

KEY is ``<index>:<path relative to that index's base URL>`` for URLs on an index's own host
(``pytorch:nightly/cu130/torch/``, ``pypi:../packages/ab/cd/x.whl``), else the absolute URL. Keys
therefore survive ``--index NAME=URL``: a snapshot replays against any base URL. SCAN-KEY is a
native wheel's ``sha256=<hex>`` (``net/scan/classify.py``): the scan of its shared objects, recorded
so that a replay classifies it offline.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import posixpath
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from email.parser import BytesHeaderParser
from email.policy import compat32
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..atomic import atomic_write
from ..data.definitions import IndexDefinition
from ..errors import IntegrityError, SnapshotMiss, UsageError
from ..index.finder import index_by_index
from ..index.parse import parse_filename
from ..model import IndexFile, IndexPage, PageResponse
from ..model.codec import parse_datetime
from ..urls import strip_userinfo, without_fragment
from .scan.access import RecordedScans, ScanAccess

if TYPE_CHECKING:
    from .source import Source

SCHEMA = "resolve-gpu-stack/snapshot/v1"


def snapshot_key(url: str, bases: Mapping[str, str], *, index: str | None = None) -> str:
    """The manifest key of ``url`` given the logical indexes' base URLs.

    ``index`` names the index the URL was found through (a page's index, a file's index): on that
    index's host the key is relative to its base, so a file outside the base (PyPI's
    ``../packages/...``) keeps its index even when several indexes share one host. Otherwise the
    index whose base is the longest prefix of the URL wins; else the URL itself is the key.
    """
    url = strip_userinfo(url)
    bases = _without_credentials(bases)
    parts = urlsplit(url)
    path = unquote(parts.path)

    def relative(name: str) -> str:
        b = urlsplit(bases[name])
        rel = posixpath.relpath(path, unquote(b.path)) if parts.path != b.path else "."
        if parts.path.endswith("/") and not rel.endswith("/"):
            rel += "/"
        return f"{name}:{rel}"

    def same_origin(name: str) -> bool:
        b = urlsplit(bases.get(name) or "")
        return bool(bases.get(name)) and (parts.scheme, parts.netloc) == (b.scheme, b.netloc)

    if index is not None and same_origin(index):
        return relative(index)
    under = [n for n in bases if same_origin(n) and path.startswith(unquote(urlsplit(bases[n]).path))]
    if under:
        return relative(max(under, key=lambda n: len(bases[n])))
    return without_fragment(url)


def _without_credentials(bases: Mapping[str, str]) -> dict[str, str]:
    """The base URLs without ``user:token@``: a snapshot (keys, manifest) never holds credentials."""
    return {name: strip_userinfo(base) if base else base for name, base in bases.items()}


def _storage_path(kind: str, key: str) -> str:
    """A safe relative path for a key: never escapes the snapshot directory."""
    if ":" in key and not key.startswith(("http://", "https://")):
        path = _indexed_path(kind, key)
    else:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        tail = quote(urlsplit(key).path.rstrip("/").rsplit("/", 1)[-1] or "root", safe="+-_.%")
        path = f"{kind}/_external/{digest}-{tail}"
    if key.endswith("/") or kind == "pages" and not path.rsplit("/", 1)[-1].count("."):
        path += "/index"
    return path


def _indexed_path(kind: str, key: str) -> str:
    """``kind/<index>/<segments>`` of an ``index:relative/path`` key (``..`` kept inside as ``_up``)."""
    index, rel = key.split(":", 1)
    segments = ["_up" if s == ".." else quote(s, safe="+-_.%") for s in rel.split("/") if s not in ("", ".")]
    return "/".join([kind, index, *segments])


class Manifest:
    def __init__(self, root: Path, data: dict[str, Any] | None = None) -> None:
        self.root = root
        self.data = data or {"schema": SCHEMA, "indexes": {}, "pages": {}, "metadata": {}}
        self.data.setdefault("scans", {})
        self.data.setdefault("exports", {})

    @classmethod
    def load(cls, root: Path) -> Manifest:
        path = root / "manifest.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            if not root.exists():
                bundled = root.as_posix().startswith("indexes/snapshots/")
                raise UsageError(
                    f"{root}: no such folder (from {Path.cwd()})",
                    hint=(
                        "the bundled snapshots live in a checkout of resolve-gpu-stack, not in the installed tool: run from the checkout, "
                        f"or pass the path there (CHECKOUT/{root.as_posix()})"
                        if bundled
                        else "name a folder `resolve-gpu-stack snapshot --output DIR` recorded"
                    ),
                ) from exc
            raise UsageError(f"{root} is not a snapshot: no manifest.json", hint="record one with `resolve-gpu-stack snapshot --output DIR`") from exc
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path}: unreadable snapshot manifest: {exc}") from exc
        if data.get("schema") != SCHEMA:
            raise UsageError(f"{path}: unknown snapshot schema {data.get('schema')!r} (expected {SCHEMA})")
        return cls(root, data)

    def save(self) -> None:
        data = {k: v for k, v in self.data.items() if k not in ("scans", "exports") or v}
        body = json.dumps(data, indent=1, sort_keys=True) + "\n"
        atomic_write(self.root / "manifest.json", body.encode(), make_parents=True)


def synthetic_digests(root: Path | None) -> frozenset[str]:
    """The sha256 digests a snapshot lists as stand-ins (``synthetic_sha256`` in its manifest,
    written by the generator of its reconstructed part): no real file has them."""
    if root is None:
        return frozenset()
    listed = Manifest.load(Path(root)).data.get("synthetic_sha256", [])
    return frozenset(d for d in listed if isinstance(d, str)) if isinstance(listed, list) else frozenset()


class SnapshotFetcher:
    """Replays a snapshot with no network at all. A page it lacks is an error naming the URL."""

    concurrent_calls: bool = False

    def __init__(self, root: Path, bases: Mapping[str, str]) -> None:
        self.root = Path(root)
        self.manifest = Manifest.load(self.root)
        self.bases = _without_credentials(bases)

    def _entry(self, table: str, url: str, index: str | None) -> dict[str, Any]:
        key = snapshot_key(url, self.bases, index=index)
        entry: dict[str, Any] | None = self.manifest.data[table].get(key)
        if entry is None:
            raise SnapshotMiss(
                url,
                f"not in snapshot {self.root} (key {key})",
                hint="add --live-fallback to fetch what the snapshot lacks, record it again with `resolve-gpu-stack snapshot`, or drop --snapshot to go online",
                unreachable=True,
            )
        return entry

    def _read(self, rel: str, url: str) -> bytes:
        path = (self.root / rel).resolve()
        if self.root.resolve() not in path.parents:
            raise SnapshotMiss(url, f"snapshot entry points outside the snapshot: {rel}")
        try:
            return path.read_bytes()
        except OSError as exc:
            raise SnapshotMiss(url, f"snapshot file {rel} unreadable: {exc}") from exc

    def fetch_pages(self, urls: Sequence[str], *, index: IndexDefinition) -> dict[str, PageResponse]:
        out = {}
        for url in urls:
            entry = self._entry("pages", url, index.name)
            if entry["status"] == 404:
                out[url] = PageResponse(url=url, page=None)
            else:
                body = self._read(entry["file"], url)
                out[url] = PageResponse(url=url, page=IndexPage(url=url, content=body, content_type=entry.get("content_type", "text/html")))
        return out

    def fetch_page_round(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> dict[str, PageResponse]:
        return index_by_index(self, batches)

    def fetch_metadata(self, files: Sequence[IndexFile]) -> dict[str, bytes]:
        out = {}
        for f in files:
            entry = self._entry("metadata", f.url, f.index or None)
            body = self._read(entry["file"], f.url)
            if f.metadata_sha256 and hashlib.sha256(body).hexdigest() != f.metadata_sha256:
                raise IntegrityError(f.url + ".metadata", "recorded METADATA does not match the digest on the page")
            out[f.url] = body
        return out

    def scan_entry(self, key: str) -> Mapping[str, Any] | None:
        """The recorded scan of a wheel (``classify.scan_key``), or None."""
        entry = self.manifest.data["scans"].get(key)
        return entry if isinstance(entry, dict) else None

    def exports_entry(self, key: str) -> bytes | None:
        """The recorded exports of a torch wheel (``classify.scan_key``), as stored, or None."""
        entry = self.manifest.data["exports"].get(key)
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            return None
        try:
            return self._read(entry["file"], entry["file"])
        except SnapshotMiss:  # a file gone or outside the snapshot: not recorded
            return None

    def scan_access(self) -> ScanAccess:
        """The recorded scans and exports (nothing is read: what the snapshot lacks is not known)."""
        return ScanAccess(recorded=RecordedScans(scans=self.scan_entry, exports=self.exports_entry))

    def close(self) -> None:
        pass


class RecordingFetcher:
    """Wraps a live fetcher and writes every page (404s included) and METADATA into a snapshot."""

    concurrent_calls: bool = False

    def __init__(
        self,
        inner: Source,
        root: Path,
        bases: Mapping[str, str],
        *,
        relative_files: Sequence[str] = ("pypi",),
        exclude_newer: str | None = None,
        cut: FileCut | None = None,
    ) -> None:
        self.inner = inner
        if exclude_newer:
            day_end(exclude_newer)  # a bad day is a usage error before anything is fetched
        self.exclude_newer = exclude_newer
        self.recorded = 0
        self.root = Path(root)
        self.bases = _without_credentials(bases)
        self.relative_files = tuple(relative_files)
        self.manifest = Manifest.load(self.root) if (self.root / "manifest.json").exists() else Manifest(self.root)
        self._lock = threading.Lock()
        # The targets recorded so far and this one: a page is cut to the files that serve any of them.
        self.cut = cut.merged(FileCut.from_dict(self.manifest.data.get("cut"))) if cut is not None else None
        if self.cut is not None:
            self.manifest.data["cut"] = self.cut.to_dict()
        recorded = self.manifest.data.setdefault("indexes", {})
        for name, base in self.bases.items():
            # The PyPI URL is the user's configuration: it is never written into a snapshot.
            recorded[name] = None if name in self.relative_files else base

    def fetch_pages(self, urls: Sequence[str], *, index: IndexDefinition) -> dict[str, PageResponse]:
        out = self.inner.fetch_pages(urls, index=index)
        for url, resp in list(out.items()):
            key = snapshot_key(url, self.bases, index=index.name)
            self.recorded += 1
            if resp.page is None:
                self.manifest.data["pages"][key] = {"status": 404}
                continue
            body = resp.page.content
            if index.name in self.relative_files and (self.exclude_newer or self.cut):
                if self.exclude_newer:
                    body = cut_newer(body, resp.page.content_type, self.exclude_newer)
                if self.cut is not None:
                    body = cut_to_targets(body, resp.page.content_type, self.cut)
                out[url] = PageResponse(url=url, page=IndexPage(url=resp.page.url, content=body, content_type=resp.page.content_type))
            if index.name in self.relative_files:
                body = relativize_file_urls(body, resp.page.content_type, url)
            rel = _storage_path("pages", key) + (".json" if "json" in resp.page.content_type else ".html")
            atomic_write(self.root / rel, body, make_parents=True)
            self.manifest.data["pages"][key] = {"status": 200, "content_type": resp.page.content_type, "file": rel}
        self.manifest.save()
        return out

    def fetch_page_round(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> dict[str, PageResponse]:
        return index_by_index(self, batches)

    def fetch_metadata(self, files: Sequence[IndexFile]) -> dict[str, bytes]:
        out = self.inner.fetch_metadata(files)
        for f in files:
            if f.url not in out:
                continue
            url, body = f.url, out[f.url]
            index = f.index or None
            if index in self.relative_files:
                url = relativized_url(url, self.bases, index)
            key = snapshot_key(url, self.bases, index=index)
            if not f.metadata_sha256:  # no digest to match on replay: keep only what resolving reads
                body = reduce_metadata(body)
            rel = _storage_path("metadata", key) + ".metadata"
            atomic_write(self.root / rel, body, make_parents=True)
            self.manifest.data["metadata"][key] = {"file": rel, "sha256": hashlib.sha256(body).hexdigest()}
            self.recorded += 1
        self.manifest.save()
        return out

    def record_scan(self, key: str, entry: Mapping[str, Any]) -> None:
        """A native wheel's scan, as stored (called from the classifier's threads; saved on ``close``)."""
        with self._lock:
            self.manifest.data["scans"][key] = dict(entry)

    def record_exports(self, key: str, data: bytes, *, symbols: int) -> None:
        """A torch wheel's exports, as stored, in a file of their own (saved with the manifest on ``close``)."""
        rel = _storage_path("exports", key) + ".exports"
        atomic_write(self.root / rel, data, make_parents=True)
        with self._lock:
            self.manifest.data["exports"][key] = {"file": rel, "symbols": symbols}

    def scan_access(self) -> ScanAccess:
        """The inner source's, every scan and every torch's exports recorded into this snapshot."""
        return replace(self.inner.scan_access(), recorder=self)

    def close(self) -> None:
        with self._lock:
            self.manifest.save()
        self.inner.close()


def relativized_url(url: str, bases: Mapping[str, str], index: str) -> str:
    """Where a file URL points once its page was recorded with relative file URLs: the same path
    on the index's own host (PyPI's CDN host is never written into a snapshot)."""
    base = bases.get(index)
    if not base:
        return url
    b, u = urlsplit(base), urlsplit(url)
    return f"{b.scheme}://{b.netloc}{u.path}"


def relativize_file_urls(body: bytes, content_type: str, page_url: str) -> bytes:
    """Rewrite absolute file URLs on other hosts as paths relative to the page (PyPI's CDN)."""
    page = urlsplit(page_url)
    depth = len([s for s in page.path.split("/") if s])

    def rel(url: str) -> str:
        u = urlsplit(url)
        if not u.scheme or u.netloc == page.netloc:
            return url
        out = "../" * depth + u.path.lstrip("/")
        return out + (f"#{u.fragment}" if u.fragment else "")

    if "json" in content_type:
        data = _project_page(body)
        if data is None:
            return body
        for f in data.get("files", []):
            if isinstance(f, dict) and isinstance(f.get("url"), str):
                f["url"] = rel(f["url"])
        return json.dumps(data, indent=None, separators=(",", ":")).encode()

    def sub(m: re.Match[bytes]) -> bytes:
        return b'href="' + rel(m.group(1).decode()).encode() + b'"'

    return re.sub(rb'href="(https?://[^"]+)"', sub, body)


class FallbackFetcher:
    """Replay what a snapshot has; fetch the rest live (to extend a snapshot)."""

    concurrent_calls: bool = False

    def __init__(self, replay: SnapshotFetcher, live: Source) -> None:
        self.replay = replay
        self.live = live

    def fetch_pages(self, urls: Sequence[str], *, index: IndexDefinition) -> dict[str, PageResponse]:
        out: dict[str, PageResponse] = {}
        missing = []
        for url in urls:
            try:
                out.update(self.replay.fetch_pages([url], index=index))
            except SnapshotMiss:
                missing.append(url)
        if missing:
            out.update(self.live.fetch_pages(missing, index=index))
        return out

    def fetch_page_round(self, batches: Sequence[tuple[Sequence[str], IndexDefinition]]) -> dict[str, PageResponse]:
        return index_by_index(self, batches)

    def fetch_metadata(self, files: Sequence[IndexFile]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        missing = []
        for f in files:
            try:
                out.update(self.replay.fetch_metadata([f]))
            except SnapshotMiss:
                missing.append(f)
        if missing:
            out.update(self.live.fetch_metadata(missing))
        return out

    def scan_access(self) -> ScanAccess:
        """The recorded scans and exports; range reads through the live source for what the snapshot lacks."""
        return replace(self.live.scan_access(), recorded=self.replay.scan_access().recorded)

    def close(self) -> None:
        self.live.close()


def day_end(day: str) -> dt.datetime:
    """The first instant (UTC) after ``day`` (YYYY-MM-DD); ``UsageError`` for anything else."""
    try:
        start = dt.date.fromisoformat(day.strip())
    except (ValueError, AttributeError):
        raise UsageError(f"--exclude-newer {day!r} is not a day (YYYY-MM-DD)") from None
    return dt.datetime(start.year, start.month, start.day, tzinfo=dt.timezone.utc) + dt.timedelta(days=1)


def _uploaded_before(value: object, limit: dt.datetime) -> bool:
    """True unless ``value`` is a time at or after ``limit`` (a file without a usable time stays)."""
    when = parse_datetime(value)
    return when is None or (when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)) < limit  # no zone: UTC


def cut_newer(body: bytes, content_type: str, day: str) -> bytes:
    """Drop files uploaded after ``day`` (YYYY-MM-DD) from a PEP 691 JSON page."""
    limit = day_end(day)
    return _keep_files(body, content_type, lambda f: _uploaded_before(f.get("upload-time"), limit))


@dataclass(frozen=True, slots=True)
class FileCut:
    """Which files of a recorded PyPI page could serve the recorded targets: sdists, and wheels
    with a tag for one of ``pythons`` ("3.12") on ``any`` or a glibc Linux platform of one of
    ``machines`` ("x86_64"). The rest (Windows, macOS, musl, other Pythons) is never read."""

    pythons: frozenset[str]
    machines: frozenset[str]

    def keeps(self, filename: str) -> bool:
        if not filename.endswith(".whl"):
            return True

        try:
            tags = parse_wheel_filename(filename)[3]
        except InvalidWheelFilename:
            return True
        return any(self._python(t.interpreter, t.abi) and self._platform(t.platform) for t in tags)

    def _python(self, interpreter: str, abi: str) -> bool:
        for version in self.pythons:
            minor = int(version.split(".")[1])
            if interpreter in ("py3", f"cp3{minor}"):
                return True
            py = re.fullmatch(r"py3(\d+)", interpreter)  # py37: any Python from 3.7 on
            cp = re.fullmatch(r"cp3(\d+)", interpreter)
            if py and int(py.group(1)) <= minor or abi == "abi3" and cp and int(cp.group(1)) <= minor:
                return True
        return False

    def _platform(self, platform: str) -> bool:
        return platform == "any" or (platform.startswith(("manylinux", "linux_")) and any(platform.endswith("_" + m) for m in self.machines))

    def merged(self, other: FileCut | None) -> FileCut:
        return self if other is None else FileCut(self.pythons | other.pythons, self.machines | other.machines)

    def to_dict(self) -> dict[str, list[str]]:
        return {"pythons": sorted(self.pythons), "machines": sorted(self.machines)}

    @classmethod
    def from_dict(cls, data: Any) -> FileCut | None:
        if not isinstance(data, dict):
            return None
        return cls(frozenset(map(str, data.get("pythons", ()))), frozenset(map(str, data.get("machines", ()))))


def cut_to_targets(body: bytes, content_type: str, cut: FileCut) -> bytes:
    """Keep only the files of a PEP 691 JSON page that ``cut`` keeps."""
    return _keep_files(body, content_type, lambda f: cut.keeps(str(f.get("filename", ""))))


def _keep_files(body: bytes, content_type: str, keep: Callable[[dict[str, Any]], bool]) -> bytes:
    """A PEP 691 JSON page with the files ``keep`` says yes to (its ``versions`` cut to match)."""
    data = _project_page(body) if "json" in content_type else None
    if data is None:
        return body
    files = data.get("files", [])
    data["files"] = [f for f in files if not isinstance(f, dict) or keep(f)]
    if isinstance(data.get("versions"), list):
        versions = _versions_of(str(f.get("filename", "")) for f in data["files"] if isinstance(f, dict))
        data["versions"] = [v for v in data["versions"] if v in versions]
    return json.dumps(data, separators=(",", ":")).encode()


def _project_page(body: bytes) -> dict[str, Any] | None:
    """A PEP 691 project page's JSON object (one with a ``files`` list), else None: a JSON body
    that is no project page (a release's variants.json, PEP 825; or broken JSON) is recorded byte
    for byte, so its sha256 still holds on replay and a broken one is judged where it is read."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None


def _versions_of(filenames: Iterable[str]) -> set[str]:
    """The versions the files of a page are (a filename that does not parse names none)."""
    versions = set()
    for name in filenames:
        try:
            versions.add(str(parse_filename(name)[1]))
        except ValueError:
            continue
    return versions


# The METADATA fields the resolver reads (parse.parse_metadata). A recorded METADATA without a
# digest to honour keeps only these: a package's long description is not the snapshot's business
# (and would write its authors' links, registry hosts included, into the repository).
RESOLVER_FIELDS = ("Metadata-Version", "Name", "Version", "Requires-Python", "Provides-Extra", "Requires-Dist")


def reduce_metadata(raw: bytes) -> bytes:
    """``raw`` METADATA with only ``RESOLVER_FIELDS`` (in that order, values unfolded), no body."""
    headers = BytesHeaderParser(policy=compat32).parsebytes(raw)
    lines = []
    for field in RESOLVER_FIELDS:
        for value in headers.get_all(field) or ():
            lines.append(f"{field}: {' '.join(str(value).split())}")
    return ("\n".join(lines) + "\n").encode()
