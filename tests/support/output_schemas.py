"""The JSON Schemas of schemas/ (one file per ``resolve-gpu-stack/NAME/v1``) and validation against them."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from support.paths import REPO

SCHEMAS = REPO / "schemas"
SCHEMA_ID = re.compile(r"^resolve-gpu-stack/(?P<name>[a-z][a-z0-9-]*)/v(?P<version>\d+)$")


def schema_file(schema_id: str) -> Path:
    """``resolve-gpu-stack/plan/v1`` -> schemas/plan-v1.json."""
    m = SCHEMA_ID.match(schema_id)
    if m is None:
        raise ValueError(f"{schema_id!r} is not a resolve-gpu-stack/NAME/vN schema id")
    return SCHEMAS / f"{m['name']}-v{m['version']}.json"


@functools.cache
def validator(schema_id: str) -> jsonschema.protocols.Validator:
    path = schema_file(schema_id)
    assert path.is_file(), f"{schema_id}: no JSON Schema {path.relative_to(SCHEMAS.parent)} (add it: see schemas/README.md)"
    schema = json.loads(path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(data: Any, schema_id: str | None = None) -> None:
    """``data`` against the schema its ``"schema"`` key (or ``schema_id``) names; AssertionError
    naming the schema and the first error otherwise."""
    schema_id = schema_id or data["schema"]
    errors = sorted(validator(schema_id).iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, f"{schema_id}: {errors[0].message} at {'/'.join(map(str, errors[0].absolute_path)) or 'the top'}"
