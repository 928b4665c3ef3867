"""Reusing a plan when nothing it was computed from has changed: the warm path of ``resolve``.

A plan is a pure function of the request, the index definitions, this code, and the bytes of
the pages and METADATA files the resolver read. After a resolve, a fetcher that can store
results (its ``result_store``: ``HttpFetcher``'s cache) keeps one entry: the
plan, and the sha256 of every page (or "404") and METADATA file the finder read, under a key
digesting the request, the definitions and the code (version and the size and mtime of each
module). A later resolve with the same key asks the indexes again for every recorded page, in
one round of conditional requests (304 when unchanged), re-reads every METADATA file (from the
cache, where it is verified), and returns the stored plan only when every digest matches.
Otherwise it resolves in full, with what it just read already in hand.

The entry holds no credentials: page URLs never carry them (``IndexDefinition.page_url``),
wheel URLs neither (``parse``), and the key is a digest. An entry that cannot be read is
ignored (a miss).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..data.definitions import Definitions
from ..errors import CrawlError
from ..index.finder import Finder
from ..model import IndexFile, LockPlan
from ..model.codec import plan_from_dict, plan_to_dict

log = logging.getLogger(__name__)

SCHEMA = 4  # 2: the plan in model.codec's shape; 3: with overrides, built_for, abi_mismatch; 4: with sdist / built (--build)


def result_key(request: object, defs: Definitions) -> str:
    """The digest of everything a plan depends on besides the fetched bytes."""
    inputs = {"schema": SCHEMA, "code": _code_identity(), "request": _canonical(request), "definitions": _definitions_digest(defs)}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


_DEFS: dict[int, tuple[Definitions, str]] = {}


def _definitions_digest(defs: Definitions) -> str:
    """The digest of the (immutable) definitions, once per object: a lock shares one for all targets."""
    known = _DEFS.get(id(defs))
    if known is None or known[0] is not defs:
        if len(_DEFS) > 16:
            _DEFS.clear()
        digest = hashlib.sha256(json.dumps(_canonical(defs), sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        known = _DEFS[id(defs)] = (defs, digest)
    return known[1]


def reuse(finder: Finder, key: str) -> LockPlan | None:
    """The stored plan for ``key`` when every page and METADATA file it came from is unchanged."""
    store = finder.fetcher.result_store
    raw = store.get_result(key) if store is not None else None
    if raw is None:
        return None
    try:
        entry = json.loads(raw)
        if entry.get("schema") != SCHEMA or entry.get("key") != key:
            return None
        pages = [(str(i), str(u), d if d is None else str(d)) for i, u, d in entry["pages"]]
        metadata = [(_file_from(f), str(d)) for f, d in entry["metadata"]]
        plan = plan_from_dict(entry["plan"])
    except (ValueError, KeyError, TypeError, InvalidVersion) as exc:
        log.info("ignoring an unreadable stored plan (%s)", exc)
        return None
    try:
        if not finder.unchanged(pages, metadata):
            return None
    except CrawlError:
        return None  # resolve in full: it raises the error if it needs what could not be read
    return plan


def remember(finder: Finder, key: str, plan: LockPlan) -> None:
    """Store ``plan`` with the digests of every page and METADATA file the finder read."""
    store = finder.fetcher.result_store
    if store is None:
        return
    metadata = sorted(((_file_record(f), d) for f, d in dict(finder.metadata_digests).values()), key=lambda r: str(r[0]["url"]))
    entry = {
        "schema": SCHEMA,
        "key": key,
        "pages": sorted([index, url, digest] for url, (index, digest) in dict(finder.page_digests).items()),
        "metadata": [[record, digest] for record, digest in metadata],
        "plan": plan_to_dict(plan),
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


# -- the key ---------------------------------------------------------------------------------------
def _canonical(value: Any) -> Any:
    """A JSON-able, order-independent form of a request or definitions object."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__, **{f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return sorted(([_canonical(k), _canonical(v)] for k, v in value.items()), key=lambda kv: json.dumps(kv[0], sort_keys=True))
    if isinstance(value, (set, frozenset)):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (Version, SpecifierSet, Tag, Path)):
        return str(value)
    if isinstance(value, re.Pattern):
        return value.pattern
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


_CODE: str | None = None


def _code_identity() -> str:
    """This package's version and the size and mtime of each of its modules: a plan stored by
    other code (an upgrade, an edited checkout) is never reused."""
    global _CODE
    if _CODE is None:
        here = Path(__file__).resolve().parents[1]
        parts = []
        for path in sorted(here.rglob("*.py")):
            st = path.stat()
            parts.append(f"{path.relative_to(here)}:{st.st_size}:{st.st_mtime_ns}")
        try:
            from importlib.metadata import version

            parts.append(version("resolve-gpu-stack"))
        except Exception:  # noqa: BLE001 - not installed as a distribution
            pass
        _CODE = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return _CODE
