"""Which installed packages are bound to torch's C++ ABI, do their shared objects fit the installed
torch, and do they import (I/O edge: disk, subprocess).

Statically first (``static_verdicts``): every installed ``.so`` that links torch or needs a CUDA
runtime is read from disk (its dynamic symbols, mapped, not read whole) and judged against the
installed torch as a wheel is before it is planned (``rules/abi.py``): its C++ imports against the
exports of the installed torch's libraries, its CUDA majors against torch's. A package refused
there is not imported (an import of a mismatched extension can crash the interpreter).

A package is torch-ABI-bound when the data says so (``indexes/components.toml``), when its METADATA
pins torch exactly and it ships shared objects, or when one of its installed shared objects needs
``libtorch*`` / ``libc10*`` (its dynamic section read with ``scan/elf/``, from the file mapped).
RECORD is read once per package and its entries are joined as text to the site folder, never
resolved one by one. Each such package's top-level modules are then imported in the target, one interpreter
per package (a crash in one hides no other): an ``undefined symbol`` ImportError is the mark of a
binary built for another torch. ``doctor`` reports the outcomes (``env/doctor.py``).
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..data.definitions import Definitions
from ..model import Coupling
from ..model.abi import CUDA, UNKNOWN, AbiVerdict, MemberAbi, WheelAbi
from ..model.abi import TORCH as TORCH_LINKED
from ..model.kept import KeptTorch
from ..net import process
from ..rules.abi import AbiPolicy, AbiTorch, TorchExports, judge, torch_floor
from ..scan import elf
from ..scan.abi import member_abi
from ..scan.wheelscan import is_shared_object
from .exports import installed_torch_exports, mapped_symbols
from .probe import Environment, InstalledDistribution

TORCH = canonicalize_name("torch")
_SENTINEL = "@@resolve-gpu-stack-abi-import@@"
_SCRIPT = f"""
import importlib, json, sys
for module in sys.argv[1:]:
    try:
        importlib.import_module(module)
        error = None
    except BaseException as exc:
        error = f"{{type(exc).__name__}}: {{exc}}"
    print({_SENTINEL!r} + json.dumps({{"module": module, "error": error}}), flush=True)
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiPackage:
    """An installed torch-ABI-bound package: what says so, and the modules to import."""

    name: str
    version: str
    why: str
    modules: tuple[str, ...]
    needs_driver: str | None = None  # a shared object of it that needs the NVIDIA driver's libcuda (its name): no import without one


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticVerdict:
    """An installed package's shared objects judged against the installed torch, before any import."""

    package: str  # "sgl-kernel 0.3.21"
    name: str
    members: tuple[str, ...]  # the shared objects judged (site-packages relative)
    verdict: AbiVerdict
    unreadable: tuple[str, ...] = ()  # members whose symbols could not be read (why)


def static_verdicts(env: Environment, defs: Definitions) -> list[StaticVerdict]:
    """Every installed package besides torch whose shared objects link torch or need a CUDA
    runtime, judged against the installed torch (its exports read once, from its libraries)."""
    torch = env.distributions.get(TORCH)
    if torch is None:
        return []
    label = KeptTorch.installed(torch.version, env.target, tuple(torch.requires_dist)).label  # PyPI's torch: its runtime pin, its version.py
    exports_memo: list[TorchExports] = []

    def exports() -> TorchExports:
        if not exports_memo:
            site = torch.location
            exports_memo.append(
                installed_torch_exports(site, str(torch.version))
                if site is not None
                else TorchExports(version=str(torch.version), symbols=None, source="torch's folder is not known")
            )
        return exports_memo[0]

    subject = AbiTorch(version=torch.version, cuda_major=label.major if label else None, exports=exports)
    policy = AbiPolicy.of(defs.abi)
    out = []
    for dist in sorted(env.distributions.values(), key=lambda d: d.name):
        if dist.name == TORCH:
            continue
        abi, names, unreadable = _installed_abi(dist, defs)
        if abi is None:
            continue
        out.append(
            StaticVerdict(
                package=f"{dist.name} {dist.version}",
                name=dist.name,
                members=names,
                unreadable=unreadable,
                verdict=judge(dist.name, abi, subject, policy, version=dist.version, requires_floor=torch_floor(dist.requires_dist)),
            )
        )
    return out


