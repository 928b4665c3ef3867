"""A resolvelib result -> a LockPlan: one row per package, its action, and the reason in words."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.utils import NormalizedName
from packaging.version import Version

from ..data.definitions import Definitions
from ..index.finder import Offer
from ..model import Action, IndexFile, LockedPackage, LockPlan, SourceDist, TargetSummary
from ..model.channel import torch_origin
from ..model.inputs import inputs_digest
from ..model.request import TORCH, ResolveRequest
from ..rules.versions import public
from .coupling import Found
from .flashinfer_selection import FlashInferSelection
from .framework import FrameworkFacts
from .kept_closure import KeptClosure
from .requirement import Cand, Key, Req, contains
from .sources import source_origin
from .torch_selection import TorchSelection


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanContext:
    """What the plan's rows and reasons are worded from."""

    request: ResolveRequest
    defs: Definitions
    torch: TorchSelection
    flashinfer: FlashInferSelection | None
    components: tuple[str, ...]
    facts: FrameworkFacts | None = None  # couplings found, overrides, framework notes
    offers: Callable[[NormalizedName], Sequence[Offer]] | None = None  # what was offered, with the page each file came from
    flashinfer_pins: tuple[str, ...] = ()  # requirements that held flashinfer-python below its newest complete version
    kept_wheel: IndexFile | None = None  # the kept torch's own wheel where its index has it (PyPI's torch): its row's file
    closure: KeptClosure | None = None  # the kept torch's closure, held exactly


def action(version: Version, installed: Version | None) -> Action:
    if installed is None:
        return Action.INSTALL
    if version == installed:
        return Action.KEEP
    if public(version) == public(installed):
        return Action.CHANGE
    return Action.UPGRADE if version > installed else Action.DOWNGRADE


def build_plan(result: Any, ctx: PlanContext, notes: Sequence[str]) -> LockPlan:
    """The plan for a resolvelib ``result`` (its ``mapping`` and ``graph``, keyed by ``Key``)."""
    ctx = replace(ctx, flashinfer_pins=_flashinfer_pins(result, ctx))
    packages, downgrades = _with_downgrade_causes(result, _rows(result, ctx))
    fi_python = next((p for p in packages if p.name == ctx.defs.flashinfer.python), None)
    fi_version = fi_python.version if fi_python else None
    label = ctx.flashinfer.label(fi_version) if ctx.flashinfer is not None else None
    request, defs = ctx.request, ctx.defs
    plan = LockPlan(
        target=TargetSummary(python=request.target.python_version, platform=request.target.platform, cuda=str(ctx.torch.cuda)),
        packages=packages,
        notes=tuple(
            dict.fromkeys([*notes, *_kept_torch_note(packages, request), *_flashinfer_note(packages, ctx), *_framework_notes(packages, ctx), *downgrades])
        ),
        flashinfer_version=fi_version,
        cuda_label=label,
        inputs=request.inputs(defs.recorded_urls()),
        indexes={n: url for n, url in defs.recorded_urls().items() if url},
        overrides=ctx.facts.overrides if ctx.facts is not None else (),
    )
    return replace(plan, inputs_digest=inputs_digest(plan.inputs))


def _flashinfer_pins(result: Any, ctx: PlanContext) -> tuple[str, ...]:
    """The requirements (of a framework, of a --with) that kept flashinfer-python below the newest
    version with every component: what decided the plan's FlashInfer, in their own words."""
    fi = ctx.defs.flashinfer
    chosen = next((c for k, c in result.mapping.items() if k.name == fi.python and not k.extras), None)
    allowed = ctx.flashinfer.versions if ctx.flashinfer is not None else {}
    newest = max(allowed, default=None)
    if chosen is None or newest is None or chosen.version >= newest:
        return ()
    return _held_below(result, Key(fi.python), newest)


