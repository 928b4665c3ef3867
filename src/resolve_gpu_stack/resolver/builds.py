"""Building for the kept torch, decided after resolvelib (pure): which packages the plan builds from
their sdist (``--build NAME``), and, for a package built for another torch, which ways to a build
for the kept torch exist (``ways_for``: the refusal's hint words them).

A ``--build`` package is built when the file the resolution picked is its sdist (no wheel of it
fits the target), or when the wheel it picked cannot run on the kept torch (a mismatch) and its
index has the sdist of that version. A wheel that runs on the kept torch is never rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.utils import NormalizedName
from packaging.version import Version

from ..model import Coupling, IndexFile
from .coupling import Found
from .requirement import Cand

Pkg = tuple[NormalizedName, Version]


@dataclass(frozen=True, slots=True, kw_only=True)
class Builds:
    """What ``plan_builds`` decided."""

    found: Mapping[Pkg, Found]  # every package's coupling, a built package's mismatch cleared
    sdists: Mapping[Pkg, IndexFile]  # the packages to build, and the sdist each is built from
    notes: tuple[str, ...] = ()


def plan_builds(
    cands: Sequence[Cand],
    found: Mapping[Pkg, Found],
    build: Collection[NormalizedName],
    sdist_of: Callable[[NormalizedName, Version], IndexFile | None],
    torch: Version | None,
) -> Builds:
    """The packages of ``build`` the plan builds (see the module docstring); ``sdist_of`` gives the
    sdist of a release on its index (None: none)."""
    if not build:
        return Builds(found=found, sdists={})
    out = dict(found)
    sdists: dict[Pkg, IndexFile] = {}
    notes: list[str] = []
    for cand in (c for c in cands if c.name in build):
        key = (cand.name, cand.version)
        sdist = _build_from(cand, found.get(key), sdist_of)
        if isinstance(sdist, str):
            notes.append(sdist)
            refused = found.get(key)
            if refused is not None and refused.mismatch is not None and cand.file is not None and cand.file.is_wheel:
                # the refusal says why the --build asked for did not happen (notes are not shown with it)
                out[key] = replace(refused, mismatch=f"{refused.mismatch}; --build {cand.name}: its index has no sdist of {cand.version}")
            continue
        sdists[key] = sdist
        out[key] = Found(
            coupling=Coupling.TORCH_ABI,
            evidence=f"built from its sdist {sdist.filename} against the kept torch (--build)",
            built_for=torch.public if torch is not None else None,
        )
    notes += [f"--build {name}: {name} is not in the plan" for name in sorted(set(build) - {c.name for c in cands})]
    return Builds(found=out, sdists=sdists, notes=tuple(notes))


def _build_from(cand: Cand, found: Found | None, sdist_of: Callable[[NormalizedName, Version], IndexFile | None]) -> IndexFile | str:
    """The sdist a ``--build`` package is built from (the candidate itself, or the sdist of a wheel
    that cannot run on the kept torch), or why it is not built."""
    if cand.file is not None and not cand.file.is_wheel:
        return cand.file
    if found is None or found.mismatch is None:
        return f"{cand.name} {cand.version}: a wheel of it runs on the kept torch; nothing to build (--build {cand.name})"
    sdist = sdist_of(cand.name, cand.version)
    return sdist if sdist is not None else f"{cand.name} {cand.version}: --build asks to build it, but its index has no sdist of that version"


# -- the ways to a build for the kept torch (the refusal's hint) -----------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WayFacts:
    """What the indexes offer towards a build of one package for the kept torch (gathered when the
    plan is refused; ``resolve._ways`` fills it from the candidate factory)."""

    family_build: Version | None = None  # a torch-family build for the kept torch on the PyTorch index
    sdist: str | None = None  # an sdist of the package on its index (file name): ``--build NAME`` applies
    requested: bool = False  # the user asked for the package (--with): dropping it is never the first way
    unknown: str | None = None  # why its scan did not finish (its refusal is "unknown")
    tied: bool = True  # its name or METADATA ties it to torch (``rules.abi.ties_to_torch``)


def ways_for(name: str, facts: WayFacts) -> list[str]:
    """The ways to a plan for a package built for another torch, best first, in words: the torch
    family's build from the PyTorch index, a build from its sdist (``--build NAME``; with none, from
    its source tree: ``--build 'NAME @ URL'``), an index of
    per-torch builds (``--package-index``), and leaving it out (``--without``) last, said as
    dropping what was asked for when the user asked for it. A scan that did not finish
    (``unknown``) first gets the ways that fit why (a larger ``--scan-budget``, a server that
    answers Range requests); and a build for this torch only when its name or METADATA ties it to
    torch (``rules.abi.ties_to_torch``)."""
    ways: list[str] = _unknown_ways(facts.unknown) if facts.unknown is not None else []
    if facts.family_build is not None:
        ways.append(
            f"the PyTorch index has {name} {facts.family_build} built for this torch: let the torch-family override pick it "
            f"(drop a --with pin or --no-auto-torch-override that excludes it)"
        )
    fits_a_build = facts.unknown is None or facts.tied  # an unknown untied to torch needs no build for it
    if facts.sdist is not None and fits_a_build:
        ways.append(f"build it from its sdist ({facts.sdist}) against this torch: --build {name}")
    elif facts.sdist is None and fits_a_build:  # no index has its sdist: its source tree does (a checkout, patched or not)
        ways.append(f"build it from its source against this torch: --build '{name} @ git+URL@REV#subdirectory=DIR' (or '{name} @ file:///path/to/checkout')")
    if fits_a_build:
        ways.append(f"serve per-torch builds of it (+cuNNNtorchA.B) from an index of your own: --package-index {name}=URL")
    else:
        ways.append("nothing ties it to torch (its name, its METADATA): no build of it for this torch is needed, plan it flagged (below)")
    ways.append(f"leave it out with --without {name}" + (" (it drops what you asked for)" if facts.requested else " (and what only it needs)"))
    return ways


def _unknown_ways(why: str) -> list[str]:
    """The ways that fit a scan that did not finish, by why: a larger budget, a server that answers
    Range requests."""
    if "budget" in why:
        return ["let the scan read further: a larger --scan-budget BYTES (its members' dynamic sections lie past the budget)"]
    if "Range" in why or "range" in why:
        return ["serve it from an index that answers Range requests (the scan reads parts of the wheel, never all of it)"]
    return []


def way_facts(
    name: NormalizedName,
    *,
    family: Collection[NormalizedName],
    family_candidates: Callable[[NormalizedName], Sequence[Cand]],
    files: Callable[[NormalizedName], Sequence[IndexFile]],
    requested: Collection[NormalizedName],
    version: Version,
    unknown: str | None = None,
    tied: bool = True,
) -> WayFacts:
    """``WayFacts`` for ``name`` (planned at ``version``) from what the candidate factory knows:
    ``family_candidates`` (the builds the judge accepted for the kept torch), ``files`` (everything
    its index offers; ``--build`` builds the planned version's sdist, so only that one counts)."""
    family_build = None
    if name in family:
        accepted = [c for c in family_candidates(name) if c.file is not None]
        family_build = accepted[0].version if accepted else None
    sdist = next(
        (f.filename for f in sorted(files(name), key=lambda f: f.version, reverse=True) if not f.is_wheel and f.version.public == version.public),
        None,
    )
    return WayFacts(family_build=family_build, sdist=sdist, requested=name in requested, unknown=unknown, tied=tied)
