"""Which torch versions the resolver may pick: a pure function of the request and the offers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import DowngradeRefused, NoPlanError, UsageError
from ..index.finder import Offer, PageVisit
from ..model import CudaLabel, IndexFile, Target
from ..model.channel import torch_channel
from ..model.request import ResolveRequest, TorchChoice, TorchKind
from ..rules.fit import TargetFit
from ..rules.versions import describe_versions, public, torch_series


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchSelection:
    """The torch versions allowed (newest first), torch's CUDA label, and notes for the plan."""

    choice: TorchChoice  # --torch with ``installed`` made concrete
    cuda: CudaLabel
    installed: Version | None
    allowed: tuple[Version, ...]
    notes: tuple[str, ...] = ()

    @property
    def channel(self) -> str:
        return self.choice.channel

    @property
    def newest(self) -> Version:
        return self.allowed[0]

    @property
    def series(self) -> str:
        return torch_series(self.newest)


def torch_cuda(request: ResolveRequest) -> CudaLabel:
    """Torch's CUDA label: ``--cuda``, else the kept torch's by the one rule (its label, its runtime
    pin, its ``version.py``); they must agree unless ``--change-cuda``."""
    installed = request.installed_torch
    kept = request.installed_torch_cuda
    installed_cuda = kept.label if kept is not None else None
    if request.cuda and kept and request.cuda != installed_cuda and not request.change_cuda:
        raise UsageError(
            f"the installed torch {installed} is built for {installed_cuda} ({kept.words()}), but --cuda {request.cuda} was given",
            hint=f"drop --cuda to keep {installed_cuda}, or add --change-cuda to move torch to {request.cuda}",
        )
    cuda = request.cuda or installed_cuda
    if cuda is None:
        raise _no_cuda_label(request)
    return cuda


def _no_cuda_label(request: ResolveRequest) -> UsageError:
    """Why there is no CUDA label, and what to pass."""
    installed = request.installed_torch
    if installed is not None and request.target.interpreter is None:
        return UsageError(
            f"no CUDA label: the declared torch {installed} has no +cuNNN label, and its METADATA (which pins its CUDA runtime) could not be "
            "read: PyPI's torch page has no wheel of that release for this target (or did not answer: see the warnings above), and the PyTorch "
            "index keeps torch in one folder per CUDA label",
            hint=f"pass --cuda cuNNN (a torch from PyPI pins its CUDA runtime: cuda-toolkit==13.2.2 is cu132), or declare --installed torch=={installed}+cuNNN; "
            "with no network, replay a recorded snapshot (--snapshot DIR)",
        )
    where = f"the target {request.target.interpreter}" if request.target.interpreter else "the target"
    what = "no torch" if installed is None else f"torch {installed}, with no +cuNNN label, CUDA runtime pin or torch/version.py naming CUDA,"
    return UsageError(
        f"no CUDA label: {where} has {what} and --cuda was not given",
        # --installed declares a target's torch; it is refused with an interpreter (which has its own)
        hint="pass --cuda cu130"
        + (" (or --installed torch==VERSION+cuNNN)" if request.target.interpreter is None else ", or install a CUDA build of torch in that environment"),
    )


def select_torch(
    request: ResolveRequest, cuda: CudaLabel, offers: Sequence[Offer], visits: Sequence[PageVisit], fit: TargetFit | None = None
) -> TorchSelection:
    """Torch versions fitting the target, the request and ``cuda``, never lower than the
    installed torch (unless ``--allow-downgrade``); the newest first. ``fit``: the resolve's
    ``TargetFit`` for ``request.target`` (a fresh one when not given)."""
    choice = request.torch_choice
    installed = request.installed_torch
    fit = fit if fit is not None else TargetFit(request.target)
    everything = {o.file.version for o in offers}
    fitting = _fitting(choice, cuda, fit, offers)
    _check_installed_fits(request, offers, fit)
    kept = request.installed_torch_cuda
    # a torch without label that says nothing of its CUDA (a declared one): --cuda says it
    kept_cuda = kept.label if kept else request.cuda if installed is not None and installed.local is None else None
    if installed is not None and _keeps_installed(choice, cuda, installed, kept_cuda):
        fitting = _same_build_kept(fitting, installed, cuda)
        fitting.add(installed)
    if not fitting:
        raise _no_torch(request, cuda, visits, everything)
    if installed is not None and request.keeps_torch_by_default:  # kept: what the channel has is said, not taken
        offered = _fitting(request.torch, cuda, fit, offers)
        notes = (*_newer_without_wheel(request.torch, cuda, request.target, everything, max(offered | fitting)), *kept_notes(request, installed, offered))
    else:
        notes = _newer_without_wheel(choice, cuda, request.target, everything, max(fitting))
    if installed is not None and not request.allow_downgrade:
        fitting = _not_lower(fitting, installed, request)
    _refuse_excluding_override(request, fitting, installed)
    return TorchSelection(choice=choice, cuda=cuda, installed=installed, allowed=tuple(sorted(fitting, reverse=True)), notes=notes)


