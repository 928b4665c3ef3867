"""Reusing a plan when nothing it was computed from has changed: the warm path of ``resolve``.

A plan is a pure function of the request, the index definitions, this code, and the bytes of
the pages and METADATA files the resolver read. After a resolve, the ``ResultStore`` it was given
(``HttpCache``) keeps one entry: the plan, and the sha256 of every page (or "404") and METADATA
file the finder read, under a key digesting the request and the definitions' data
(``Definitions.digest``). The store keeps entries per code identity (``net/cache.py``: this
package's version and the size and mtime of each module), so code that changed never reads
another's plans. A later resolve with the same key asks the indexes again for every recorded page, in
one round of conditional requests (304 when unchanged), re-reads every METADATA file (from the
cache, where it is verified), and returns the stored plan only when every digest matches.
A page an optional index's host did not answer for (FlashInfer's, issue 50) is kept as
``UNREACHABLE``: the plan made without it holds while the host still does not answer. The warnings
said while the plan was made are kept too, and said again when it is reused.
Otherwise it resolves in full, with what it just read already in hand.

The entry holds no credentials: page URLs never carry them (``IndexDefinition.page_url``),
wheel URLs neither (``parse``), the warnings are what the log said (which never carries them), and
the key is a digest. An entry that cannot be read is
ignored (a miss).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..data.definitions import Definitions
from ..errors import CrawlError
from ..index.finder import UNREACHABLE, Finder
from ..model import IndexFile, LockPlan
from ..model.canonical import digest
from ..model.codec import plan_from_dict, plan_to_dict

log = logging.getLogger(__name__)

SCHEMA = 5  # 5: with the warnings said and the pages of a host that was down; 2: the plan in model.codec's shape; 3: with overrides, built_for, abi_mismatch; 4: with sdist / built (--build), the code is the store's


class ResultStore(Protocol):
    """Where a resolver keeps results computed from what a fetcher read: entries written by other
    code are never returned (``HttpCache`` keeps them per code identity)."""

    def get_result(self, key: str) -> bytes | None: ...

    def put_result(self, key: str, content: bytes) -> None: ...


def result_key(request: object, defs: Definitions) -> str:
    """The digest of everything a plan depends on besides the fetched bytes and the code."""
    return digest({"schema": SCHEMA, "request": request, "definitions": defs.digest})


def reuse(finder: Finder, store: ResultStore, key: str) -> tuple[LockPlan, list[str]] | None:
    """The stored plan for ``key``, and the warnings said when it was made, when every page and
    METADATA file it came from is unchanged."""
    raw = store.get_result(key)
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        if entry.get("schema") != SCHEMA or entry.get("key") != key:
            return None
        pages = [(str(i), str(u), d if d is None else str(d)) for i, u, d in entry["pages"]]
        metadata = [(_file_from(f), str(d)) for f, d in entry["metadata"]]
        plan = plan_from_dict(entry["plan"])
        warnings = [str(w) for w in entry.get("warnings", [])]
    except (ValueError, KeyError, TypeError, InvalidVersion) as exc:
        log.info("ignoring an unreadable stored plan (%s)", exc)
        return None
    try:
        if not finder.unchanged(pages, metadata):
            return None
    except CrawlError:
        return None  # resolve in full: it raises the error if it needs what could not be read
    return plan, warnings


def reused_or(finder: Finder, store: ResultStore | None, request: object, defs: Definitions, compute: Callable[[], LockPlan]) -> LockPlan:
    """The plan stored for ``request`` when every page and METADATA file it came from is
    unchanged; else ``compute()``'s, stored for the next time. Without a store: ``compute()``.
    (``compute`` is called only on a miss: a caller imports the resolver inside it, so a reused
    plan costs no resolver at all.)"""
    if store is None:
        return compute()
    key = result_key(request, defs)
    stored = reuse(finder, store, key)
    if stored is not None:
        plan, warnings = stored
        log.info("reusing the stored plan: every page and METADATA file it came from is unchanged (and every host that was down still is)")
        for warning in warnings:  # what the run that made it warned of, said again: a warm run tells the same
            log.warning("%s", warning)
        return plan
    said = _Said()
    package = logging.getLogger(__name__.partition(".")[0])
    package.addHandler(said)
    try:
        plan = compute()
    finally:
        package.removeHandler(said)
    # a plan made while a page could not be read is not kept, unless only an optional index's
    # host was down (FlashInfer's): kept with those pages, reused while the host stays down
    down = finder.unreachable_pages()
    if down is not None:
        remember(finder, store, key, plan, down, said.messages)
    return plan


class _Said(logging.Handler):
    """The warnings logged while a plan is made (by any thread), to be said again when it is reused."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.messages:
            self.messages.append(message)


def remember(finder: Finder, store: ResultStore, key: str, plan: LockPlan, down: Sequence[tuple[str, str]] = (), warnings: Sequence[str] = ()) -> None:
    """Store ``plan`` with the digests of every page and METADATA file the finder read, the pages
    ``down`` (``(index, URL)``: their optional host did not answer) as ``UNREACHABLE``, and the
    ``warnings`` said while it was made."""
    metadata = sorted(((_file_record(f), d) for f, d in dict(finder.metadata_digests).values()), key=lambda r: str(r[0]["url"]))
    pages: list[tuple[str, str, str | None]] = [(index, url, digest) for url, (index, digest) in dict(finder.page_digests).items()]
    pages += [(index, url, UNREACHABLE) for index, url in down]
    entry = {
        "schema": SCHEMA,
        "key": key,
        "pages": [list(p) for p in sorted(pages, key=lambda p: (p[0], p[1]))],
        "metadata": [[record, digest] for record, digest in metadata],
        "plan": plan_to_dict(plan),
        "warnings": list(warnings),
    }
    store.put_result(key, json.dumps(entry, sort_keys=True, separators=(",", ":")).encode())


_FILE_FIELDS = ("filename", "url", "index", "sha256", "size", "metadata_sha256", "has_metadata")


def _file_record(f: IndexFile) -> dict[str, Any]:
    """What the fetcher needs to read a wheel's METADATA again."""
    return {**{k: getattr(f, k) for k in _FILE_FIELDS}, "name": f.name, "version": str(f.version)}


def _file_from(raw: Mapping[str, Any]) -> IndexFile:
    return IndexFile(
        filename=raw["filename"],
        url=raw["url"],
        name=canonicalize_name(raw["name"]),
        version=Version(raw["version"]),
        index=raw["index"],
        sha256=raw["sha256"],
        size=raw["size"],
        metadata_sha256=raw["metadata_sha256"],
        has_metadata=bool(raw["has_metadata"]),
    )
