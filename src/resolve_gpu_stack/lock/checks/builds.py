"""Built wheels: the sdist, the provenance and the wheel a ``--build`` row records."""

from __future__ import annotations

import re
from pathlib import Path

from ...data.definitions import Definitions
from ...model import BuildProvenance, LockedPackage, LockPlan, SourceDist, TargetSummary
from ...rules.fit import TargetFit
from ...urls import strip_credentials
from ..locked import LockedFile
from .finding import WARNING, Finding, error_at
from .sources import relock_reference, source_problems
from .target import declared_target_of
from .urls import wheel_problem, wheel_url_problem


def build_findings(path: Path, pkg: LockedPackage, plan: LockPlan, locked: LockedFile, defs: Definitions) -> list[Finding]:
    """A wheel built from its sdist (``--build``): instead of looking it up on an index, its
    provenance must hold: the sdist from the index that owns the package (https, its sha256), built
    against the lock's own torch, for the lock's Python, platform and CUDA; the wheel of that
    package and version, with a tag that fits the target."""
    sdist, built = pkg.sdist, pkg.provenance
    warnings: list[str] = []
    hint = "lock it again with --build " + pkg.name
    if sdist is None or built is None:
        problems = ["a build row without its sdist and provenance ([tool.resolve-gpu-stack] packages: sdist, built)"]
    else:
        if sdist.origin is not None:  # a source tree (--build 'NAME @ URL'): checks/sources.py
            source, warnings = source_problems(sdist)
            hint = f"lock it again with --build '{pkg.name} @ {relock_reference(sdist)}'"
        else:
            source = _sdist_problems(pkg, sdist, locked, defs)
        problems = [*source, *_provenance_problems(built, plan), *_built_wheel_problems(pkg, plan.target)]
    return [error_at(path, problem, package=pkg.name, hint=hint) for problem in problems] + [
        Finding(level=WARNING, path=path, package=pkg.name, message=w) for w in warnings
    ]


def _sdist_problems(pkg: LockedPackage, sdist: SourceDist, locked: LockedFile, defs: Definitions) -> list[str]:
    """The sdist a wheel was built from: from its index's own places, with a sha256."""
    base, index = locked.indexes.get(pkg.index), defs.indexes.get(pkg.index)
    problem = (
        wheel_url_problem(sdist.url, base, index.hosts) if base and index is not None else f"comes from the {pkg.index} index, which the lock does not record"
    )
    out = [f"its sdist URL {problem}: {strip_credentials(sdist.url)}"] if problem else []
    if not (sdist.sha256 and re.fullmatch(r"[0-9a-f]{64}", sdist.sha256.lower())):
        out.append(f"its sdist {sdist.filename} has no sha256: the build's input cannot be verified")
    return out


def _provenance_problems(built: BuildProvenance, plan: LockPlan) -> list[str]:
    """A build's record against the lock: its torch, and the target's Python, platform and CUDA."""
    torch = plan.torch
    out = []
    if torch is None or built.torch != str(torch.version):
        out.append(f"built against torch {built.torch}, but the lock's torch is {torch.version if torch else 'none'}")
    target = plan.target
    out += [
        f"built for {what} {recorded or 'none'}, the lock's target has {want or 'none'}"
        for what, recorded, want in (("Python", built.python, target.python), ("platform", built.platform, target.platform), ("CUDA", built.cuda, target.cuda))
        if recorded != want
    ]
    if not built.command:
        out.append("its provenance records no build command")
    return out


def _built_wheel_problems(pkg: LockedPackage, target: TargetSummary) -> list[str]:
    """The built wheel is the package's, at its version, with a tag of the target's."""
    problem, tags = wheel_problem(pkg)
    if not tags:  # no wheel named, or not a wheel's name
        return [problem] if problem else []
    declared = declared_target_of(target.python, target.platform)  # None: a target this tool cannot declare, its tags are not judged here
    fits = declared is None or TargetFit(declared).rank_of(tags) is not None
    unfit = None if fits else f"its wheel {pkg.filename} fits no tag of Python {target.python} on {target.platform}"
    return [p for p in (problem, unfit) if p]
