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
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise TypeError(f"{where}: integer {value} does not fit a lock file")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{where}: {value} is not a finite number")
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: key {key!r} is not a string")
            if item is not None:
                out[key] = _jsonable(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [_jsonable(v, f"{where}[]") for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, (Action, Coupling)):
        return value.value
    if isinstance(value, (Version, Path)):
        return str(value)
    raise TypeError(f"{where}: cannot record a {type(value).__name__} in a lock file")


def canonical_inputs(inputs: Mapping[str, object]) -> dict[str, Any]:
    """The inputs as they are digested and written (see ``_jsonable``)."""
    return _jsonable(inputs)


def inputs_digest(inputs: Mapping[str, object]) -> str:
    """``sha256:<hex>`` of the canonical JSON of the resolver inputs (sorted keys, no whitespace).

    Digested as written: without credentials (an index URL given as ``https://user:token@...``
    is recorded, and so digested, as ``https://...``), so a lock's digest checks out on reading.
    """
    text = json.dumps(scrub(canonical_inputs(inputs)), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()
