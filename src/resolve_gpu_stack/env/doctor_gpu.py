"""`doctor`'s checks of what the user needs from FlashInfer on these GPUs: the APIs asked for with
``--require-api`` (present in the imported module, and new enough for each visible GPU), and the
floors each visible GPU puts on FlashInfer and on the CUDA build (``indexes/gpus.toml``).

Pure: stdlib + packaging; the facts (the import's answer, nvidia-smi's GPUs) come in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..data.gpus import GpuTable
from ..errors import NoPlanError, UsageError
from ..model.gpu import GpuArch
from .doctor_stack import FAIL, PASS, Check, ImportResult, Stack
from .gpu import GpuQuery


def visible_gpus(query: GpuQuery | None) -> tuple[GpuArch, ...]:
    """The distinct GPU architectures nvidia-smi listed (none when it could not tell)."""
    if query is None or not query.found or query.error:
        return ()
    return tuple(dict.fromkeys(GpuArch(*g.compute_cap) for g in query.gpus if g.compute_cap))


def check_apis(s: Stack, result: ImportResult | None, apis: Sequence[str], query: GpuQuery | None, table: GpuTable | None = None) -> Check:
    """``--require-api``: each API is in the imported module, and the installed FlashInfer is at or
    above its floor on every visible GPU."""
    name = "flashinfer-api"
    table = table if table is not None else s.defs.gpu_table()
    details: dict[str, Any] = {"required": list(apis)}
    if s.python is None:
        return Check(name, FAIL, f"{', '.join(apis)} required, but flashinfer-python is not installed", details)
    if result is None or not result.ok:
        return Check(name, FAIL, f"{', '.join(apis)} required, but `import flashinfer` failed, so none can be used", details)
    found = dict(result.apis)
    details["found"] = found
    fails, oks = _api_problems(apis, found, s.python.version, visible_gpus(query), table)
    if fails:
        return Check(name, FAIL, "; ".join(fails), details)
    gpus = visible_gpus(query)
    tail = f" (and new enough for {', '.join(map(str, gpus))})" if gpus else " (no GPUs seen: per-GPU floors not checked)"
    return Check(name, PASS, "; ".join(oks) + tail, details)


def _api_problems(apis: Sequence[str], found: Mapping[str, bool], version: Any, gpus: Sequence[GpuArch], table: GpuTable) -> tuple[list[str], list[str]]:
    """(failures, passes): each API missing from the module, or below its floor on a GPU."""
    fails: list[str] = []
    oks: list[str] = []
    for api in apis:
        row = table.api(api)
        what = row.symbol + (f" with backend={row.backend!r}" if row.backend else "")
        if not found.get(api):
            fails.append(f"{api}: flashinfer {version} has no {what} (FlashInfer has it from {row.flashinfer}: {row.source})")
            continue
        gpu_fails = _api_gpu_problems(api, version, gpus, table)
        fails.extend(gpu_fails)
        if not gpu_fails:
            oks.append(f"{api} present in flashinfer {version}")
    return fails, oks


def _api_gpu_problems(api: str, version: Any, gpus: Sequence[GpuArch], table: GpuTable) -> list[str]:
    out = []
    for gpu in gpus:
        try:
            floor = table.floor_for_api(api, gpu)
        except NoPlanError as exc:
            out.append(f"{api} on {gpu}: {exc.message}")
            continue
        if version < floor.version:
            out.append(f"{api} on {gpu} needs flashinfer >= {floor.version}, {version} is installed; calls fail there ({floor.source})")
    return out


def arch_floor_problems(s: Stack, gpus: Sequence[GpuArch], table: GpuTable | None = None) -> list[str]:
    """Each visible GPU the installed FlashInfer is older than the first release with kernels for
    (it would fail there). Whether the installed jit-cache's SASS runs there is the coverage
    check's; the CUDA label the jit-cache was built for is judged there too."""
    table = table if table is not None else s.defs.gpu_table()
    out = []
    for gpu in gpus:
        try:
            floor = table.floor_for_arch(gpu)
        except UsageError:
            continue  # not in the table: nothing known to check
        if s.python is not None and s.python.version < floor.version:
            out.append(f"{gpu} needs flashinfer >= {floor.version}, {s.python.version} is installed: it would fail there ({floor.source})")
    return out


__all__ = ["arch_floor_problems", "check_apis", "visible_gpus"]