def _installed_abi(dist: InstalledDistribution, defs: Definitions) -> tuple[WheelAbi | None, tuple[str, ...], tuple[str, ...]]:
    """What ``dist``'s shared objects import (None: none links torch or needs CUDA)."""
    base = dist.location.resolve() if dist.location is not None else None
    members: list[MemberAbi] = []
    cuda_only: list[MemberAbi] = []  # each member that needs CUDA without linking torch, with its majors (as the wheel scan keeps them)
    names: list[str] = []
    unreadable: list[str] = []
    majors: set[int] = set()
    for path in record_files(dist).shared_objects():
        name = str(path.relative_to(base)) if base is not None and base in path.parents else path.name
        try:
            libs, symbols = mapped_symbols(path, torch_linked=True)
        except (OSError, elf.ElfError) as exc:
            unreadable.append(f"{name}: {exc}")
            continue
        assert libs is not None  # asked for: torch_linked
        majors |= set(libs.cuda_majors)
        if libs.torch_libs:
            members.append(member_abi(name, libs, symbols, defs.abi))
            names.append(name)
        elif libs.cuda_libs:
            cuda_only.append(MemberAbi(name=name, cuda_majors=libs.cuda_majors))
            names.append(name)
    if unreadable:
        return WheelAbi(kind=UNKNOWN, why="; ".join(unreadable)), tuple(names), tuple(unreadable)
    if members:
        return (
            WheelAbi(kind=TORCH_LINKED, why=f"{len(members)} installed shared object(s) link torch", members=tuple(members), cuda_majors=tuple(sorted(majors))),
            tuple(names),
            (),
        )
    if majors:
        # twins per CUDA major (``torch_memory_saver_hook_mode_preload_cu12`` / ``_cu13``) are told
        # apart by their members, as rules.abi does for the wheel: the build for torch's major decides
        return (
            WheelAbi(kind=CUDA, why="installed shared objects need a CUDA runtime", members=tuple(cuda_only), cuda_majors=tuple(sorted(majors))),
            tuple(names),
            (),
        )
    return None, (), ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOutcome:
    package: str  # "sgl-kernel 0.3.21"
    module: str
    error: str | None = None  # None: imported

    @property
    def undefined_symbol(self) -> bool:
        return self.error is not None and "undefined symbol" in self.error

    @property
    def no_driver(self) -> bool:
        """The import failed because the NVIDIA driver's libcuda is not on this host (a build or CI
        machine), not because the binary is wrong."""
        return self.error is not None and "libcuda.so" in self.error and "cannot open shared object file" in self.error


def torch_abi_packages(env: Environment, defs: Definitions) -> list[AbiPackage]:
    """Every installed package besides torch that is bound to torch's ABI, by name."""
    out = []
    for dist in sorted(env.distributions.values(), key=lambda d: d.name):
        if dist.name == TORCH:
            continue
        files = record_files(dist)
        objects = files.shared_objects()
        needed: dict[Path, tuple[str, ...]] = {}  # each shared object's DT_NEEDED, read once for both questions

        def needs(path: Path, memo: dict[Path, tuple[str, ...]] = needed) -> tuple[str, ...]:
            if path not in memo:
                memo[path] = _needed(path)
            return memo[path]

        why = _bound(dist, objects, defs, needs)
        if why is not None:
            out.append(
                AbiPackage(name=dist.name, version=str(dist.version), why=why, modules=files.top_level_modules(), needs_driver=_driver_library(objects, needs))
            )
    return out


DRIVER_LIBRARY = "libcuda.so"  # the NVIDIA driver's own library (libcuda.so.1): present only where the driver is


def _driver_library(objects: Sequence[Path], needs: Callable[[Path], tuple[str, ...]]) -> str | None:
    """The first of the shared ``objects`` that needs the driver's libcuda (DT_NEEDED), by name."""
    for path in objects:
        if any(n.startswith(DRIVER_LIBRARY) for n in needs(path)):
            return path.name
    return None


def _needed(path: Path) -> tuple[str, ...]:
    """The libraries the shared object at ``path`` needs, from the file mapped (only the pages its
    headers and dynamic section lie on are read); none when it cannot be read."""
    try:
        size = path.stat().st_size
        if size == 0:
            return ()
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return elf.needed_libraries(data, file_size=size).needed  # type: ignore[arg-type]
    except (OSError, ValueError, elf.ElfError):
        return ()


def _bound(dist: InstalledDistribution, objects: Sequence[Path], defs: Definitions, needs: Callable[[Path], tuple[str, ...]]) -> str | None:
    coupling, why = defs.coupling(dist.name, dist.version)
    if coupling is Coupling.TORCH_ABI:
        return why
    if not objects:
        return None
    pin = _torch_pin(dist)
    if pin is not None:
        return f"METADATA pins {pin} and the package ships shared objects"
    for path in objects:
        torch = elf.torch_libs(needs(path))
        if torch:
            return f"{path.name} needs {torch[0]}"
    return None


def _torch_pin(dist: InstalledDistribution) -> str | None:
    for text in dist.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        specs = list(req.specifier)
        if canonicalize_name(req.name) == TORCH and not req.marker and len(specs) == 1 and specs[0].operator in ("==", "==="):
            return str(req)
    return None