def kept_notes(request: ResolveRequest, installed: Version, offered: set[Version]) -> tuple[str, ...]:
    """What keeping the installed torch under ``--torch CHANNEL`` (no word to move it) leaves out:
    the channel it is not of, a newer build of that channel (``offered``: the channel's torch
    versions with a wheel for the target)."""
    channel = request.torch.channel
    move = f"--upgrade-package torch moves it to the newest {channel} build, --torch VERSION to one you name"
    notes = []
    kept_channel = torch_channel(installed)
    if kept_channel != channel:  # another channel's newest may be lower than the kept build (a stable 2.11 under a 2.12 nightly)
        move = (
            f"--upgrade-package torch moves it to the newest {channel} build (with --allow-downgrade where that is lower than "
            f"{installed}: torch is never taken backwards unasked), --torch VERSION to one you name"
        )
        notes.append(f"torch {installed} (a {kept_channel} build) is kept: --torch {channel} chooses FlashInfer and the rest for it, not another torch; {move}")
    newer = max((v for v in offered if v > installed and torch_channel(v) == channel), default=None)
    if newer is not None and kept_channel == channel:
        notes.append(f"torch {installed} is kept though {newer} is published ({channel}): {move}")
    elif newer is not None:
        notes.append(f"the newest {channel} torch with a wheel for {target_words(request.target)} is {newer}")
    return tuple(notes)


def kept_way_out(request: ResolveRequest) -> str:
    """How an error made on a torch kept by default names the way to move it."""
    return (
        f"the plan keeps the installed torch {request.installed_torch} (--torch {request.torch.channel} without --upgrade-package torch): "
        f"to let torch move, add --upgrade-package torch (the newest {request.torch.channel} build) or name one with --torch VERSION"
    )


def _no_torch(request: ResolveRequest, cuda: CudaLabel, visits: Sequence[PageVisit], everything: set[Version]) -> NoPlanError:
    """No torch wheel fits: the pages looked at and the versions on them."""
    pages = ", ".join(v.location.url for v in visits) or "(no page)"
    return NoPlanError(
        f"no torch wheel for {target_words(request.target)} and {cuda} matches --torch {request.torch}",
        reasons=[f"looked at {pages}", f"versions there: {describe_versions(everything)}"],
        hint="check --python/--platform and --cuda, or pick another --torch channel",
    )


def _refuse_excluding_override(request: ResolveRequest, allowed: set[Version], installed: Version | None) -> None:
    """An ``--override`` on torch that no allowed torch meets: the conflict is the override and the
    torch the plan must have (the kept one above all), said before anything else is looked up."""
    for text, req in zip(request.overrides, request.override_requirements):
        if canonicalize_name(req.name) != "torch" or (req.marker is not None and not req.marker.evaluate(dict(request.target.markers))):
            continue
        if any(req.specifier.contains(v, prereleases=True) for v in allowed):
            continue
        newest = max(allowed)
        if installed is not None and newest == installed:
            what = f"the installed torch {installed}, which is kept (torch is never taken backwards)"
            hint = f"drop --override {text!r}; to move torch, say so with --torch (lower than installed also needs --allow-downgrade)"
        else:
            what = (
                f"torch {newest}, the newest that --torch {request.torch} allows here"
                if len(allowed) == 1
                else f"every torch --torch {request.torch} allows here ({describe_versions(allowed)})"
            )
            hint = f"drop --override {text!r}, or ask for a torch it allows with --torch"
        raise NoPlanError(f"--override {text!r} conflicts with {what}", hint=hint)


