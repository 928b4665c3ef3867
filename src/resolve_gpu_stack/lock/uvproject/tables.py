"""A plan in uv's words: the ``[tool.uv]`` tables, dependency group, indexes and sources one or several targets' plans are exported to (``uv_tables``), and the record of them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ...data.rules import FlashInferRules
from ...model import Action, LockedPackage, LockPlan
from ...model.channel import torch_origin
from ...model.gpu import GpuArch
from ...urls import strip_credentials
from ..pylock import target_marker

GROUP = "gpu-stack"  # the dependency group holding the stack's roots
RECORD = "uv-export"  # [tool.resolve-gpu-stack.uv-export]
NEVER = "sys_platform == 'never'"  # an override with this marker drops the requirement (uv's idiom)
LISTS = ("constraint-dependencies", "override-dependencies", "no-build-isolation-package")  # [tool.uv] arrays of strings
_INDEX_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportTarget:
    """One plan to export, and the name of the configured target it is for ("" for flags)."""

    name: str
    plan: LockPlan


@dataclass(frozen=True, slots=True)
class UvIndex:
    name: str
    url: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedTarget:
    """What ``check`` needs of one exported target beyond the pins: where it runs, what it keeps,
    its FlashInfer group and which index each sourced package comes from."""

    name: str
    python: str
    platform: str
    environment: str | None  # the target's marker
    kept: tuple[str, ...] = ()  # packages the plan keeps as installed (torch above all)
    flashinfer: str | None = None
    cuda_label: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)  # package -> the simple-API URL it comes from


@dataclass(frozen=True, slots=True, kw_only=True)
class UvTables:
    """Everything one export writes, in uv's words (``uv_tables``)."""

    group: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    lists: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # LISTS key -> entries
    indexes: tuple[UvIndex, ...] = ()
    sources: Mapping[str, tuple[tuple[str, str | None], ...]] = field(default_factory=dict)  # package -> ((index name, marker), ...)
    targets: tuple[RecordedTarget, ...] = ()
    warnings: tuple[str, ...] = ()
    trees: Mapping[str, tuple[tuple[Mapping[str, str], str | None], ...]] = field(default_factory=dict)  # package -> ((uv source, marker), ...)
    build_variables: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # package -> variables its build gets (the arch list)

    built: tuple[str, ...] = ()  # the packages built against the plan's torch

    @property
    def extra_build(self) -> tuple[str, ...]:
        """The packages that get torch (match-runtime) as a build dependency: those built against the
        plan's torch, in uv's own isolated build environment (without isolation uv ignores
        extra-build-dependencies and needs the backend installed in the project)."""
        return self.built


# -- a plan in uv's words ----------------------------------------------------------------------------


def uv_tables(targets: Sequence[ExportTarget], flashinfer: FlashInferRules) -> UvTables:
    """The ``[tool.uv]`` tables that make ``uv lock`` and ``uv sync`` reproduce ``targets``' plans."""
    if not targets:
        raise ValueError("nothing to export")
    marked = [(t, target_marker(t.plan.target)) for t in targets]
    names = _index_names(targets)
    return UvTables(
        group=tuple(_per_target([(m, _roots(t.plan, flashinfer)) for t, m in marked])),
        environments=tuple(dict.fromkeys(m for _, m in marked if m)),
        lists=_lists(marked),
        indexes=tuple(sorted((UvIndex(name, url) for url, name in names.items()), key=lambda i: i.name)),
        sources=_sources_of(marked, names),
        targets=tuple(_recorded(t, marker) for t, marker in marked),
        warnings=(*_kept_unlisted(targets), *_no_arch_list(targets)),
        trees=_trees_of(marked),
        built=tuple(sorted({p.name for t, _ in marked for p in built_against_torch(t.plan)})),
        build_variables=_build_variables(targets),
    )


def tree_source(p: LockedPackage) -> dict[str, str] | None:
    """uv's ``[tool.uv.sources]`` entry of a package built from a source tree: the git URL at the
    locked commit (and its folder), or the local folder; None for anything else."""
    origin = p.sdist.origin if p.action is Action.BUILD and p.sdist is not None else None
    if origin is None:
        return None
    if origin.kind == "git":
        out = {"git": origin.url, "rev": origin.commit or origin.rev or "HEAD"}
        return {**out, "subdirectory": origin.subdirectory} if origin.subdirectory else out
    return {"path": origin.url}