def _held_below(result: Any, key: Key, newest: Version) -> tuple[str, ...]:
    """The requirements on ``key`` in resolvelib's result that exclude ``newest``, in their own words.
    A package with extras requires its own base at its own version (``flashinfer-python[cu13] 0.7.2
    requires flashinfer-python==0.7.2``): what held it there is what pinned that extras node (a
    framework's ``flashinfer-python[cu13]==0.7.2``), named instead."""
    criteria = getattr(result, "criteria", {})
    held: list[Req] = []
    for info in getattr(criteria.get(key), "information", ()):
        req = info.requirement
        if contains(req.specifier, newest):
            continue
        parent = getattr(info, "parent", None)
        if parent is not None and parent.name == key.name and parent.extras:
            origins = [i.requirement for i in getattr(criteria.get(Key(parent.name, parent.extras)), "information", ())]
            held += [o for o in origins if not contains(o.specifier, newest)]  # none: nothing held the extra (a bare [cu13] root)
        else:
            held.append(req)
    return tuple(dict.fromkeys(f"{req.parent} requires {req}" if req.parent else str(req) for req in held))


def _with_downgrade_causes(result: Any, packages: tuple[LockedPackage, ...]) -> tuple[tuple[LockedPackage, ...], list[str]]:
    """Every downgrade (torch's is refused elsewhere) with the requirement that forces it, the
    package and its specifier, in its row's reason and in a note of the plan's story:
    ``cuda-bindings 13.5.0 -> 13.4.4: required by X 1.0 (cuda-bindings<13.5)``."""
    rows, notes = [], []
    for p in packages:
        if p.action is not Action.DOWNGRADE or p.installed_version is None:
            rows.append(p)
            continue
        why = "; ".join(_forcing(result, Key(p.name), p.installed_version)) or (
            f"the installed {p.installed_version} is not offered for this target (no file of it on its index), and nothing newer is"
        )
        notes.append(f"{p.name} {p.installed_version} -> {p.version}: {why}")
        rows.append(replace(p, reason=f"downgraded from {p.installed_version}: {why}; {p.reason}"))
    return tuple(rows), notes


def _forcing(result: Any, key: Key, installed: Version) -> list[str]:
    """The requirements on ``key`` in resolvelib's result that exclude ``installed``: ``required by PARENT (SPEC)``."""
    criterion = getattr(result, "criteria", {}).get(key)
    held = [info.requirement for info in getattr(criterion, "information", ()) if not contains(info.requirement.specifier, installed)]
    return list(dict.fromkeys(f"required by {req.parent or 'the request'} ({req})" for req in held))


def _rows(result: Any, ctx: PlanContext) -> tuple[LockedPackage, ...]:
    """A row per package (an identifier with extras is its package's), in name order."""
    mapping: Mapping[Key, Cand] = result.mapping
    parents = _parents(result)
    return tuple(
        _row(key, cand, parents.get(key.name, []), sorted({c.name for c in result.graph.iter_children(key)}), ctx)
        for key, cand in sorted(mapping.items(), key=lambda kv: str(kv[0]))
        if not key.extras
    )


def _parents(result: Any) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    for key in result.mapping:
        for child in result.graph.iter_children(key):
            if child.name != key.name:
                parents.setdefault(child.name, []).append(key.name)
    return parents


