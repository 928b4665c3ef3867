"""``indexes/gpus.toml``: FlashInfer's architecture variants, the GPU floors and the API floors.

``read_gpu_table()`` turns the file into a frozen ``GpuTable``; a resolve gets the one its index
definitions came with (``Definitions.gpu_table``). The queries the resolver and ``doctor`` ask are its
methods (and module functions over the packaged table, read on each call):

- ``floor_for_arch(gpu)`` -> ``ArchFloor(version, cuda, source)``: the first FlashInfer with kernels
  for that GPU and the lowest CUDA label whose kernels run there;
- ``floor_for_api(name, gpu=None)`` -> ``ApiFloor(version, source)``: the first FlashInfer that has
  the API (on that GPU, where it differs);
- ``variants_for(gpu)`` and ``select_providers(gpus, providers)``: FlashInfer 0.7's provider scoring.

Pure: stdlib + packaging. Every row must cite its source; a ``serves`` list that contradicts the CUDA
compatibility rule in ``model/gpu.py`` is refused, so table and code cannot drift apart.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from packaging.version import Version

from ..errors import NoPlanError, UsageError
from ..model.cuda import CudaLabel
from ..model.gpu import (
    ArchVariant,
    GpuArch,
    MatchKind,
    ProviderChoice,
    ScoredVariant,
    Scoring,
    select_providers,
)
from .toml import TomlReader, data_dir, load_toml

FILE_NAME = "gpus.toml"

_TOP_KEYS = ("provider-selection", "variant", "gpu", "api")
_SELECTION_KEYS = ("order", "provider-prefix", "source")
_VARIANT_KEYS = ("name", "serves", "cuda", "source")
_GPU_KEYS = ("arch", "products", "flashinfer", "cuda", "source")
_API_KEYS = ("name", "symbol", "backend", "flashinfer", "runs-on", "source", "gpu")
_API_GPU_KEYS = ("archs", "flashinfer", "source")


class ArchFloor(NamedTuple):
    """What a GPU needs: FlashInfer ``version`` or newer, built for ``cuda`` or newer."""

    version: Version
    cuda: CudaLabel
    source: str


class ApiFloor(NamedTuple):
    """The first FlashInfer ``version`` that has an API (on one GPU, when asked for one)."""

    version: Version
    source: str


@dataclass(frozen=True, slots=True)
class VariantRow:
    variant: ArchVariant
    serves: tuple[GpuArch, ...]
    cuda: CudaLabel
    source: str


@dataclass(frozen=True, slots=True)
class GpuRow:
    arch: GpuArch
    products: tuple[str, ...]
    flashinfer: Version
    cuda: CudaLabel
    source: str


@dataclass(frozen=True, slots=True)
class ApiGpuFloor:
    archs: tuple[GpuArch, ...]
    flashinfer: Version
    source: str


@dataclass(frozen=True, slots=True)
class ApiRow:
    """An API (``mm_mxfp8``) or one backend of it (``mm_mxfp8:cute-dsl``: ``symbol`` mm_mxfp8,
    ``backend`` cute-dsl). ``runs_on`` None means no per-GPU data."""

    name: str
    symbol: str
    backend: str | None
    flashinfer: Version
    runs_on: tuple[GpuArch, ...] | None
    per_gpu: tuple[ApiGpuFloor, ...]
    source: str


@dataclass(frozen=True, slots=True)
class GpuTable:
    scoring: Scoring
    provider_prefix: str
    selection_source: str
    variants: tuple[VariantRow, ...]
    gpus: tuple[GpuRow, ...]
    apis: tuple[ApiRow, ...]

    def api(self, name: str) -> ApiRow:
        """The row for ``name``; an unknown name raises ``UsageError`` listing the known ones."""
        for row in self.apis:
            if row.name == name:
                return row

        known = [row.name for row in self.apis]
        close = difflib.get_close_matches(name, known, n=1)
        hint = (f"did you mean {close[0]!r}? " if close else "") + f"known APIs: {', '.join(known)}"
        raise UsageError(f"unknown FlashInfer API {name!r} (indexes/{FILE_NAME} has no floor for it)", hint=hint)

    def gpu(self, arch: GpuArch | str) -> GpuRow:
        """The row for a GPU; an unknown one raises ``UsageError`` listing the known ones."""
        gpu = arch if isinstance(arch, GpuArch) else GpuArch.parse(arch)
        for row in self.gpus:
            if row.arch == gpu:
                return row
        raise UsageError(
            f"unknown GPU architecture {gpu} (indexes/{FILE_NAME} has no row for it)", hint=f"known GPUs: {', '.join(str(r.arch) for r in self.gpus)}"
        )

    def floor_for_arch(self, arch: GpuArch | str) -> ArchFloor:
        row = self.gpu(arch)
        return ArchFloor(row.flashinfer, row.cuda, row.source)

    def floor_for_api(self, name: str, arch: GpuArch | str | None = None) -> ApiFloor:
        """The first FlashInfer with ``name``; with ``arch``, the first with it on that GPU. A GPU
        the API has no kernels for raises ``NoPlanError`` naming the GPUs it runs on."""
        row = self.api(name)
        if arch is None:
            return ApiFloor(row.flashinfer, row.source)
        gpu = arch if isinstance(arch, GpuArch) else GpuArch.parse(arch)
        if row.runs_on is not None and gpu not in row.runs_on:
            raise NoPlanError(
                f"FlashInfer's {name} has no kernels for {gpu} in any release indexes/{FILE_NAME} knows",
                reasons=[f"{name} runs on {', '.join(str(g) for g in row.runs_on)} ({row.source})"],
            )
        for floor in row.per_gpu:
            if gpu in floor.archs:
                return ApiFloor(floor.flashinfer, floor.source)
        return ApiFloor(row.flashinfer, row.source)

    def variant_row(self, variant: ArchVariant | str) -> VariantRow | None:
        wanted = variant if isinstance(variant, ArchVariant) else ArchVariant.parse(variant)
        return next((row for row in self.variants if row.variant == wanted), None)

    def variants_for(self, gpu: GpuArch | str) -> tuple[ScoredVariant, ...]:
        """The variants FlashInfer builds that serve ``gpu``, best first."""
        target = gpu if isinstance(gpu, GpuArch) else GpuArch.parse(gpu)
        return self.scoring.rank((row.variant for row in self.variants), target)

    def select_providers(self, gpus: Iterable[GpuArch], providers: Iterable[str]) -> tuple[ProviderChoice, ...]:
        """Per GPU, the best-scoring provider among ``providers`` (``model.gpu.select_providers``)."""
        return select_providers(gpus, providers, self.scoring, self.provider_prefix)


class _Reader:
    """Builds a ``GpuTable`` from parsed TOML; every problem names the file, the row and the key."""

    def __init__(self, source: Path | str) -> None:
        self.toml = TomlReader(source)

    def text(self, table: Mapping[str, Any], key: str, where: str) -> str:
        value: str = self.toml.get(table, key, str, where, required=True)
        if not value.strip():
            raise self.toml.fail(where, f"{key!r} must not be empty")
        return value

    def cuda(self, table: Mapping[str, Any], where: str) -> CudaLabel:
        text = self.text(table, "cuda", where)
        label = CudaLabel.parse(text)
        if label is None:
            raise self.toml.fail(where, f"'cuda' {text!r} is not a CUDA label like cu129")
        return label

    def gpus(self, table: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> tuple[GpuArch, ...] | None:
        texts = self.toml.strings(table, key, where, required=required)
        if texts is None:
            return None
        try:
            return tuple(GpuArch.parse(t, what=f"{key!r} entry") for t in texts)
        except UsageError as exc:
            raise self.toml.fail(where, exc.message) from None

    def selection(self, table: Mapping[str, Any]) -> tuple[Scoring, str, str]:
        where = "provider-selection"
        self.toml.unknown_keys(table, _SELECTION_KEYS, where)
        order = self.toml.strings(table, "order", where, required=True) or ()
        kinds = tuple(self.toml.enum(MatchKind, text, where) for text in order)
        if sorted(k.value for k in kinds) != sorted(k.value for k in MatchKind):
            raise self.toml.fail(where, f"'order' must name each of {', '.join(k.value for k in MatchKind)} once")
        return Scoring(kinds), self.text(table, "provider-prefix", where), self.text(table, "source", where)

    def variant(self, table: Mapping[str, Any], index: int) -> VariantRow:
        where = f"variant #{index + 1}"
        self.toml.unknown_keys(table, _VARIANT_KEYS, where)
        name = self.text(table, "name", where)
        where = f"variant #{index + 1} ({name})"
        try:
            variant = ArchVariant.parse(name, what="'name'")
        except UsageError as exc:
            raise self.toml.fail(where, exc.message) from None
        serves = self.gpus(table, "serves", where) or ()
        return VariantRow(variant, serves, self.cuda(table, where), self.text(table, "source", where))

    def gpu(self, table: Mapping[str, Any], index: int) -> GpuRow:
        where = f"gpu #{index + 1}"
        self.toml.unknown_keys(table, _GPU_KEYS, where)
        try:
            arch = GpuArch.parse(self.text(table, "arch", where), what="'arch'")
        except UsageError as exc:
            raise self.toml.fail(where, exc.message) from None
        where = f"gpu #{index + 1} ({arch})"
        products = self.toml.strings(table, "products", where) or ()
        flashinfer = self.toml.version(self.text(table, "flashinfer", where), where)
        return GpuRow(arch, products, flashinfer, self.cuda(table, where), self.text(table, "source", where))

    def api(self, table: Mapping[str, Any], index: int) -> ApiRow:
        where = f"api #{index + 1}"
        self.toml.unknown_keys(table, _API_KEYS, where)
        name = self.text(table, "name", where)
        where = f"api #{index + 1} ({name})"
        backend = self.toml.get(table, "backend", str, where)
        flashinfer = self.toml.version(self.text(table, "flashinfer", where), where)
        runs_on = self.gpus(table, "runs-on", where, required=False)
        per_gpu = tuple(self.api_gpu(t, f"{where} gpu #{i + 1}", flashinfer, runs_on) for i, t in enumerate(self.toml.tables(table, "gpu", where)))
        return ApiRow(name, self.text(table, "symbol", where), backend, flashinfer, runs_on, per_gpu, self.text(table, "source", where))

    def api_gpu(self, table: Mapping[str, Any], where: str, general: Version, runs_on: tuple[GpuArch, ...] | None) -> ApiGpuFloor:
        self.toml.unknown_keys(table, _API_GPU_KEYS, where)
        archs = self.gpus(table, "archs", where) or ()
        flashinfer = self.toml.version(self.text(table, "flashinfer", where), where)
        if flashinfer < general:
            raise self.toml.fail(where, f"floor {flashinfer} is below the API's own floor {general}")
        stray = [str(a) for a in archs if runs_on is not None and a not in runs_on]
        if stray:
            raise self.toml.fail(where, f"{', '.join(stray)} not in the API's 'runs-on'")
        return ApiGpuFloor(archs, flashinfer, self.text(table, "source", where))

    def check_serves(self, variants: tuple[VariantRow, ...], gpus: tuple[GpuRow, ...]) -> None:
        """Each variant's ``serves`` must be exactly the known GPUs the compatibility rule allows."""
        known = sorted({row.arch for row in gpus} | {g for row in variants for g in row.serves})
        for index, row in enumerate(variants):
            ruled = [g for g in known if row.variant.serves(g)]
            if sorted(row.serves) != ruled:
                raise self.toml.fail(
                    f"variant #{index + 1} ({row.variant})",
                    f"'serves' lists {', '.join(map(str, sorted(row.serves))) or 'nothing'} but {row.variant} "
                    f"runs on {', '.join(map(str, ruled)) or 'none of the known GPUs'}",
                    hint="exact (a) runs on its own GPU only; family (f) and baseline on the same major, same or higher minor",
                )

    def unique(self, names: list[str], what: str) -> None:
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise self.toml.fail(what, f"listed twice: {', '.join(dup)}")

    def table(self, data: Mapping[str, Any]) -> GpuTable:
        self.toml.unknown_keys(data, _TOP_KEYS, "top level")
        selection = self.toml.get(data, "provider-selection", dict, "top level", required=True)
        scoring, prefix, selection_source = self.selection(selection)
        variants = tuple(self.variant(t, i) for i, t in enumerate(self.toml.tables(data, "variant", "top level")))
        gpus = tuple(self.gpu(t, i) for i, t in enumerate(self.toml.tables(data, "gpu", "top level")))
        apis = tuple(self.api(t, i) for i, t in enumerate(self.toml.tables(data, "api", "top level")))
        self.unique([str(v.variant) for v in variants], "variant")
        self.unique([str(g.arch) for g in gpus], "gpu")
        self.unique([a.name for a in apis], "api")
        self.check_serves(variants, gpus)
        return GpuTable(scoring, prefix, selection_source, variants, gpus, apis)


