"""The verdict that let each compiled wheel into a plan, re-derived from the file that is installed
(I/O edge: the wheel cache on disk, the target's torch on disk).

A plan's verdicts come from range reads of the index's file (``net/scan/classify.py``), a snapshot, or a
lock a pull request may have edited. None of those bytes is the file uv installs: that one is
downloaded whole and checked against its sha256 (``net/download.py``). So before anything is
installed (``install``, ``install --lock``), every compiled wheel (a platform tag, not ``-any``) is
read again from that verified file, from its start, locally (``scan/wheelscan.scan_file``, the
scan every door uses, never entered at a member's end, and here never judging a member by the
names in its first bytes: every member's libraries from its dynamic section), judged against the torch it will run on
(``rules/abi.judge``: the kept torch's exports read from its libraries on disk; a torch the plan
installs from its downloaded wheel), and compared with the verdict the plan carries. A wheel the
plan lets in that the file's own reading refuses, or reads as another kind, refuses the install,
naming both readings (``VerdictMismatch``, exit 1); nothing is installed. ``wheelhouse`` does the
same for every lock it publishes, before it writes a page or a lock (the kept torch is on the
nodes: a version-locked wheel's imports are confirmed there, by ``install --lock``).
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..data.definitions import Definitions
from ..errors import VerdictMismatch
from ..model import Action, Coupling, LockedPackage, LockPlan
from ..model.abi import UNKNOWN, AbiVerdict, WheelAbi
from ..model.cuda import CudaLabel
from ..net.download import Downloader, DownloadProgress, WheelCache, fetch_packages
from ..rules.abi import AbiPolicy, AbiTorch, TorchExports, asks_for_exports, judge, torch_floor
from ..rules.invariants import plan_torch_cuda
from ..scan import zipmeta
from ..scan.elf import ElfError, torch_libs
from ..scan.elfstream import ElfStream
from ..scan.wheelscan import scan_file
from .exports import installed_torch_exports
from .probe import Environment

TORCH = canonicalize_name("torch")
MAX_METADATA = 2**20
LOCAL_TIME_LIMIT = 60.0  # seconds of the scanner's work per wheel: every member is read by its structure, from disk


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmed:
    """One compiled wheel read again from its verified file: the plan's verdict and the file's."""

    package: str  # "evilkern 1.0"
    recorded: AbiVerdict | None
    coupling: Coupling
    local: AbiVerdict
    agrees: bool
    abi: WheelAbi | None = None  # what the file's members import, read from its start (a wheelhouse publishes it as a scan record)
    filename: str | None = None


def is_compiled(filename: str | None) -> bool:
    """Whether a wheel's tag says it holds compiled code (not ``py3-none-any``)."""
    return bool(filename) and filename is not None and filename.endswith(".whl") and not filename.endswith("-any.whl")


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirming:
    """What confirming a plan's compiled wheels before uv installs them takes (``install`` and
    ``install --lock`` hand the plan to uv, which downloads it again: the same bytes, by sha256)."""

    defs: Definitions
    wheel_cache: WheelCache
    fetcher: Downloader | None
    progress: DownloadProgress | None = None
    offline: bool = False

    def confirm(self, plan: LockPlan, local_path: Callable[[str], Path | None], environment: Environment) -> list[Confirmed]:
        """Fetch and verify every compiled wheel ``plan`` installs (one whose URL ``local_path``
        finds on disk, a lock's ``path``, read where it lies once its sha256 is the locked one: a
        file that is not is uv's to refuse), then ``confirm_verdicts``."""
        files: dict[str, Path] = {}
        remote = []
        for pkg in plan.packages:
            if pkg.action is Action.KEEP or not pkg.url or not is_compiled(pkg.filename):
                continue
            local = local_path(pkg.url)
            if local is None:
                remote.append(pkg)
            elif pkg.sha256 and _sha256_of(local) == pkg.sha256.lower():
                files[pkg.name] = local
        if not files and not remote:
            return []
        with self.wheel_cache.in_use():
            fetched = fetch_packages(remote, cache=self.wheel_cache, fetcher=self.fetcher, progress=self.progress, offline=self.offline)
            files.update({name: wheel.path for name, wheel in fetched.items()})
            return confirm_verdicts(plan, files, environment, self.defs)


