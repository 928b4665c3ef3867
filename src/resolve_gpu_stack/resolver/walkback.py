"""No walk-back without the user's word (issue 47): a package the user named (``--with``, a
requirements file, a config's frameworks) is planned at its newest release for the target's Python
and platform, or the resolve stops naming that release, why it cannot be planned, and the ways out.

Ordinary backtracking of dependencies is unchanged (``framework.walked_back_notes`` names a
dependency walked back past a release the judgement refused). A named package the target already
has is kept, as uv keeps it (a note says what is newer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from packaging.utils import NormalizedName
from packaging.version import Version

from ..errors import NoPlanError
from ..model.request import TORCH
from ..rules.versions import describe_versions
from .factory import CandidateFactory, Policy
from .framework import JUDGED
from .requirement import Cand, Key, Req


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkBack:
    """A named package planned below its newest fitting release."""

    root: Req  # the user's requirement
    planned: Version
    newest: Version  # the newest release for the target that the user's specifier admits
    refusal: str | None = None  # the judgement's words, when it refused ``newest`` before resolving


class WhyNot(NamedTuple):
    """Why no plan has a walked-back package's newest release: the resolver's error for a request
    asking for exactly it, and the packages whose requirements cannot all hold there."""

    error: NoPlanError
    blocked: tuple[NormalizedName, ...] = ()


def walk_backs(
    roots: Sequence[Req], mapping: Mapping[Key, Cand], factory: CandidateFactory, policy: Policy, family: frozenset[NormalizedName] = frozenset()
) -> list[WalkBack]:
    """The named packages (``roots``) the plan has below their newest release for this target:
    newer releases that the resolution passed over (a conflict) or the judgement refused (a build
    for another torch or CUDA). What the target has installed is kept, as uv keeps it; the torch
    family (``family``) is not walked back but matched: its build for the plan's torch is chosen
    among many, newer or not."""
    out = []
    for req in roots:
        cand = mapping.get(Key(req.name))
        if cand is None or req.name == TORCH or req.name in family or cand.installed:
            continue
        public = Version(cand.version.public)  # another label of the planned release is no walk-back
        passed = [c.version for c in factory.matches(req.name, [req], policy) if Version(c.version.public) > public]
        refused = {
            f.version: str(r)
            for f, r in factory.rejections.get(req.name, ())
            if r.reason in JUDGED and Version(f.version.public) > public and req.specifier.contains(f.version, prereleases=None)
        }
        newest = max([*passed, *refused], default=None)
        if newest is not None:
            out.append(WalkBack(root=req, planned=cand.version, newest=newest, refusal=refused.get(newest) if newest not in passed else None))
    return out


def kept_newer_notes(roots: Sequence[Req], mapping: Mapping[Key, Cand], factory: CandidateFactory, policy: Policy) -> tuple[str, ...]:
    """A named package the target has, kept below a newer release (as uv keeps it): what is newer."""
    notes = []
    for req in roots:
        cand = mapping.get(Key(req.name))
        if cand is None or not cand.installed or req.name == TORCH:
            continue
        newer = [c.version for c in factory.matches(req.name, [req], policy) if c.version > cand.version]
        if newer:
            notes.append(
                f"{req.name} {cand.version} is installed and kept; newer {describe_versions(newer)} for this target: --with '{req.name}=={max(newer)}' asks for it"
            )
    return tuple(notes)


def refuse(walked: Sequence[WalkBack], why_not: Callable[[WalkBack], WhyNot | None], *, auto_torch_override: bool = True) -> NoPlanError:
    """The error naming each walk-back: the newest release, the precise cause (``why_not``: the
    resolver's explanation of a plan with exactly that release, or None when it found one), and the
    ways out (the older release asked for explicitly; an override of the requirement in the way)."""
    reasons: list[str] = []
    ways: list[str] = []
    for wb in walked:
        name, newest = wb.root.name, wb.newest
        ways.append(f"{name}: accept the older release explicitly: --with '{name}=={wb.planned}' (or --with '{name}<{newest}')")
        if wb.refusal is not None:
            reasons.append(f"because {name} {newest} is {wb.refusal}, we can conclude that {name} {newest} cannot be planned on this torch")
            ways.append(
                f"{name}: or a build of {name} {newest} for the kept torch: --build {name}, or an index of per-torch builds (--package-index {name}=URL)"
            )
            continue
        why = why_not(wb)
        if why is None:
            reasons.append(
                f"{name} {newest} plans on its own, but not beside the rest of the request: ask for it with --with '{name}=={newest}' to see the plan"
            )
            continue
        # the request's own unversioned roots ("(requested) requires torch (nightly)") add nothing to the cause
        causes = [r for r in why.error.reasons if not r.startswith("(requested) requires")] or why.error.reasons
        reasons += [f"because {r}" for r in causes]
        reasons.append(f"so {why.error.message}, and we can conclude that {name} {newest} cannot be planned")
        ways += [f"{name}: {way}" for way in _overrides_out(why.blocked, auto_torch_override)]
    names = ", ".join(f"{wb.root.name} {wb.newest}" for wb in walked)
    planned = ", ".join(f"{wb.root.name} {wb.planned}" for wb in walked)
    return NoPlanError(
        f"{names}: the newest release for this target cannot be planned; {planned} would be planned instead, and a package you named "
        "is never walked back without your word",
        reasons=reasons,
        hint="the ways out:\n  " + "\n  ".join(ways),
    )


def _overrides_out(blocked: Sequence[NormalizedName], auto_torch_override: bool) -> list[str]:
    """The overrides that would lift the requirements in the way (torch's: the automatic override)."""
    out = [f"or replace every requirement on {b}: --override '{b}==VERSION' (uv's override)" for b in blocked if b != TORCH]
    if TORCH in blocked and not auto_torch_override:
        out.append("or let the kept torch stand in for its torch pin where its binaries run: leave out --no-auto-torch-override")
    return out or ["or replace the requirement in the way: --override 'NAME==VERSION' (uv's override)"]
