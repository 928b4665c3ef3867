"""Scan records: a compiled wheel's scan as a fact about its bytes, kept by its sha256 and read
wherever that sha256 is seen again (``docs/concepts/abi-scan.md``, "Scan once for the world").

A record is one static file, ``<sha256>.json`` (schema ``scan-record/v1``): the wheel's sha256,
its file name and size, and its scan (``classify.ScanRecord``: each member's needed torch
libraries, its C-shim and C++ torch imports, its CUDA majors, how it was read). Where they come from:

- the scan cache of this machine (``HttpCache`` kind ``scans-v1``; ``classify.RangeClassifier``
  reads it first: every project on the machine shares it);
- the records the tool ships (``_records/`` in the package, ``indexes/records/`` in the source
  tree), made from today's popular native wheels by ``indexes/scan_records.py``;
- one records URL (``--scan-records`` / config ``scan-records``): a folder of such files on any
  web server; a wheelhouse writes its wheels' records to ``records/`` beside ``files/``. A folder
  may also hold ``index.json`` (schema ``scan-records/v1``): every record of the folder in one
  file, read with one request at the first lookup instead of one request per wheel; a folder
  without one (404) is read record by record.

A torch wheel's exports (what its ``torch/lib`` libraries define: what a version-locked wheel's C++
imports are checked against, ``rules/abi.TorchExports``) are a record too: ``<sha256>.exports.json``
(schema ``exports-record/v1``), beside the scan records and in an ``index.json``'s ``exports``, looked
up by the sha256 of the torch wheel whose exports a verdict needs (``exports.WheelExports``). It is
made only from a full read of that wheel's libraries and says either all of them (``exports``:
the names deflated, base64: a wheelhouse's torch) or, for the torch builds the tool ships,
its answer for a named set of symbols only (``answers-for`` and, of those, the ``missing``: the C++
torch imports of the shipped scan records, ``indexes/scan_records.py --torch``); such a partial record
answers a verdict whose imports are all in its set, and the wheel is read for any other.

A record is used only for the sha256 it names (in an ``index.json``, each record for the sha256
it names itself), looked up by the sha256 the index page or the lock gave for the wheel (a wheel
without one is scanned), and only if its scan read every member from its start (``read`` = ``start``, scan schema 5 or 4) and finished: never a guess, never a
scan stopped by its budget. Whatever a record says is *recorded* provenance (``READ_RECORDED``:
a lock writes ``abi-read = "recorded"``, ``check`` calls the verdict provisional), except a
"cuda" or "none" scan of schema 4, whose reader wrote a guess from the library names in the
first bytes of a wheel nothing ties to torch without saying so: it is unverified
(``READ_NAMES``, as a fresh scan of such a guess says). Install
reads every compiled wheel again from its verified file (``env/confirm.py``), so a hostile
records server can at worst make a plan that install refuses. A records URL that cannot be read
(down, 5xx, not a record) is passed over: the wheel is scanned as if there were none.
"""

from __future__ import annotations

import base64
import binascii
import json
import json as _json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from ...errors import CrawlError
from ...model.abi import CUDA, NONE, READ_NAMES, READ_RECORDED, READ_START, UNKNOWN
from ...urls import redact_url
from ..cache import SCANS, HttpCache
from ..transport import Transport
from .classify import SCAN_SCHEMA, UNMARKED_GUESSES, ScanRecord
from .exports import ExportsRecord, decode_exports, encode_exports

_Found = TypeVar("_Found")
log = logging.getLogger(__name__)

RECORD_SCHEMA = "resolve-gpu-stack/scan-record/v1"
INDEX_SCHEMA = "resolve-gpu-stack/scan-records/v1"
EXPORTS_SCHEMA = "resolve-gpu-stack/exports-record/v1"
EXPORTS_SUFFIX = ".exports.json"
MAX_EXPORTS_BYTES = 16 * 2**20  # a full record of torch 2.15.0 is ~1 MB (712 KB deflated, base64)
MAX_EXPORTS_NAMES = 2**21  # names one record may hold (torch 2.15.0 exports 103,705)
RECORDS_FOLDER = "records"  # a wheelhouse's, beside files/ and simple/
INDEX_NAME = "index.json"  # a records folder's records in one file (never a sha256's name)
MAX_RECORD_BYTES = 4 * 2**20  # a record of a wheel with thousands of C++ imports is a few hundred KB
MAX_INDEX_BYTES = 64 * 2**20  # the shipped records of today's popular native wheels are 0.5 MB together
NO_RECORDS = "none"  # --scan-records none: no records read from anywhere but this machine's scans
RECORD_SCAN_SCHEMAS = (UNMARKED_GUESSES, SCAN_SCHEMA)  # a record's scan; schema 4's "cuda" or "none" is read as unverified
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def record_name(sha256: str) -> str:
    """The file name of the record of the wheel whose sha256 is ``sha256`` (lowercase hex)."""
    return f"{sha256.lower()}.json"