def _sha256_of(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(2**20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def confirm_verdicts(
    plan: LockPlan, files: Mapping[str, Path], environment: Environment | None, defs: Definitions, *, doing: str = "install"
) -> list[Confirmed]:
    """Every compiled wheel of ``plan`` in ``files`` (package name -> its verified file) judged from
    that file; ``VerdictMismatch`` when one the plan lets in does not hold there. ``environment``:
    the target (its torch's exports on disk); None (a wheelhouse, made away from its nodes): the
    plan's own torch, its exports from its wheel when the plan installs it, else not at hand (a
    version-locked wheel's imports are then confirmed by ``install --lock`` on each node)."""
    torch = _torch_of(plan, files, environment)
    policy = AbiPolicy.of(defs.abi)
    out = []
    for pkg in plan.packages:
        path = files.get(pkg.name)
        if pkg.action is Action.KEEP or path is None or pkg.name == TORCH or not is_compiled(pkg.filename or path.name):
            continue
        abi, floor = local_abi(path, defs)
        local = judge(pkg.name, abi, torch, policy, version=pkg.version, requires_floor=floor)
        unread = torch is not None and asks_for_exports(pkg.name, pkg.version, abi, torch, policy) and not _exports_at_hand(torch)
        out.append(
            Confirmed(
                package=f"{pkg.name} {pkg.version}",
                recorded=pkg.abi,
                coupling=pkg.coupling,
                local=local,
                agrees=_agrees(pkg, local, exports_unread=unread),
                abi=abi,
                filename=path.name,
            )
        )
    wrong = [c for c in out if not c.agrees]
    if wrong:
        raise VerdictMismatch(
            f"{doing} refused: {len(wrong)} compiled wheel{'s' * (len(wrong) != 1)} read from the downloaded file "
            f"do not run as the plan says (nothing was {'installed' if doing == 'install' else 'published'})",
            reasons=[f"{c.package}: planned as {describe(c.recorded, c.coupling)}; its verified file, read from its start: {describe(c.local)}" for c in wrong],
            hint="the index served range reads that disagree with the file, or the lock was edited: resolve again, and report the wheel",
        )
    return out


def _exports_at_hand(torch: AbiTorch) -> bool:
    return torch.exports is not None and torch.exports().symbols is not None


def _agrees(pkg: LockedPackage, local: AbiVerdict, *, exports_unread: bool = False) -> bool:
    """Whether the file's reading lets ``pkg`` in as the plan does: a plan that lets it in (no
    verdict, or one without a refusal, unless planned despite it with ``--abi-mismatch warn``)
    needs the file's verdict without a refusal, and of the same kind (``exports_unread``: the
    torch's exports are not at hand, so a version-locked wheel's kind alone is confirmed)."""
    recorded = pkg.abi
    if recorded is not None and recorded.refusal is not None:
        return True  # planned despite a refusal (--abi-mismatch warn): nothing rests on "runs"
    if recorded is None:  # a plan that judged it needing no torch says so by its coupling (the torch family, by the data, claims no kind)
        claims_kind = pkg.coupling in (Coupling.AGNOSTIC, Coupling.CUDA) and local.kind is not None
    else:
        claims_kind = recorded.kind != local.kind
    if exports_unread:
        return not claims_kind
    return local.refusal is None and not claims_kind


def describe(verdict: AbiVerdict | None, coupling: Coupling | None = None) -> str:
    if verdict is None:
        return f"{coupling.value if coupling is not None else 'not judged'} (no verdict recorded)"
    kind = verdict.kind.value if verdict.kind is not None else "no torch linked"
    if verdict.unverified and verdict.refusal is None:  # a guess from the names in its first bytes: never said to run
        return f"{coupling.value if coupling is not None else kind}, unverified (judged from the library names in its first bytes)"
    return f"{kind}, {'runs' if verdict.refusal is None else 'refused: ' + verdict.refusal}"


def local_abi(path: Path, defs: Definitions) -> tuple[WheelAbi, str | None]:
    """What the wheel at ``path`` imports, read from its start, and the torch floor its METADATA's
    ``Requires-Dist`` sets."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            scan = scan_file(fh, size, structural=True, time_limit=LOCAL_TIME_LIMIT)
        with zipfile.ZipFile(path) as zf:
            floor = torch_floor(_requires(zf))
    except (OSError, zipmeta.ZipError, zipfile.BadZipFile, ValueError) as exc:
        return WheelAbi(kind=UNKNOWN, why=f"not read: {exc}"), None
    return scan.abi(defs.abi), floor


def _requires(zf: zipfile.ZipFile) -> list[str]:
    names = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1 or zf.getinfo(names[0]).file_size > MAX_METADATA:
        return []
    text = zf.read(names[0]).decode("utf-8", errors="replace")
    head = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines() if line.lower().startswith("requires-dist:")]


def _torch_of(plan: LockPlan, files: Mapping[str, Path], environment: Environment | None) -> AbiTorch | None:
    """The torch the plan's wheels will run on: the one the plan installs (its exports from its
    downloaded wheel), else the one installed (from its libraries on disk); None: no torch."""
    row = next((p for p in plan.packages if p.name == TORCH), None)
    installed = environment.distributions.get(TORCH) if environment is not None else None
    if row is not None and row.action is not Action.KEEP:
        version, wheel, site = row.version, files.get(TORCH), None
    elif installed is not None:
        version, wheel, site = installed.version, None, installed.location
    elif row is not None:  # a wheelhouse: the kept torch is on the nodes, not here
        version, wheel, site = row.version, None, None
    else:
        return None
    memo: list[TorchExports] = []

    def exports() -> TorchExports:
        if not memo:
            if wheel is not None:
                memo.append(wheel_exports(wheel, str(version)))
            elif site is not None:
                memo.append(installed_torch_exports(site, str(version)))
            else:
                memo.append(TorchExports(version=str(version), symbols=None, source="neither its wheel nor its folder is at hand"))
        return memo[0]

    label = CudaLabel.of_torch(version) or plan_torch_cuda(plan)  # PyPI's torch has no label: the plan's CUDA (its runtime pin)
    return AbiTorch(version=version, cuda_major=label.major if label else None, exports=exports)


def wheel_exports(path: Path, version: str) -> TorchExports:
    """The exports of the torch libraries in the wheel at ``path``, read by their structure from the
    file (each member inflated as a stream from its start, never entered at its end)."""
    symbols: set[str] = set()
    try:
        with zipfile.ZipFile(path) as zf:
            members = [i for i in zf.infolist() if i.filename.startswith("torch/lib/")]
            names = set(torch_libs(i.filename.rsplit("/", 1)[-1] for i in members))
            chosen = [i for i in members if i.filename.rsplit("/", 1)[-1] in names]
            for info in chosen:
                symbols |= set(_member_exports(zf, info))
    except (OSError, zipfile.BadZipFile, ElfError, ValueError) as exc:
        return TorchExports(version=version, symbols=None, source=f"{path.name}: {exc}")
    if not chosen:
        return TorchExports(version=version, symbols=None, source=f"no torch libraries in {path.name}")
    return TorchExports(version=version, symbols=frozenset(symbols), source=f"{len(chosen)} libraries of torch in {path.name}")


def _member_exports(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterable[str]:
    """One member's defined dynamic symbols: its inflated bytes read where its structure points."""
    stream = ElfStream(zipmeta.STORED, info.file_size, info.file_size, exports=True, sections=True, seek=False)
    with zf.open(info) as fh:
        while (span := stream.wanted()) is not None:
            fh.seek(span[0])
            data = fh.read(span[1] - span[0])
            if not data:
                raise ElfError(f"{info.filename} ends before byte {span[1]}")
            stream.feed(span[0], data)
    found = stream.structure
    if found is None or found.symbols is None:
        raise ElfError(f"{info.filename}: {stream.error or 'no symbols'}")
    return found.symbols.exports


__all__ = ["Confirmed", "Confirming", "confirm_verdicts", "describe", "is_compiled", "local_abi", "wheel_exports"]
