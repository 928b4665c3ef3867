"""Rendering plans for programs (one JSON object) and the words people read (the plan's story,
the coupling words); the tables people read are ``tables`` (rich). CLI layer."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO, TypeAlias

from ..index.finder import PageVisit
from ..model import LockedPackage, LockPlan, Override
from ..model.codec import override_to_dict, plan_to_dict
from ..urls import redact_url

if TYPE_CHECKING:
    from rich.console import Console

    from ..resolver.candidates import CandidateRow  # a type only: resolving does not load the candidates command

PLAN_SCHEMA = "resolve-gpu-stack/plan/v1"

# A JSON value, as ``json.dumps`` writes it: what the JSON outputs are made of (a fixed shape is a
# TypedDict of these, e.g. ``cmd_inspect.InspectReport``).
Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
JsonObject: TypeAlias = "dict[str, Json]"


# The plan JSON's own keys for a package, from model.codec's (schema resolve-gpu-stack/plan/v1).
_JSON_PACKAGE_KEYS = {
    "name": "name",
    "version": "version",
    "action": "action",
    "installed": "installed-version",
    "index": "index",
    "url": "url",
    "sha256": "sha256",
    "size": "size",
    "coupling": "coupling",
    "reason": "reason",
    "built_for": "built-for",
}
_JSON_OVERRIDE_KEYS = {"package": "package", "requirement": "requirement", "replaced_by": "replaced-by", "reason": "reason"}


_JSON_ABI_KEYS = {
    "kind": "abi",
    "torch": "abi-torch",
    "floor": "abi-floor",
    "cuda_majors": "cuda-majors",
    "builds": "abi-builds",
    "refusal": "abi-refusal",
    "note": "abi-note",
    "read": "abi-read",  # recorded: replayed from a scan record, provisional; names: judged from the library names in first bytes, unverified (install reads the file again)
}


def _json_package(p: Mapping[str, Json]) -> JsonObject:
    abi: Json = {key: p[field] for key, field in _JSON_ABI_KEYS.items()} if p["abi"] is not None or p["cuda-majors"] or p["abi-read"] else None
    out: JsonObject = {**{key: p[field] for key, field in _JSON_PACKAGE_KEYS.items()}, "abi_mismatch": bool(p["abi-mismatch"]), "abi": abi}
    if p["sdist"] is not None:  # a build row (--build NAME): the sdist it is built from, and once built, how
        out["sdist"] = p["sdist"]
        out["built"] = p["built"]
    return out


def coupling_words(p: LockedPackage) -> str:
    """The coupling column: the coupling, what the ABI verdict adds, and a mismatch planned anyway."""
    words = p.coupling.value + _abi_words(p)
    abi = p.abi
    if abi is not None and abi.cuda_majors:
        words += " CUDA " + "+".join(str(m) for m in abi.cuda_majors)
    if abi is not None and abi.unverified:  # judged from the library names in its first bytes: install reads it again
        words += " UNVERIFIED"
    return words + (" ABI MISMATCH" if p.abi_mismatch else "")


def _abi_words(p: LockedPackage) -> str:
    """What the ABI verdict adds to the coupling: a stable ABI's torch floor, a version-locked
    wheel or per-torch builds, or the torch a build was made for."""
    abi = p.abi
    if abi is not None and abi.floor:
        return f" (torch >= {abi.floor})"
    if abi is not None and abi.kind is not None and abi.kind.value in ("locked", "builds"):
        return f" ({abi.kind.value}" + (f" {abi.builds[0]}-{abi.builds[-1]}" if abi.builds else "") + ")"
    return f" (built for torch {p.built_for})" if p.built_for else ""


def plan_to_json(plan: LockPlan) -> JsonObject:
    """The plan as the ``resolve-gpu-stack/plan/v1`` object: ``model.codec``'s dict under that schema's keys."""
    data = plan_to_dict(plan)
    return {
        "schema": PLAN_SCHEMA,
        "target": data["target"],
        "flashinfer": {"version": data["flashinfer-version"], "cuda_label": data["cuda-label"]},
        "packages": [_json_package(p) for p in data["packages"]],
        **story_json(plan.notes, plan.overrides),
        "inputs_digest": data["inputs-digest"],
    }


# -- the plan's story: one renderer for every door ---------------------------------------------------


def story_json(notes: Sequence[str], overrides: Sequence[Override]) -> JsonObject:
    """The plan's story (its notes: choices, walk-backs, downgrades with the requirement that forces
    each; its overrides) as every JSON output carries it: ``resolve``, ``install`` (dry run and
    real, ``--lock`` too)."""
    return {
        "notes": list(notes),
        "overrides": [{key: o[field] for key, field in _JSON_OVERRIDE_KEYS.items()} for o in map(override_to_dict, overrides)],
    }


def story_lines(notes: Sequence[str], overrides: Sequence[Override]) -> list[str]:
    """The plan's story as lines of text, as every table and message shows it: ``resolve``,
    ``install``, ``export uv`` (on stderr), the lock's notes."""
    lines = []
    if notes:
        lines += ["Notes", *(f"  - {note}" for note in notes)]
    if overrides:
        lines += ["Overrides", *(f"  - {override_words(o)}" for o in overrides)]
    return lines


def say_story(notes: Sequence[str], overrides: Sequence[Override], say: Callable[[str], None], *, label: str = "") -> None:
    """``story_lines`` said line by line (on stderr, by the commands whose output is a file: ``lock``
    with ``-o`` or a config's targets, ``export uv``), each after ``label`` (a config target's
    ``NAME: ``), so that they tell the story ``resolve`` prints."""
    for line in story_lines(notes, overrides):
        say(f"{label}{line}")


def override_words(o: Override) -> str:
    """One override in words: ``sglang: torch==2.9.1 -> torch==2.15.0 (the installed torch is kept)``."""
    return f"{o.package}: {o.requirement} -> {o.replaced_by} ({o.reason})"


def print_story(console: Console, notes: Sequence[str], overrides: Sequence[Override]) -> None:
    """``story_lines`` on a rich console, the section heads in bold, the rest as typed (no markup)."""
    for line in story_lines(notes, overrides):
        if line.startswith(" "):
            console.print(line, markup=False)
        else:
            console.print(f"[bold]{line}[/]")


def print_json(data: Mapping[str, object], out: TextIO) -> None:
    """One JSON object (a ``JsonObject``, or a TypedDict of JSON values), indented, on ``out``."""
    out.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


# -- candidates ------------------------------------------------------------------------------------


def _json(rows: list[CandidateRow]) -> list[Json]:
    return [
        {
            "filename": r.filename,
            "version": r.version,
            "tags": r.tags,
            "index": r.index,
            "url": r.url,
            "sha256": r.sha256,
            "metadata_sha256": r.metadata_sha256,
            "size": r.size,
            "upload_time": r.upload_time,
            "yanked": r.yanked,
            "fits_target": r.fits,
            "why_not": r.why_not,
            "abi": r.abi,
            "built_for": r.built_for,
            "variant": r.variant,
            "variant_properties": r.variant_properties,
        }
        for r in rows
    ]


CANDIDATES_SCHEMA = "resolve-gpu-stack/candidates/v1"


def candidates_to_json(package: str, rows: list[CandidateRow], visits: list[PageVisit]) -> JsonObject:
    return {
        "schema": CANDIDATES_SCHEMA,
        "package": package,
        "files": _json(rows),
        "pages": [{"url": redact_url(v.location.url), "found": v.found, "files": v.files, "warnings": list(v.warnings)} for v in visits],
    }