def is_sha256(text: str) -> bool:
    return bool(_SHA256.match(text))


def exports_record_name(sha256: str) -> str:
    """The file name of the exports record of the torch wheel whose sha256 is ``sha256``."""
    return f"{sha256.lower()}{EXPORTS_SUFFIX}"


def exports_document(sha256: str, filename: str | None, size: int, symbols: frozenset[str], *, universe: frozenset[str] | None = None) -> dict[str, Any]:
    """The ``exports-record/v1`` object of one torch wheel, from a full read of its libraries'
    exports (``symbols``): all of them, or (``universe``) the answer for those names only."""
    if not is_sha256(sha256.lower()) or not symbols:
        raise ValueError(f"{filename or sha256}: not an exports record to publish (sha256 {sha256!r}, {len(symbols)} names)")
    named = {"filename": filename} if filename else {}
    head = {"schema": EXPORTS_SCHEMA, "sha256": sha256.lower(), **named, "size": size, "count": len(symbols)}
    if universe is None:
        return {**head, "exports": base64.b64encode(encode_exports(symbols)).decode("ascii")}
    return {**head, "answers-for": sorted(universe), "missing": sorted(universe - symbols)}


def exports_text(sha256: str, filename: str | None, size: int, symbols: frozenset[str], *, universe: frozenset[str] | None = None) -> str:
    doc = exports_document(sha256, filename, size, symbols, universe=universe)
    return json.dumps(doc, sort_keys=True, indent=None if universe is None else 1) + "\n"


def parse_exports(sha256: str, raw: bytes) -> tuple[ExportsRecord | None, str]:
    """The exports record in ``raw`` for the torch wheel whose sha256 is ``sha256``, or (None, why
    not): not JSON, another schema or sha256, names that are not a list of strings or not deflated
    names, a ``missing`` name outside ``answers-for``."""
    return _decoded(sha256, raw, _exports_of)


def _exports_of(sha256: str, data: object) -> tuple[ExportsRecord | None, str]:
    """``parse_exports`` of a decoded document."""
    data = _document(data, EXPORTS_SCHEMA, sha256)
    if isinstance(data, str):
        return None, data
    filename = data.get("filename") if isinstance(data.get("filename"), str) else None
    if "exports" in data:
        symbols = _deflated_names(data["exports"])
        if not symbols:
            return None, "its exports are not deflated names"
        return ExportsRecord(symbols=symbols, universe=None, filename=filename), ""
    universe, missing = _names(data.get("answers-for")), _names(data.get("missing"))
    if universe is None or missing is None or not universe:
        return None, "neither its exports nor the names it answers for"
    if not missing <= universe:
        return None, "it says a name is missing that it does not answer for"
    return ExportsRecord(symbols=universe - missing, universe=universe, filename=filename), ""


def _deflated_names(value: object) -> frozenset[str] | None:
    if not isinstance(value, str):
        return None
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return decode_exports(data, limit=MAX_EXPORTS_BYTES * 8)


def _names(value: object) -> frozenset[str] | None:
    if not isinstance(value, list) or len(value) > MAX_EXPORTS_NAMES or not all(isinstance(v, str) and v for v in value):
        return None
    return frozenset(value)


def publishable(record: ScanRecord) -> bool:
    """Whether ``record`` may be written as a record for others: finished, and read from its start."""
    return record.abi.kind != UNKNOWN and record.abi.read == READ_START


def record_document(sha256: str, filename: str | None, size: int, record: ScanRecord) -> dict[str, Any]:
    """The ``scan-record/v1`` object of one wheel (``publishable(record)`` must hold); ``filename``:
    for people (None: not known, as in a record exported from a scan cache)."""
    if not is_sha256(sha256.lower()) or not publishable(record):
        raise ValueError(f"{filename or sha256}: not a record to publish (sha256 {sha256!r}, read {record.abi.read!r}, kind {record.abi.kind!r})")
    named = {"filename": filename} if filename else {}
    return {"schema": RECORD_SCHEMA, "sha256": sha256.lower(), **named, "size": size, "scan": record.to_dict()}


