"""A frozen value in canonical form (JSON-able, order-independent) and its digest: what a reuse key
or a definitions digest is made of. Only a value's data counts: a dataclass field declared
``compare=False`` (a memo filled on use) is left out, so filling it never changes a digest."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.version import Version


def canonical(value: Any) -> Any:
    """A JSON-able, order-independent form of ``value`` (a request, definitions, ...)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__, **{f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value) if f.compare}}
    if isinstance(value, (Mapping, set, frozenset, list, tuple)):
        return _collection(value)
    return _scalar(value)


def _collection(value: Mapping[Any, Any] | set[Any] | frozenset[Any] | list[Any] | tuple[Any, ...]) -> list[Any]:
    if isinstance(value, Mapping):
        return sorted(([canonical(k), canonical(v)] for k, v in value.items()), key=lambda kv: json.dumps(kv[0], sort_keys=True))
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return [canonical(v) for v in value]


def _scalar(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (Version, SpecifierSet, Tag, PurePath)):
        return str(value)
    if isinstance(value, re.Pattern):
        return value.pattern
    return repr(value)


def digest(value: Any) -> str:
    """The sha256 (hex) of ``value``'s canonical JSON."""
    return hashlib.sha256(json.dumps(canonical(value), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


__all__ = ["canonical", "digest"]