def read_gpu_table(data: Mapping[str, Any], source: Path | str) -> GpuTable:
    """A ``GpuTable`` from parsed TOML; ``source`` names the file in errors."""
    return _Reader(source).table(data)


def load_gpu_table(path: Path | None = None) -> GpuTable:
    """``indexes/gpus.toml`` (or ``path``) as a ``GpuTable``; a malformed file raises
    ``IndexDefinitionError`` naming the file, the row and the key."""
    path = path if path is not None else data_dir() / FILE_NAME
    return read_gpu_table(load_toml(path), path)


def default_gpu_table() -> GpuTable:
    """The packaged table, read now (a resolve has its own with its definitions: ``Definitions.gpu_table``)."""
    return load_gpu_table()


def floor_for_arch(arch: GpuArch | str) -> ArchFloor:
    """``default_gpu_table().floor_for_arch(arch)``."""
    return default_gpu_table().floor_for_arch(arch)


def floor_for_api(name: str, arch: GpuArch | str | None = None) -> ApiFloor:
    """``default_gpu_table().floor_for_api(name, arch)``."""
    return default_gpu_table().floor_for_api(name, arch)


__all__ = [
    "ApiFloor",
    "ApiGpuFloor",
    "ApiRow",
    "ArchFloor",
    "GpuRow",
    "GpuTable",
    "VariantRow",
    "default_gpu_table",
    "floor_for_api",
    "floor_for_arch",
    "load_gpu_table",
    "read_gpu_table",
]