def cached_records(cache_root: Path) -> list[tuple[str, ScanRecord]]:
    """The publishable scans in the scan cache at ``cache_root`` that are keyed by a sha256, each
    entry checked as the cache checks it (what a team exports to host its records)."""
    cache = HttpCache(cache_root)
    out = []
    folder = cache_root / SCANS
    for path in sorted(folder.rglob("*")) if folder.is_dir() else ():
        try:
            with path.open("rb") as fh:
                head = _json.loads(fh.readline())
        except (OSError, ValueError):
            continue
        key = head.get("key") if isinstance(head, dict) else None
        if not isinstance(key, str) or not key.startswith("sha256=") or not is_sha256(key[7:]):
            continue
        raw = cache.get_scan(key)
        record = ScanRecord.from_dict(_json.loads(raw)) if raw is not None else None
        if record is not None and publishable(record):
            out.append((key[7:], record))
    return out


def record_text(sha256: str, filename: str | None, size: int, record: ScanRecord) -> str:
    return json.dumps(record_document(sha256, filename, size, record), sort_keys=True, indent=1) + "\n"


def index_text(documents: Iterable[Mapping[str, Any]], exports: Iterable[Mapping[str, Any]] = ()) -> str:
    """A records folder's ``index.json``: its ``scan-record/v1`` documents (``record_document``),
    by sha256, and its ``exports-record/v1`` documents (``exports_document``), when it has some."""
    ordered = sorted(documents, key=lambda d: str(d["sha256"]))
    torches = sorted(exports, key=lambda d: str(d["sha256"]))
    body: dict[str, Any] = {"schema": INDEX_SCHEMA, "records": ordered, **({"exports": torches} if torches else {})}
    return json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n"


def folder_index(folder: Path) -> tuple[str, int]:
    """The ``index.json`` text of a folder of ``<sha256>.json`` records (those ``parse_record``
    would use for the sha256 their file is named by; the others are left out), and how many it holds."""
    documents, exports = [], []
    for path in sorted(folder.glob("*.json")):
        sha256 = path.name.removesuffix(EXPORTS_SUFFIX) if path.name.endswith(EXPORTS_SUFFIX) else path.name.removesuffix(".json")
        if not is_sha256(sha256):
            continue
        raw = path.read_bytes()
        if path.name.endswith(EXPORTS_SUFFIX):
            if parse_exports(sha256, raw)[0] is not None:
                exports.append(json.loads(raw))
        elif parse_record(sha256, raw)[0] is not None:
            documents.append(json.loads(raw))
    return index_text(documents, exports), len(documents) + len(exports)


def parse_index(raw: bytes) -> tuple[dict[str, ScanRecord] | None, str]:
    """The records of an ``index.json``, each by the sha256 it names (and only if it is a record
    ``parse_record`` would use for that sha256: the others are left out, said in the log), or
    (None, why not): not JSON, not a ``scan-records/v1`` index."""
    found, _, why = parse_index_all(raw)
    return found, why


def parse_index_all(raw: bytes) -> tuple[dict[str, ScanRecord] | None, dict[str, ExportsRecord], str]:
    """``parse_index``, and the index's exports records (``exports``), each by the sha256 it names
    and only if ``parse_exports`` would use it for that sha256."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting past the decoder's depth
        return None, {}, "not JSON"
    if not isinstance(data, dict) or data.get("schema") != INDEX_SCHEMA or not isinstance(data.get("records"), list):
        return None, {}, f"not a {INDEX_SCHEMA} index"
    found: dict[str, ScanRecord] = {}
    for doc in data["records"]:
        sha256 = str(doc.get("sha256", "")).lower() if isinstance(doc, dict) else ""
        record, why = _from_document(sha256, doc) if is_sha256(sha256) else (None, "no sha256")
        if record is None:
            log.info("%s: an entry of the index left out: %s", sha256 or "?", why)
            continue
        found[sha256] = record
    torches: dict[str, ExportsRecord] = {}
    listed = data.get("exports")
    for doc in listed if isinstance(listed, list) else ():
        sha256 = str(doc.get("sha256", "")).lower() if isinstance(doc, dict) else ""
        exports, why = _exports_of(sha256, doc) if is_sha256(sha256) else (None, "no sha256")
        if exports is None:
            log.info("%s: an exports record of the index left out: %s", sha256 or "?", why)
            continue
        torches[sha256] = exports
    return found, torches, ""


def parse_record(sha256: str, raw: bytes) -> tuple[ScanRecord | None, str]:
    """The record in ``raw`` for the wheel whose sha256 is ``sha256``, as *recorded* provenance, or
    (None, why not): not JSON, another schema, another sha256, a scan not read from its start or
    not finished."""
    return _decoded(sha256, raw, _from_document)


def _decoded(sha256: str, raw: bytes, of: Callable[[str, object], tuple[_Found | None, str]]) -> tuple[_Found | None, str]:
    """``of`` the JSON document in ``raw``, or (None, "not JSON")."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nesting past the decoder's depth
        return None, "not JSON"
    return of(sha256, data)


