"""The resolver inputs a plan records, in canonical form, and their digest (``sha256:<hex>``)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from packaging.version import Version

from ..urls import scrub
from .plan import Action, Coupling


def _jsonable(value: object, where: str = "inputs") -> Any:
    """The JSON-shaped form of a resolver input: mappings with str keys, lists, str/int/float/bool.

    ``None`` values inside a mapping are dropped (TOML cannot hold them, and "unset" is what they
    mean); tuples and sets become lists (sets sorted); versions, paths and enums become strings.
    """
    if isinstance(value, bool) or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return _number(value, where)
    if isinstance(value, Mapping):
        return _mapping(value, where)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _sequence(value, where)
    if isinstance(value, (Action, Coupling)):
        return value.value
    if isinstance(value, (Version, Path)):
        return str(value)
    raise TypeError(f"{where}: cannot record a {type(value).__name__} in a lock file")


def _number(value: int | float, where: str) -> int | float:
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise TypeError(f"{where}: integer {value} does not fit a lock file")
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"{where}: {value} is not a finite number")
    return value


def _mapping(value: Mapping[Any, object], where: str) -> dict[str, Any]:
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: key {key!r} is not a string")
        if item is not None:
            out[key] = _jsonable(item, f"{where}.{key}")
    return out


def _sequence(value: list[object] | tuple[object, ...] | set[object] | frozenset[object], where: str) -> list[Any]:
    """Tuples become lists; sets sorted lists."""
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return sorted((_jsonable(v, f"{where}[]") for v in value), key=lambda v: json.dumps(v, sort_keys=True))


def canonical_inputs(inputs: Mapping[str, object]) -> dict[str, Any]:
    """The inputs as they are digested and written (see ``_jsonable``)."""
    return _mapping(inputs, "inputs")


def inputs_digest(inputs: Mapping[str, object]) -> str:
    """``sha256:<hex>`` of the canonical JSON of the resolver inputs (sorted keys, no whitespace).

    Digested as written: without credentials (an index URL given as ``https://user:token@...``
    is recorded, and so digested, as ``https://...``), so a lock's digest checks out on reading.
    """
    text = json.dumps(scrub(canonical_inputs(inputs)), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()