def _row(key: Key, cand: Cand, parents: Sequence[str], dependencies: Sequence[str], ctx: PlanContext) -> LockedPackage:
    installed = ctx.request.target.installed.get(cand.name)
    found = _found(cand, ctx)
    coupling, why = found.coupling, found.evidence
    sdist = ctx.facts.builds.get((cand.name, cand.version)) if ctx.facts is not None else None
    if sdist is not None:  # --build: no wheel yet; the build (env/build.py) fills the file fields in
        return replace(
            _row(key, replace(cand, file=None), parents, dependencies, replace(ctx, facts=None)),
            action=Action.BUILD,
            index=sdist.index,
            coupling=coupling,
            reason=reason(cand, parents, why, ctx),
            built_for=found.built_for,
            simple_index=None,
            sdist=SourceDist(url=sdist.url, filename=sdist.filename, sha256=sdist.sha256, size=sdist.size, origin=source_origin(ctx.request, cand.name)),
        )
    mismatch = f"; ABI MISMATCH, planned anyway (--abi-mismatch warn): {found.mismatch}" if found.mismatch else ""
    if cand.file is None and cand.name == TORCH and cand.installed and ctx.kept_wheel is not None and ctx.kept_wheel.version == cand.version:
        cand = replace(cand, file=ctx.kept_wheel)  # kept: its own wheel and hash, so a lock lists it and `uv pip sync` keeps it
    kept_own = cand.file is not None and cand.file is ctx.kept_wheel
    return LockedPackage(
        name=cand.name,
        version=cand.version,
        action=action(cand.version, installed),
        coupling=found.coupling,
        reason=reason(cand, parents, found.evidence, ctx) + mismatch,
        **(_file_fields(cand.file) if not kept_own else {**_file_fields(cand.file), "index": "installed"}),
        simple_index=simple_index(cand.file, ctx),
        installed_version=installed,
        dependencies=tuple(dependencies),  # type: ignore[arg-type]
        built_for=found.built_for,
        abi_mismatch=found.mismatch is not None,
        abi=found.abi,
    )


def _found(cand: Cand, ctx: PlanContext) -> Found:
    """What the framework step found about ``cand``'s coupling, else what the data says."""
    found = ctx.facts.found.get((cand.name, cand.version)) if ctx.facts is not None else None
    if found is None:
        coupling, why = ctx.defs.coupling(cand.name, cand.version)
        found = Found(coupling=coupling, evidence=why)
    return found


def _file_fields(f: IndexFile | None) -> dict[str, Any]:
    """A row's fields from the file to install (none: what is installed is kept)."""
    if f is None:
        return {"index": "installed", "url": None, "filename": None, "sha256": None, "size": None, "upload_time": None, "requires_python": None}
    return {
        "index": f.index,
        "url": f.url,
        "filename": f.filename,
        "sha256": f.sha256,
        "size": f.size,
        "upload_time": f.upload_time,
        "requires_python": f.requires_python,
    }


def _framework_notes(packages: Sequence[LockedPackage], ctx: PlanContext) -> list[str]:
    out = list(ctx.facts.notes) if ctx.facts is not None else []
    out += [f"{p.name} {p.version}: {p.abi.note}" for p in packages if p.abi is not None and p.abi.note and not p.abi_mismatch]
    out += [
        f"{p.name} {p.version} cannot be shown to run with the plan's torch and is planned anyway (--abi-mismatch warn): expect an import error or a crash"
        for p in packages
        if p.abi_mismatch
    ]
    return out


def simple_index(f: IndexFile | None, ctx: PlanContext) -> str | None:
    """The simple-API base ``f`` was found under: its page's URL less the project's folder
    (``.../whl/nightly/cu130/torch/`` -> ``.../whl/nightly/cu130/``). None when unknown."""
    if f is None or ctx.offers is None:
        return None
    page = next((o.location.url for o in ctx.offers(f.name) if o.file.url == f.url), None)
    if page is None:
        return None
    head, sep, _ = page.rstrip("/").rpartition("/")
    return head + sep if sep and "://" in head else None


def _kept_torch_note(packages: Sequence[LockedPackage], request: ResolveRequest) -> list[str]:
    kept = next((p for p in packages if p.name == TORCH and p.action is Action.KEEP), None)
    if kept is None or request.installed_requires.get(TORCH):
        return []
    if torch_origin(kept.version) == "pypi":  # a declared torch of `pip install torch` (routing.toml kept)
        return [f"torch {kept.version} is kept: PyPI's build (no +cuNNN label), known from its own wheel on PyPI's torch page; its family comes from PyPI too"]
    if kept.url is not None:
        return []
    return [f"torch {kept.version} is kept; it is not on the index any more, so its own dependencies were not re-checked"]