def _document(data: object, schema: str, sha256: str) -> dict[str, Any] | str:
    """``data`` as a ``schema`` document naming ``sha256``, or why it is not one."""
    if not isinstance(data, dict) or data.get("schema") != schema:
        return f"not a {schema} record"
    if str(data.get("sha256", "")).lower() != sha256.lower():
        return "it names another sha256"
    return data


def _from_document(sha256: str, data: object) -> tuple[ScanRecord | None, str]:
    """``parse_record`` of a decoded document."""
    data = _document(data, RECORD_SCHEMA, sha256)
    if isinstance(data, str):
        return None, data
    scan = data.get("scan")
    if not isinstance(scan, Mapping) or scan.get("read", READ_START) != READ_START:
        return None, "its scan was not read from the members' starts"
    record = ScanRecord.from_dict(scan, RECORD_SCAN_SCHEMAS)
    if record is None:
        return None, f"its scan is not of schema {' or '.join(map(str, RECORD_SCAN_SCHEMAS))}"
    if record.abi.kind == UNKNOWN:
        return None, "its scan did not finish"
    return replace(record, abi=replace(record.abi, read=_read_of(scan.get("schema"), record.abi.kind))), ""


def _read_of(schema: object, kind: str) -> str:
    """How a record's verdict was reached: recorded, or, for a "cuda" or "none" scan of schema 4
    (whose reader did not mark a guess from the library names in a wheel's first bytes: it may be
    one), unverified (``READ_NAMES``)."""
    return READ_NAMES if schema == UNMARKED_GUESSES and kind in (CUDA, NONE) else READ_RECORDED


def shipped_folder() -> Path | None:
    """The records the tool ships: ``_records/`` in an installed package, ``indexes/records/`` in
    the source tree (an editable install)."""
    package = Path(__file__).resolve().parents[2]
    for folder in (package / "_records", package.parents[1] / "indexes" / "records"):
        if folder.is_dir():
            return folder
    return None