def _trees_of(marked: Sequence[tuple[ExportTarget, str | None]]) -> dict[str, tuple[tuple[Mapping[str, str], str | None], ...]]:
    """package -> its source tree for each target (by marker) that builds it from one, folded to
    one entry when every such target builds it from the same tree."""
    by_package: dict[str, list[tuple[Mapping[str, str], str | None]]] = {}
    for t, marker in marked:
        for p in t.plan.packages:
            if (source := tree_source(p)) is not None:
                by_package.setdefault(p.name, []).append((source, marker))
    out: dict[str, tuple[tuple[Mapping[str, str], str | None], ...]] = {}
    for name, entries in sorted(by_package.items()):
        distinct = {tuple(sorted(s.items())) for s, _ in entries}
        out[name] = ((entries[0][0], None),) if len(distinct) == 1 and len(entries) == len(marked) else tuple(entries)
    return out


def arch_list_of(plan: LockPlan, p: LockedPackage) -> str | None:
    """TORCH_CUDA_ARCH_LIST a build of ``p`` used (its provenance), else the plan's ``--gpu`` list."""
    if p.provenance is not None and p.provenance.arch_list:
        return p.provenance.arch_list
    gpus = plan.inputs.get("gpus")
    if not isinstance(gpus, (list, tuple)) or not gpus:
        return None

    caps = {GpuArch.parse(str(g)).capability for g in gpus}
    return ";".join(sorted(caps, key=lambda c: tuple(int(n) for n in re.findall(r"\d+", c))))


def _build_variables(targets: Sequence[ExportTarget]) -> dict[str, dict[str, str]]:
    """package -> the variables uv gives its build: the arch list it is built for (one per package:
    the first target's where targets differ)."""
    out: dict[str, dict[str, str]] = {}
    for t in targets:
        for p in built_against_torch(t.plan):
            archs = arch_list_of(t.plan, p)
            if archs and p.name not in out:
                out[p.name] = {"TORCH_CUDA_ARCH_LIST": archs}
    return dict(sorted(out.items()))


def _no_arch_list(targets: Sequence[ExportTarget]) -> tuple[str, ...]:
    return tuple(
        f"{_label(t)}{p.name} is built against torch, but the plan names no GPU: uv builds it for the archs torch finds (a machine without a GPU "
        "has none); export with --gpu SM to write TORCH_CUDA_ARCH_LIST into [tool.uv.extra-build-variables]"
        for t in targets
        for p in built_against_torch(t.plan)
        if not arch_list_of(t.plan, p)
    )


def _lists(marked: Sequence[tuple[ExportTarget, str | None]]) -> dict[str, tuple[str, ...]]:
    """The ``[tool.uv]`` lists: every package pinned, the plans' overrides, the packages built against torch."""
    return {
        "constraint-dependencies": tuple(_per_target([(m, [f"{p.name}=={p.version}" for p in t.plan.packages]) for t, m in marked])),
        "override-dependencies": tuple(_per_target([(m, _overrides(t.plan)) for t, m in marked])),
        "no-build-isolation-package": (),  # built in isolation with the runtime torch (extra-build-dependencies); a previous export's entries go
    }


def _own_simple_index(p: LockedPackage) -> str | None:
    """The simple-API base of a package that comes from an index of its own (not PyPI, not kept
    as installed), the one a uv index and source are written for; else None."""
    return p.simple_index if p.index not in ("pypi", "installed") and p.simple_index else None


def _sources_of(marked: Sequence[tuple[ExportTarget, str | None]], names: Mapping[str, str]) -> dict[str, tuple[tuple[str, str | None], ...]]:
    """package -> the uv index (by name) of each target (by marker) that takes it from an index
    of its own (not PyPI), folded to one index when every target takes it from the same."""
    by_package: dict[str, dict[str | None, str]] = {}
    for t, marker in marked:
        for p in t.plan.packages:
            if simple := _own_simple_index(p):
                by_package.setdefault(p.name, {})[marker] = names[simple]
    return {name: _sources(by_marker, len(marked)) for name, by_marker in sorted(by_package.items())}


def _kept_unlisted(targets: Sequence[ExportTarget]) -> tuple[str, ...]:
    """A warning for each kept package no index lists any more (PyPI's torch, a release without a
    label, is listed on PyPI: the project's default index, where `uv lock` finds it)."""
    return tuple(
        f"{_label(t)}{p.name} {p.version} is kept, but no index lists it any more: `uv lock` cannot find it"
        for t in targets
        for p in t.plan.packages
        if p.index == "installed" and not (p.name == "torch" and torch_origin(p.version) == "pypi")
    )


def built_against_torch(plan: LockPlan) -> list[LockedPackage]:
    """The plan's rows built from source against its torch (action ``build``): uv builds them with
    the torch of the environment as a build dependency (``match-runtime``)."""
    return [p for p in plan.packages if p.action is Action.BUILD]


def _label(t: ExportTarget) -> str:
    return f"{t.name}: " if t.name else ""


