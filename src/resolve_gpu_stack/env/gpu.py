"""GPU facts for `doctor`: what nvidia-smi lists, and which SASS targets run on which GPU.

``query_nvidia_smi`` runs nvidia-smi (for ``doctor`` and for a probed target's default GPUs); the
rest is pure: it parses its output and answers coverage questions (flashinfer.md 2b).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ..net import process


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU as ``nvidia-smi`` reports it: its name and compute capability."""

    name: str
    compute_cap: tuple[int, int] | None  # None when nvidia-smi reported none (old driver: "[N/A]")

    @property
    def sm(self) -> str:
        return f"sm_{self.compute_cap[0]}{self.compute_cap[1]}" if self.compute_cap else "sm_?"


@dataclass(frozen=True, slots=True)
class GpuQuery:
    """What nvidia-smi said: the GPUs, or why it could not tell."""

    tool: str  # the nvidia-smi that was run (or asked for)
    gpus: tuple[Gpu, ...] = ()
    error: str | None = None
    found: bool = True  # False: an explicitly named nvidia-smi does not exist


def parse_nvidia_smi(text: str) -> tuple[Gpu, ...]:
    """Rows of ``nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader``."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, cap = line.rpartition(",")
        if not sep:
            raise ValueError(f"unexpected nvidia-smi row {line.strip()!r} (expected 'name, compute_cap')")
        m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cap)
        gpus.append(Gpu(name=name.strip(), compute_cap=(int(m[1]), int(m[2])) if m else None))
    return tuple(gpus)


SMI_QUERY = ("--query-gpu=name,compute_cap", "--format=csv,noheader")


def query_nvidia_smi(explicit: str | None, env: Mapping[str, str], timeout: float = 30) -> GpuQuery | None:
    """The GPUs nvidia-smi lists (``explicit``: the nvidia-smi to run, else the one on ``env``'s
    PATH); None when there is no nvidia-smi at all."""
    tool = explicit if explicit is not None else shutil.which("nvidia-smi", path=env.get("PATH"))
    if tool is None:
        return None
    if not os.path.isfile(tool):
        return GpuQuery(tool=tool, found=False)
    try:
        proc = process.run([tool, *SMI_QUERY], text=True, timeout=timeout)
    except process.TimeoutExpired:
        return GpuQuery(tool=tool, error=f"no answer within {timeout:g}s")
    except OSError as exc:
        return GpuQuery(tool=tool, error=f"cannot run it: {exc.strerror or exc}")
    if proc.returncode != 0:
        text = (proc.stdout + "\n" + proc.stderr).strip().splitlines()
        return GpuQuery(tool=tool, error=(text[-1] if text else f"exit status {proc.returncode}")[:300])
    try:
        return GpuQuery(tool=tool, gpus=parse_nvidia_smi(proc.stdout))
    except ValueError as exc:
        return GpuQuery(tool=tool, error=str(exc))


def visible_archs(query: GpuQuery | None) -> tuple[str, ...]:
    """The distinct compute capabilities (``"12.0"``) of the GPUs ``query`` lists, in order."""
    if query is None or query.error or not query.found:
        return ()
    caps = dict.fromkeys(f"{g.compute_cap[0]}.{g.compute_cap[1]}" for g in query.gpus if g.compute_cap)
    return tuple(caps)


# -- SASS coverage ---------------------------------------------------------------------------------
#
# A jit-cache holds SASS only, no PTX (flashinfer.md 2b), so a GPU runs its kernels only if some
# SASS target is binary compatible with it. CUDA C++ Programming Guide, "Binary Compatibility" and
# "Feature Availability" (arch- and family-specific features, CUDA 12.9):
#   plain    sm_XY   runs on compute capability X.z with z >= Y (same major only): sm_80 on 8.6/8.7/8.9
#   arch     sm_XYa  runs on X.Y only: 9.0a covers sm_90, nothing else
#   family   sm_XYf  runs on the family's X.z with z >= Y: 12.0f covers 12.0 and 12.1
# Nothing runs across majors: sm_90 SASS never runs on sm_100 or sm_120.

# patterns compiled where first used (re's cache): a resolve without a GPU flag reads none
_ARCH_RE = r"^(\d+)\.(\d+)([af]?)$"
_PROVIDER_RE = r"^(\d+)(\d)([af]?)$"


def sass_covers(target: str, cap: tuple[int, int]) -> bool:
    """Whether SASS built for ``target`` ("8.0", "9.0a", "12.0f") runs on compute capability ``cap``."""
    m = re.match(_ARCH_RE, target.strip())
    if m is None:
        raise ValueError(f"not a SASS target: {target!r} (expected like 8.0, 9.0a or 12.0f)")
    major, minor, suffix = int(m[1]), int(m[2]), m[3]
    if suffix == "a":
        return cap == (major, minor)
    return cap[0] == major and cap[1] >= minor


def provider_arch(name: str, pattern: str = "flashinfer-jit-cache-sm*") -> str | None:
    """The SASS target a 0.7 provider carries, from its name (flashinfer.md 1: ``sm{NN}[a|f]``).

    ``flashinfer-jit-cache-sm120f`` -> "12.0f"; ``flashinfer-jit-cache-sm90a`` -> "9.0a"; else None.
    """
    prefix = pattern.rstrip("*")
    name = canonicalize_name(name)
    if not name.startswith(prefix):
        return None
    m = re.match(_PROVIDER_RE, name[len(prefix) :])
    return f"{m[1]}.{m[2]}{m[3]}" if m else None


def gpu_groups(gpus: Sequence[Gpu]) -> dict[tuple[int, int] | None, list[str]]:
    """GPU names by compute capability, in the order nvidia-smi listed them."""
    groups: dict[tuple[int, int] | None, list[str]] = {}
    for gpu in gpus:
        groups.setdefault(gpu.compute_cap, []).append(gpu.name)
    return groups


def describe_gpus(cap: tuple[int, int] | None, names: list[str]) -> str:
    """``sm_90 (2x NVIDIA H100)``: one group of ``gpu_groups``."""
    sm = Gpu("", cap).sm
    kinds = sorted(set(names))
    count = f"{len(names)}x " if len(names) > 1 else ""
    return f"{sm} ({count}{', '.join(kinds)})"


__all__ = ["Gpu", "GpuQuery", "describe_gpus", "gpu_groups", "parse_nvidia_smi", "provider_arch", "query_nvidia_smi", "sass_covers", "visible_archs"]