class ScanRecords:
    """Records by sha256 from the shipped folder, then one records URL (see the module docstring).
    ``__call__(sha256)`` answers the record (recorded provenance) or None; each sha256 is asked for
    once per instance. Thread-safe."""

    def __init__(
        self,
        *,
        folders: Iterable[Path] = (),
        url: str | None = None,
        transport: Transport | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._folders = tuple(folders)
        self._url = url.rstrip("/") + "/" if url else None
        self._transport = transport
        self._say = say
        self._lock = threading.Lock()
        self._known: dict[str, ScanRecord | None] = {}
        self._url_down = False
        self._index_lock = threading.Lock()  # the first lookups wait for the one read of index.json
        self._index: dict[str, ScanRecord] | None = None  # the URL's index.json, once read
        self._index_exports: dict[str, ExportsRecord] = {}  # its exports records
        self._exports_known: dict[str, ExportsRecord | None] = {}
        self._index_read = False
        self.hits = 0

    @classmethod
    def configured(cls, setting: str | None, transport: Transport | None, *, say: Callable[[str], None] | None = None) -> ScanRecords | None:
        """The records of the setting ``setting`` (a URL, ``none``, or None: the shipped ones only)."""
        if setting == NO_RECORDS:
            return None
        shipped = shipped_folder()
        if setting is None and shipped is None:
            return None
        return cls(folders=(shipped,) if shipped is not None else (), url=setting, transport=transport, say=say)

    def __call__(self, sha256: str) -> ScanRecord | None:
        sha256 = sha256.lower()
        if not is_sha256(sha256):
            return None
        with self._lock:
            if sha256 in self._known:
                return self._known[sha256]
        found = self._find(sha256)
        with self._lock:
            self._known[sha256] = found
            self.hits += found is not None
            first = found is not None and self.hits == 1
        if first:
            self._note(
                "compiled wheels with a scan record are judged from it, by their sha256, not read: their verdicts are provisional (install reads each from its verified file)"
            )
        return found

    def exports(self, sha256: str) -> ExportsRecord | None:
        """The exports record of the torch wheel whose sha256 is ``sha256`` (shipped, then the
        records URL: its ``index.json``'s, else ``<sha256>.exports.json``), or None; each asked for
        once per instance. A record that is not one for that sha256 is passed over (the log says why)."""
        sha256 = sha256.lower()
        if not is_sha256(sha256):
            return None
        with self._lock:
            if sha256 in self._exports_known:
                return self._exports_known[sha256]
        found = self._find_exports(sha256)
        with self._lock:
            self._exports_known[sha256] = found
        return found

    def _find_exports(self, sha256: str) -> ExportsRecord | None:
        return self._look_up(
            sha256,
            exports_record_name(sha256),
            parse_exports,
            lambda s: self._index_exports.get(s),
            MAX_EXPORTS_BYTES,
            "exports record",
            "reading torch's exports from its wheel instead",
        )

    def _find(self, sha256: str) -> ScanRecord | None:
        return self._look_up(
            sha256, record_name(sha256), parse_record, lambda s: (self._url_index() or {}).get(s), MAX_RECORD_BYTES, "scan record", "scanning instead"
        )

    def _look_up(
        self,
        sha256: str,
        name: str,
        parse: Callable[[str, bytes], tuple[_Found | None, str]],
        indexed: Callable[[str], _Found | None],
        cap: int,
        what: str,
        instead: str,
    ) -> _Found | None:
        """The record ``name`` of ``sha256`` (``parse`` checks it is one for that sha256): from the
        shipped folders, else from the records URL, by its ``index.json`` (``indexed``: no request
        per wheel) or, without one, the file itself; a record the URL gives that is not one is said
        (what is done ``instead``)."""
        for folder in self._folders:
            try:
                raw = (folder / name).read_bytes()
            except OSError:
                continue
            found, why = parse(sha256, raw)
            if found is not None:
                return found
            log.info("%s: %s", folder / name, why)
        if self._url is None or self._transport is None or self._url_down:
            return None
        if self._url_index() is not None:
            return indexed(sha256)
        if self._url_down:
            return None
        url = self._url + name
        raw_or_none = self._read(url, cap, what)
        if raw_or_none is None:
            return None
        found, why = parse(sha256, raw_or_none)
        if found is None:
            self._note(f"{redact_url(url)}: not used ({why}); {instead}")
        return found

    def _url_index(self) -> dict[str, ScanRecord] | None:
        """The records URL's ``index.json``, read once (the lookups that come while it is read wait
        for it); None where the folder has none (404), or one that is not an index (said once):
        its records are then read one by one."""
        with self._index_lock:
            if not self._index_read:
                self._index_read = True
                assert self._url is not None
                url = self._url + INDEX_NAME
                raw = self._read(url, MAX_INDEX_BYTES, "scan records index")
                if raw is not None:
                    self._index, self._index_exports, why = parse_index_all(raw)
                    if self._index is None:
                        self._note(f"{redact_url(url)}: not used ({why}); reading the records one by one")
            return self._index

    def _read(self, url: str, limit: int, what: str) -> bytes | None:
        """The body at ``url`` (None: 404 or 410); a URL that cannot be read marks the records URL
        down, once: the wheels are scanned as if there were no records."""
        try:
            return self._get(url, limit, what)
        except CrawlError as exc:
            self._url_down = True
            self._note(f"the scan records at {redact_url(self._url or url)} cannot be read ({exc.message}); scanning instead")
            return None

    def _get(self, url: str, limit: int, what: str) -> bytes | None:
        transport = self._transport
        assert transport is not None

        def attempt() -> bytes | None:
            resp, _ = transport.open(url, {"Accept": "application/json"})
            try:
                if resp.status_code in (404, 410):
                    return None
                transport.check_status(resp, url, ok=(200, 203))
                return transport.read_body(resp, url, limit, what)
            finally:
                transport.finish(resp)

        return transport.retrying(url, attempt)

    def _note(self, message: str) -> None:
        log.info("%s", message)
        if self._say is not None:
            self._say(message)


__all__ = [
    "EXPORTS_SCHEMA",
    "EXPORTS_SUFFIX",
    "ExportsRecord",
    "INDEX_NAME",
    "INDEX_SCHEMA",
    "MAX_INDEX_BYTES",
    "MAX_RECORD_BYTES",
    "NO_RECORDS",
    "RECORDS_FOLDER",
    "RECORD_SCHEMA",
    "ScanRecords",
    "cached_records",
    "exports_document",
    "exports_record_name",
    "exports_text",
    "folder_index",
    "index_text",
    "is_sha256",
    "parse_exports",
    "parse_index",
    "parse_index_all",
    "parse_record",
    "publishable",
    "record_document",
    "record_name",
    "record_text",
    "shipped_folder",
]
