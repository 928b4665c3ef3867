"""The build machine: the CUDA toolkit (``nvcc``, its root), the GPUs' architectures, the jobs a
build may run at once (cores and memory), and whether the toolkit can build for the kept torch."""

from __future__ import annotations

import ctypes.util
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from ..errors import BuildError
from ..model.cuda import CudaLabel
from ..net import process

MEMORY_PER_JOB = 4 * 2**30  # a CUDA compile job takes GBs (abi.md, last section): MAX_JOBS is memory / this, at most the cores


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaToolkit:
    home: Path  # CUDA_HOME
    nvcc: Path
    version: str  # "13.0", from nvcc --version

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])


_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)")


def parse_nvcc_version(output: str) -> str | None:
    """``"13.0"`` from ``nvcc --version`` (``Cuda compilation tools, release 13.0, V13.0.88``)."""
    m = _NVCC_RELEASE.search(output)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def find_cuda_toolkit(env: Mapping[str, str]) -> CudaToolkit | None:
    """The CUDA toolkit a build would use: ``$CUDA_HOME/bin/nvcc``, then ``$CUDA_PATH/bin/nvcc``,
    else ``nvcc`` on PATH, else ``/usr/local/cuda``. The toolkit's root (CUDA_HOME) is the one the
    user set, else the one ``nvcc`` itself names (``nvcc -dryrun``: its ``TOP``), else the folder a
    wrapper script execs, else the real nvcc's grandparent. None when there is none, or it does
    not answer ``--version``."""
    given = [Path(env[v]) for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)]
    candidates: list[tuple[Path, Path | None]] = [(home / "bin" / "nvcc", home) for home in given]
    found = shutil.which("nvcc", path=env.get("PATH"))
    if found:
        candidates.append((Path(found), None))
    candidates.append((Path("/usr/local/cuda/bin/nvcc"), None))
    for nvcc, home in candidates:
        if not (nvcc.is_file() and os.access(nvcc, os.X_OK)):
            continue
        version = parse_nvcc_version(_ask_nvcc(nvcc, ["--version"]))
        if version is None:
            continue
        return CudaToolkit(home=home or toolkit_root(nvcc), nvcc=nvcc, version=version)
    return None


def _ask_nvcc(nvcc: Path, args: Sequence[str]) -> str:
    try:
        proc = process.run([str(nvcc), *args], text=True, timeout=30)
    except (OSError, process.SubprocessError):
        return ""
    return proc.stdout + proc.stderr


_TOP = re.compile(r"^#\$ (?:TOP|_HERE_)=(.+)$", re.MULTILINE)
_EXEC = re.compile(r"^\s*exec\s+(?:\S+=\S+\s+)*[\"']?(/[^\s\"']*/bin/nvcc)[\"']?", re.MULTILINE)


def _has_toolkit(home: Path) -> bool:
    return (home / "include" / "cuda_runtime_api.h").is_file() or (home / "targets").is_dir()


def toolkit_root(nvcc: Path) -> Path:
    """The root of the toolkit ``nvcc`` belongs to, a wrapper script followed: what ``nvcc
    -dryrun`` says its ``TOP`` is, else the nvcc a script ``exec``s, else the real file's grandparent."""
    top = _TOP.search(_ask_nvcc(nvcc, ["-dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull]))  # prints, runs nothing
    if top is not None:
        home = Path(os.path.normpath(top.group(1).strip()))
        if home.name == "bin":
            home = home.parent
        if _has_toolkit(home):
            return home
    try:
        head = nvcc.read_bytes()[:4096]
    except OSError:
        head = b""
    if head.startswith(b"#!"):
        target = _EXEC.search(head.decode("utf-8", "replace"))
        if target is not None and Path(target.group(1)).resolve() != nvcc.resolve():
            return toolkit_root(Path(target.group(1)))
    return nvcc.resolve().parent.parent


def has_cuda_driver() -> bool:
    """Whether this machine has the NVIDIA driver's ``libcuda`` (a build machine often has none)."""
    return Path("/proc/driver/nvidia").exists() or ctypes.util.find_library("cuda") is not None


def arch_list(capabilities: Sequence[str]) -> str:
    """TORCH_CUDA_ARCH_LIST for the GPUs (``["12.0", "9.0"]`` -> ``"9.0;12.0"``); "" for any GPU."""

    def key(cap: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", cap))

    return ";".join(sorted(dict.fromkeys(capabilities), key=key))


def max_jobs(cores: int, available: int | None) -> int:
    """Parallel compile jobs: every core, but no more than the memory available holds at
    ``MEMORY_PER_JOB`` each (a CUDA build that runs out of memory dies half-way); at least one."""
    jobs = max(1, cores)
    if available is not None:
        jobs = min(jobs, max(1, available // MEMORY_PER_JOB))
    return jobs


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildMachine:
    """What this machine brings to a build, found once at the edge."""

    uv: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST; "" leaves torch's default (every architecture it supports)
    max_jobs: int
    toolkit: CudaToolkit | None
    env: Mapping[str, str]  # the environment the tool runs in (scrubbed before a build sees it)
    driver: bool = True  # the NVIDIA driver's libcuda is here; without it a build links against the toolkit's stubs

    @property
    def stubs(self) -> Path | None:
        """The folder of the toolkit's link stub ``libcuda.so`` a build links against without a driver:
        ``lib64/stubs``, ``lib/stubs`` (where nvcc's own profile looks), else
        ``targets/<arch>/lib/stubs`` (a toolkit without the ``lib64`` link); None with a driver, or
        where the toolkit has none (NVIDIA's nvcc wheels carry no stubs)."""
        if self.driver or self.toolkit is None:
            return None
        return stubs_folder(self.toolkit.home)

    @property
    def stubless(self) -> bool:
        """No driver here and no libcuda stub in the toolkit: an extension that links ``-lcuda`` cannot link."""
        return not self.driver and self.toolkit is not None and self.stubs is None


def stubs_folder(home: Path) -> Path | None:
    """The first folder of a CUDA toolkit at ``home`` that holds the link stub ``libcuda.so``."""
    candidates = [home / "lib64" / "stubs", home / "lib" / "stubs", *sorted(home.glob("targets/*/lib/stubs"))]
    return next((d for d in candidates if (d / "libcuda.so").is_file()), None)


def check_toolkit(torch: Version, label: CudaLabel | None, toolkit: CudaToolkit | None) -> str | None:
    """``BuildError`` when the CUDA toolkit found is of another major than torch's CUDA ``label``
    (an extension built by it would not load); a warning (returned) when a CUDA torch finds none."""
    if label is None:
        return None
    if toolkit is None:
        return (
            f"no CUDA toolkit found (CUDA_HOME, nvcc on PATH, /usr/local/cuda) for torch {torch}: a CUDA extension "
            f"cannot build; install the CUDA {label.major} toolkit (or NVIDIA's nvcc wheel) and set CUDA_HOME"
        )
    if toolkit.major != label.major:
        raise BuildError(
            f"the CUDA toolkit found is {toolkit.version} ({toolkit.nvcc}), but torch {torch} is built for CUDA {label.major}.{label.minor}: "
            "an extension built with it would not load",
            hint=f"point CUDA_HOME at a CUDA {label.major}.x toolkit; nothing was built",
        )
    return None
