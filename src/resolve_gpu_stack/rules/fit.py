"""Which wheels fit a target and a torch: tags, Requires-Python, the torch ABI of a FlashInfer AOT
build and a CUDA label. Pure; the resolver's candidate factory, the ``candidates`` command and
``doctor`` judge with these rules, in these words.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from ..data.rules import PerTorchRule
from ..model import Coupling, IndexFile, Target
from ..model.cuda import CudaLabel
from .versions import torch_series


class RejectReason(str, enum.Enum):
    NOT_A_WHEEL = "not a wheel"
    TAGS = "built for another platform or Python"
    REQUIRES_PYTHON = "requires another Python"
    YANKED = "yanked"
    PRERELEASE = "pre-release not asked for"
    TORCH_ABI = "built for another torch"
    CUDA = "built for another CUDA"
    ABI = "its shared objects cannot be shown to run with this torch"
    SPECIFIER = "outside the requested range"
    NEWER = "uploaded after --exclude-newer"
    QUARANTINED = "quarantined by its index (PEP 792)"
    VARIANT = "a variant wheel (PEP 825, a draft)"
    VARIANT_METADATA = "a variant wheel whose variants.json cannot be used"


def uploaded_after(upload_time: str | None, day: str | None) -> Rejection | None:
    """A file uploaded after ``day`` (``--exclude-newer YYYY-MM-DD``: files uploaded on or before
    that day, UTC, by PEP 700's upload-time) is no candidate; a file without an upload time is
    not cut (its page is said, ``resolver/reachability``'s sibling note)."""
    if day is None or upload_time is None or upload_time[:10] <= day:
        return None
    return Rejection(RejectReason.NEWER, f"uploaded {upload_time[:10]}, after {day}")


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a file does not fit a target: the reason and its detail."""

    reason: RejectReason
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value


class TargetFit:
    """Whether a file can be installed on one target at all (tags, Requires-Python), with what it
    worked out kept for the next file: ``{tag: position}`` of the target's tag list (hundreds of
    tags; a wheel has one to three, so looking them up is ~100x cheaper than scanning the list),
    the best position per set of wheel tags (a page repeats a few sets on every row), the
    rejection per refused tag set and the verdict per Requires-Python text.

    One per target, owned by whoever judges for it (the resolver's candidate factory): it lives
    and dies with that target, and two resolves never share one by accident.
    """

    __slots__ = ("target", "tag_set", "_ranks", "_best", "_tag_rejections", "_python")

    def __init__(self, target: Target) -> None:
        self.target = target
        ranks: dict[Tag, int] = {}
        for i, tag in enumerate(target.tags):
            ranks.setdefault(tag, i)
        self._ranks = ranks
        self.tag_set = frozenset(ranks)  # the finder's key for the wheels worth reading (``Finder.offers``)
        self._best: dict[frozenset[Tag], int | None] = {}
        self._tag_rejections: dict[frozenset[Tag], Rejection] = {}
        self._python: dict[str, bool] = {}

    def judges_like(self, target: Target) -> bool:
        """Whether this fit gives ``target``'s files the same verdicts (the same tags and Python)."""
        return self.target.tags is target.tags and self.target.python_full_version == target.python_full_version

    def tag_rank(self, file: IndexFile) -> int | None:
        """Position of the best target tag this wheel carries (lower is better); None if none fits."""
        return self.rank_of(file.tags)

    def rank_of(self, tags: frozenset[Tag]) -> int | None:
        """Position of the best target tag among a wheel's ``tags`` (lower is better); None if none fits."""
        try:
            return self._best[tags]
        except KeyError:
            pass
        best = None
        for tag in tags:
            rank = self._ranks.get(tag)
            if rank is not None and (best is None or rank < best):
                best = rank
        self._best[tags] = best
        return best

    def __call__(self, file: IndexFile) -> Rejection | None:
        """Whether the file can be installed on the target at all (tags, Requires-Python)."""
        if not file.is_wheel:
            return Rejection(RejectReason.NOT_A_WHEEL, file.filename)
        if self.tag_rank(file) is None:
            return self._tags_rejection(file.tags)
        return self.python_rejection(file)

    def python_rejection(self, file: IndexFile) -> Rejection | None:
        """The file's Requires-Python excludes the target's Python (a wheel's, or an sdist's to build)."""
        if file.requires_python and self._python_excluded(file.requires_python):
            return Rejection(RejectReason.REQUIRES_PYTHON, file.requires_python)
        return None

    def _tags_rejection(self, tags: frozenset[Tag]) -> Rejection:
        """The rejection of a wheel whose tags fit nowhere on the target, naming three of them."""
        known = self._tag_rejections.get(tags)
        if known is None:
            known = self._tag_rejections[tags] = Rejection(RejectReason.TAGS, ", ".join(sorted(str(t) for t in tags)[:3]))
        return known

    def _python_excluded(self, requires_python: str) -> bool:
        """Whether Requires-Python excludes the target's Python. An unparsable Requires-Python is
        ignored, as pip and uv do."""
        known = self._python.get(requires_python)
        if known is None:
            try:
                known = not SpecifierSet(requires_python).contains(self.target.python_full_version, prereleases=True)
            except InvalidSpecifier:
                known = False
            self._python[requires_python] = known
        return known


def torch_abi_mismatch(coupling: Coupling, why: str, file_version: Version, torch: Version | None) -> Rejection | None:
    """A FlashInfer AOT wheel (``+cu124torch2.5``) only fits a torch of that exact series."""
    if coupling is not Coupling.TORCH_ABI or not file_version.local:
        return None
    local = file_version.local
    if "torch" not in local:
        return None
    built_for = local.split("torch", 1)[1]
    if torch is None:
        return Rejection(RejectReason.TORCH_ABI, f"{why}; no torch in the plan")
    if torch.is_devrelease or torch.is_prerelease:
        return Rejection(RejectReason.TORCH_ABI, f"built for torch {built_for}, not a torch nightly")
    if torch_series(torch) != built_for:
        return Rejection(RejectReason.TORCH_ABI, f"built for torch {built_for}, torch is {torch}")
    return None


def nightly_date(version: Version) -> int | None:
    """The ``YYYYMMDD`` of a nightly's ``.devYYYYMMDD`` (None for anything else)."""
    dev = version.dev
    return dev if dev is not None and 19000101 <= dev <= 99991231 else None


def family_date_mismatch(rule: str | None, file_version: Version, torch: Version | None) -> Rejection | None:
    """A torch-family nightly that names no torch (components.toml ``[pytorch] built-for`` ``date``:
    torchao, torchcodec) fits only the torch nightly of its own day."""
    day = nightly_date(file_version)
    if rule != "date" or day is None or torch is None:
        return None
    torch_day = nightly_date(torch)
    if torch_day is None:
        return Rejection(RejectReason.TORCH_ABI, f"a nightly built on {day} against that day's torch; torch is the release {torch}")
    if torch_day != day:
        return Rejection(RejectReason.TORCH_ABI, f"a nightly built on {day} against that day's torch; torch is the nightly of {torch_day}")
    return None


def per_torch_mismatch(rule: PerTorchRule | None, file_version: Version, torch: Version | None, cuda: CudaLabel | None) -> Rejection | None:
    """A build whose local label names its torch (components.toml ``[per-torch]``, in any of its
    dialects: ``+cu12torch2.9cxx11abiTRUE``, ``+cu.12.8.torch.2.11``, ``+pt29cu128``) fits a
    released torch of that series, a CUDA it runs under, and torch's C++11 ABI setting; None when
    the label names no torch, or it fits."""
    built_for = rule.built_for(file_version.local) if rule is not None else None
    if built_for is None or rule is None:
        return None
    built = f"+{file_version.local}"
    return (
        _series_mismatch(built, built_for.torch, torch)
        or _build_cuda_mismatch(built, built_for.cuda, cuda)
        or _cxx11_mismatch(built, built_for.cxx11abi, torch, rule)
    )


def _series_mismatch(built: str, series: str, torch: Version | None) -> Rejection | None:
    """A build for torch ``series`` fits a released torch of that series only."""
    if torch is None:
        return Rejection(RejectReason.TORCH_ABI, f"{built} is built for torch {series}; no torch in the plan")
    if torch.is_devrelease or torch.is_prerelease:
        return Rejection(RejectReason.TORCH_ABI, f"{built} is built for the torch {series} release, torch is the pre-release {torch}")
    if torch_series(torch) != series:
        return Rejection(RejectReason.TORCH_ABI, f"{built} is built for torch {series}, torch is {torch}")
    return None


def _build_cuda_mismatch(built: str, digits: str, cuda: CudaLabel | None) -> Rejection | None:
    """A build for CUDA ``digits`` (``12``: a major; ``128``: a label) must run under torch's ``cuda``."""
    if cuda is None:
        return None
    label = CudaLabel.parse(f"cu{digits}") if len(digits) > 2 else None
    fits = label.serves(cuda) if label is not None else int(digits) == cuda.major
    if fits:
        return None
    return Rejection(RejectReason.CUDA, f"{built} is built for CUDA {digits if label is None else f'{label.major}.{label.minor}'}, torch for {cuda}")


def _cxx11_mismatch(built: str, abi: str | None, torch: Version | None, rule: PerTorchRule) -> Rejection | None:
    """A build's C++11 ABI setting (``cxx11abiTRUE``) must be torch's."""
    if abi is None or torch is None or (abi == "true") == (torch >= rule.cxx11_abi_since):
        return None
    return Rejection(RejectReason.TORCH_ABI, f"{built} uses {'the C++11' if abi == 'true' else 'the old'} C++ ABI, torch {torch} the other")


def cuda_mismatch(coupling: Coupling, file_version: Version, cuda: CudaLabel | None, *, label_required: bool = False) -> Rejection | None:
    """A torch wheel must carry exactly torch's CUDA label; a CUDA-bound wheel with a local label
    (jit-cache and its providers: ``+cu130``) a label that torch's CUDA serves (same major, not
    newer), and one whose builds always carry a label (``label_required``) must have one. A
    CUDA-bound wheel without a label (NVIDIA's libraries: the major is in the name, and torch pins
    them exactly) is left to the requirements. None: nothing to refuse."""
    if cuda is None:
        return None
    local = file_version.local
    if coupling is Coupling.TORCH and local != str(cuda):
        return Rejection(RejectReason.CUDA, f"+{local or '(no label)'}, torch is built for {cuda}")
    if coupling is Coupling.CUDA and (local or label_required):
        return _label_mismatch(local, cuda)
    return None


def _label_mismatch(local: str | None, cuda: CudaLabel) -> Rejection | None:
    label = CudaLabel.parse(local)
    if label is None or not label.serves(cuda):
        return Rejection(RejectReason.CUDA, f"+{local or '(no label)'} does not run under {cuda}")
    return None


__all__ = [
    "RejectReason",
    "Rejection",
    "TargetFit",
    "uploaded_after",
    "cuda_mismatch",
    "family_date_mismatch",
    "nightly_date",
    "per_torch_mismatch",
    "torch_abi_mismatch",
]