def _check_installed_fits(request: ResolveRequest, offers: Sequence[Offer], fit: TargetFit) -> None:
    """A declared installed torch the index has for this machine, but with no wheel for the declared
    target: the platform's glibc (or the Python) is wrong, and that is what to say, not a FlashInfer
    component it misses."""
    installed = request.installed_torch
    if installed is None or request.target.interpreter is not None:
        return
    files = [o.file for o in offers if o.file.version == installed]
    if not files or any(fit(f) is None for f in files):
        return
    platforms = _platforms(files)
    if not _built_for_machine(platforms, request.target):
        return  # not built for this machine (yet): that is a missing wheel, not a wrong platform
    raise NoPlanError(
        f"the installed torch {installed} has no wheel for {target_words(request.target)}: a target there cannot have it installed",
        reasons=[f"torch {installed} is built for: {', '.join(platforms[:8]) or 'other targets'}"],
        hint=f"check --platform and --python: declare a target torch {installed} has a wheel for",
    )


def _built_for_machine(platforms: Iterable[str], target: Target) -> bool:
    machine = target.platform.split("-", 1)[0]
    return any(p.endswith(machine) for p in platforms)


def _platforms(files: Iterable[IndexFile]) -> list[str]:
    """The platform tags of the wheels among ``files``, sorted."""
    return sorted({t.platform for f in files if f.filename.endswith(".whl") for t in parse_wheel_filename(f.filename)[3]})


def _fitting(choice: TorchChoice, cuda: CudaLabel, fit: TargetFit, offers: Iterable[Offer]) -> set[Version]:
    out: set[Version] = set()
    for offer in offers:
        v = offer.file.version
        if v.local != str(cuda) or fit(offer.file) is not None:
            continue
        if v.is_prerelease and not choice.allows_prereleases:
            continue
        if choice.specifier.contains(v, prereleases=True):
            out.add(v)
    return out


def _keeps_installed(choice: TorchChoice, cuda: CudaLabel, installed: Version, installed_cuda: CudaLabel | None) -> bool:
    """Whether the installed torch is a choice even without a wheel on the index: its CUDA (by the
    one rule: a PyPI torch has no label) is ``cuda``."""
    if installed_cuda != cuda or not choice.specifier.contains(installed, prereleases=True):
        return False
    return choice.channel != "stable" or not installed.is_prerelease or bool(choice.specifier.prereleases)


def _same_build_kept(fitting: set[Version], installed: Version, cuda: CudaLabel) -> set[Version]:
    """``fitting`` without the index's labelled twin of an unlabelled kept torch (PyPI's 2.15.0 is
    the PyTorch index's 2.15.0+cu132): the torch a user has is kept, not swapped for its twin."""
    if installed.local is not None:
        return fitting
    return {v for v in fitting if not (v.public == installed.public and v.local == str(cuda))}


def _newer_without_wheel(choice: TorchChoice, cuda: CudaLabel, target: Target, everything: set[Version], best: Version) -> tuple[str, ...]:
    """A note when a bare ``nightly`` had to skip newer nightlies that have no wheel for the target."""
    same_kind = (v for v in everything if v.local == str(cuda) and v.is_prerelease == best.is_prerelease)
    newest = max(same_kind, default=None)
    if newest is not None and newest > best and choice.channel == "nightly" and not len(choice.specifier):
        return (f"torch {newest} has no wheel for {target_words(target)}; the newest nightly that does is {best}",)
    return ()


def _not_lower(fitting: set[Version], installed: Version, request: ResolveRequest) -> set[Version]:
    floor_ok = {v for v in fitting if not _lower(v, installed, public_only=request.change_cuda)}
    if not floor_ok:
        best = max(fitting)
        raise DowngradeRefused(
            f"--torch {request.torch} would downgrade torch from {installed} to {best}",
            reasons=[f"torch is never taken backwards (PEP 440: {best} < {installed})"],
            hint="keep it (drop --upgrade-package torch, or --torch installed), "
            + ("" if request.torch.channel == "nightly" and request.torch.kind is TorchKind.CHANNEL else "ask for a newer channel (--torch nightly), ")
            + "or pass --allow-downgrade if you really mean it",
        )
    return floor_ok


def _lower(v: Version, installed: Version, *, public_only: bool) -> bool:
    return public(v) < public(installed) if public_only else v < installed


def target_words(target: Target) -> str:
    return f"Python {target.python_version} on {target.platform}"