UPGRADE_WORDS = "`--flashinfer latest` upgrades"  # a kept FlashInfer's reason, where a newer one exists


def _flashinfer_choice(cand: Cand, ctx: PlanContext) -> str:
    """Why this FlashInfer version: the newest with every component, the user's --flashinfer
    (``installed``: the installed one kept), or the requirement (a framework's pin) that held it
    below the newest."""
    complete = f"with {', '.join(ctx.components)} for {ctx.torch.cuda}"
    newest = newer_flashinfer(cand.version, ctx)
    if ctx.request.flashinfer.version is not None:
        return f"--flashinfer {ctx.request.flashinfer} asked for it; {complete}"
    if ctx.flashinfer_pins:
        return f"{'; '.join(ctx.flashinfer_pins)}, so {cand.version}, not the newest FlashInfer {complete} ({newest})"
    if newest is not None and ctx.request.flashinfer.text == "installed":  # kept, as uv keeps a bare requirement
        kept = "installed version kept" if cand.installed else "the installed FlashInfer's version, aligned"
        return f"{kept} (--flashinfer installed); the newest FlashInfer {complete} is {newest}: {UPGRADE_WORDS}"
    return f"newest FlashInfer {complete}"


def newer_flashinfer(version: Version, ctx: PlanContext) -> Version | None:
    """The newest FlashInfer with every component, when it is newer than the plan's ``version``."""
    newest = max(ctx.flashinfer.versions, default=None) if ctx.flashinfer is not None else None
    return newest if newest is not None and version < newest else None


def _flashinfer_note(packages: Sequence[LockedPackage], ctx: PlanContext) -> list[str]:
    """A newer FlashInfer the plan did not take, and why: said beside the table, not only in a reason."""
    fi = next((p for p in packages if p.name == ctx.defs.flashinfer.python), None)
    newest = newer_flashinfer(fi.version, ctx) if fi is not None else None
    if fi is None or newest is None:
        return []
    if ctx.flashinfer_pins:
        why = "; ".join(ctx.flashinfer_pins)
    elif ctx.request.flashinfer.version is not None:
        why = f"--flashinfer {ctx.request.flashinfer}"
    else:
        why = f"--flashinfer installed keeps the installed one: {UPGRADE_WORDS}"
    return [f"{fi.name} {newest} is newer than the plan's {fi.version} ({why})"]


def reason(cand: Cand, parents: Sequence[str], why: str, ctx: PlanContext) -> str:
    """Why this package is in the plan at this version, in a sentence."""
    fi = ctx.defs.flashinfer
    if cand.name == TORCH:
        return _torch_reason(cand, why, ctx)
    if cand.name == fi.python:
        return f"{_flashinfer_choice(cand, ctx)}; {why}"
    if cand.name == fi.cubin:
        return "== flashinfer-python (exact match required at import)"
    if cand.name == fi.jit_cache or fi.is_provider(cand.name):
        return f"== flashinfer-python public version + CUDA label; {why}"
    pin = ctx.closure.get(cand.name) if ctx.closure is not None else None
    if pin is not None and pin.found and pin.version == cand.version:
        return f"kept with torch: {pin.pinned_by} pins {pin.pin}" + (f"; {why}" if ctx.facts is not None else "")
    via = ", ".join(sorted(set(parents))) or "--with"
    prefix = "installed version kept; " if cand.installed else ""
    return f"{prefix}required by {via}" + (f"; {why}" if ctx.facts is not None else "")


def _torch_reason(cand: Cand, why: str, ctx: PlanContext) -> str:
    torch = ctx.torch
    if cand.installed:
        return f"installed {torch.channel} build kept ({why})"
    if torch.channel == "nightly" and not len(torch.choice.specifier):
        return "newest nightly with a wheel for this target"
    return f"newest torch matching --torch {ctx.request.torch}"