@dataclass(frozen=True, slots=True)
class RecordFiles:
    """The files a distribution's RECORD lists: its site folder (resolved once) and each entry's
    path there, normalised by its text (``../../bin/x`` leaves the folder). No entry is resolved
    on disk one by one: a live SGLang venv's RECORDs list 63,000 files, and a ``resolve()`` (an
    ``lstat`` per part) and a ``Path`` each took doctor 5 s of its 18."""

    root: Path | None
    names: tuple[str, ...]  # site-relative, "/"-separated

    def paths(self) -> list[Path]:
        return [] if self.root is None else [self.root / n for n in self.names]

    def shared_objects(self) -> list[Path]:
        """The shared objects among the files, as absolute paths."""
        root = self.root
        return [] if root is None else [root / n for n in self.names if is_shared_object(n.rsplit("/", 1)[-1])]

    def top_level_modules(self) -> tuple[str, ...]:
        """The importable top-level names: packages and modules directly under site-packages."""
        return tuple(sorted({name for n in self.names if (name := _top_level(tuple(n.split("/")))) is not None}))


def record_files(dist: InstalledDistribution) -> RecordFiles:
    """``dist``'s RECORD read (no files without one, or where it cannot be read)."""
    record, base = dist.record, dist.location
    if record is None or base is None:
        return RecordFiles(None, ())
    try:
        lines = record.read_text(encoding="utf-8").splitlines()
    except OSError:
        return RecordFiles(None, ())
    root = base.resolve()
    names = (os.path.normpath(line.split(",", 1)[0]).replace(os.sep, "/") for line in lines if line.strip())
    return RecordFiles(root, tuple(n for n in names if n != "." and not n.startswith(("../", "/")) and n != ".."))


def _top_level(parts: tuple[str, ...]) -> str | None:
    """The importable name a file directly under site-packages (``parts``: its path there) makes."""
    first = parts[0]
    if first.endswith((".dist-info", ".egg-info", ".data")) or first == "__pycache__" or first.startswith("."):
        return None
    if len(parts) > 1:
        return first if first.isidentifier() else None
    if first.endswith(".py") or is_shared_object(first):
        stem = first.split(".", 1)[0]
        return stem if stem.isidentifier() else None
    return None


def import_packages(python: str, packages: Sequence[AbiPackage], env: Mapping[str, str], *, timeout: float) -> list[ImportOutcome]:
    """Import each package's modules in ``python``, from an empty cwd: all of them in one
    interpreter first (torch is loaded once, not once per package: the live SGLang stack's
    imports took 84 s one interpreter each), then each package whose import failed there, or
    that the interpreter did not reach, again in an interpreter of its own, so a failure (or a
    crash) is always its own and never another package's doing. An import that succeeds beside
    the others is taken as it is: a package that imports only because another one loaded what it
    needs first is not told apart (the cost of loading torch once)."""
    wanted = [p for p in packages if p.modules]
    with tempfile.TemporaryDirectory(prefix="rgs-doctor-abi-") as cwd:
        together = _import_modules(python, [m for p in wanted for m in p.modules], env, cwd, timeout * max(1, len(wanted)))
        out: list[ImportOutcome] = []
        for pkg in wanted:
            label = f"{pkg.name} {pkg.version}"
            if all(m in together and together[m] is None for m in pkg.modules):
                out += [ImportOutcome(package=label, module=m) for m in pkg.modules]
                continue
            alone = _import_modules(python, list(pkg.modules), env, cwd, timeout)
            out += [ImportOutcome(package=label, module=m, error=alone.get(m, "no answer")) for m in pkg.modules]
    return out


def _import_modules(python: str, modules: list[str], env: Mapping[str, str], cwd: str, timeout: float) -> dict[str, str | None]:
    """Each of ``modules`` imported in order in one ``python``: module -> None (imported) or the
    error; a module the interpreter did not reach (it crashed, or ran out of time) gets why."""
    try:
        proc = process.run([python, "-c", _SCRIPT, *modules], text=True, timeout=timeout, env=dict(env), cwd=cwd)
    except process.TimeoutExpired:
        return dict.fromkeys(modules, f"did not finish within {timeout:g}s")
    except OSError as exc:
        return dict.fromkeys(modules, f"cannot run {python}: {exc.strerror or exc}")
    seen: dict[str, str | None] = {}
    for line in proc.stdout.splitlines():
        if line.startswith(_SENTINEL):
            data = json.loads(line[len(_SENTINEL) :])
            seen[data["module"]] = data["error"]
    crashed = f"the interpreter exited with status {proc.returncode} ({(proc.stderr.strip().splitlines() or ['no output'])[-1][:300]})"
    return {m: seen[m] if m in seen else crashed for m in modules}


__all__ = ["AbiPackage", "ImportOutcome", "StaticVerdict", "import_packages", "RecordFiles", "record_files", "static_verdicts", "torch_abi_packages"]