def _roots(plan: LockPlan, fi: FlashInferRules) -> list[str]:
    """What the dependency group names: torch, the FlashInfer components the plan has, each
    package it builds, and each ``--with`` requirement as typed (without its version: the
    constraints pin it)."""
    out: list[str] = [p.name for p in plan.packages if p.name == "torch" or fi.members(p.name)]
    asked = {_name_of(str(t)) for t in _inputs(plan, "with")}
    out += [p.name for p in built_against_torch(plan) if p.name not in asked]  # --build NAME: the package is asked for
    for text in _inputs(plan, "with"):
        try:
            req = Requirement(str(text))
        except InvalidRequirement:
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        name = canonicalize_name(req.name) + extras
        out.append(f"{name} ; {str(text).split(';', 1)[1].strip()}" if req.marker else name)
    return out


def _overrides(plan: LockPlan) -> list[str]:
    """The plan's replacements in uv's override words, and each ``--without`` package dropped."""
    out = []
    for o in plan.overrides:
        try:
            Requirement(o.replaced_by)
        except InvalidRequirement:
            continue  # "torchaudio (not in the plan)": nothing uv could say
        out.append(o.replaced_by)
    out += [f"{canonicalize_name(n)} ; {NEVER}" for n in _inputs(plan, "without")]
    return out


def _inputs(plan: LockPlan, key: str) -> list[str]:
    """A list the plan's recorded inputs hold (``with``, ``without``), as strings."""
    value = plan.inputs.get(key)
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _per_target(items: Sequence[tuple[str | None, Iterable[str]]]) -> list[str]:
    """Requirement texts of each target (its marker, its texts): once, bare, where every target has
    it; else once per target that has it, with that target's marker added. Sorted by name."""
    texts = [(marker, list(dict.fromkeys(group))) for marker, group in items]
    count = Counter(t for _, group in texts for t in group)
    out = [t if count[t] == len(texts) else with_marker(t, marker) for marker, group in texts for t in group]
    return sorted(dict.fromkeys(out), key=lambda t: (_name_of(t), t))


def with_marker(text: str, marker: str | None) -> str:
    """``text`` (a requirement) that applies only where ``marker`` holds."""
    if not marker:
        return text
    base, sep, own = text.partition(";")
    return f"{base.strip()} ; ({own.strip()}) and ({marker})" if sep else f"{text} ; {marker}"


def _name_of(text: str) -> str:
    return canonicalize_name(re.split(r"[\s\[<>=!~;@]", text.strip(), maxsplit=1)[0])


def _sources(by_marker: Mapping[str | None, str], targets: int) -> tuple[tuple[str, str | None], ...]:
    """One index for every target, or one per target marker when they differ."""
    if len(set(by_marker.values())) == 1:
        return ((next(iter(by_marker.values())), None),)
    return tuple((index, marker) for marker, index in by_marker.items())


def _index_names(targets: Sequence[ExportTarget]) -> dict[str, str]:
    """simple-API base URL -> its uv index name: the logical index and the folders below its base
    (``pytorch-nightly-cu130``, ``flashinfer-cu130``); unique."""
    out: dict[str, str] = {}
    for t in targets:
        for p in t.plan.packages:
            simple = _own_simple_index(p)
            if simple and simple not in out:
                out[simple] = unique_name(_index_name(p.index, simple, t.plan.indexes.get(p.index) or ""), set(out.values()))
    return out


def _index_name(index: str, simple: str, base: str) -> str:
    """The uv name of the simple-API base ``simple`` of logical ``index`` (at ``base``): the index's
    name and the folders of ``simple`` below ``base``."""
    scheme, sep, rest = base.partition("://")
    base_url = (scheme.rsplit(":", 1)[-1] + sep + rest) if sep else ""  # "flat:https://..." -> "https://..."
    below = simple[len(base_url) :] if base_url and simple.startswith(base_url) else ""
    return _INDEX_NAME.sub("-", "-".join([index, *(part for part in below.split("/") if part)])).strip("-")


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... when it is taken."""
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}-{n}", n + 1
    return unique


def _recorded(t: ExportTarget, marker: str | None) -> RecordedTarget:
    plan = t.plan
    return RecordedTarget(
        name=t.name,
        python=plan.target.python,
        platform=plan.target.platform,
        environment=marker,
        kept=tuple(sorted(p.name for p in plan.packages if p.action is Action.KEEP)),
        flashinfer=str(plan.flashinfer_version) if plan.flashinfer_version is not None else None,
        cuda_label=plan.cuda_label,
        sources={p.name: strip_credentials(simple) for p in sorted(plan.packages, key=lambda p: p.name) if (simple := _own_simple_index(p))},
    )
