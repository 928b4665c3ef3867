"""A candidate's requirements: its METADATA's Requires-Dist for the target, plus the FlashInfer
alignment (cubin == python, jit-cache == python's public version + label) as requirements. With the
target's GPUs known, a jit-cache shim requires only the providers FlashInfer would pick for them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from packaging.markers import Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.specifiers import SpecifierSet

from ..data.definitions import FlashInferRules
from ..index.finder import Finder
from ..model import Target
from ..model.gpu import needed_providers
from ..rules.versions import jit_cache_version
from .factory import Policy
from .overrides import Overrides
from .requirement import Cand, Req
from .sources import SOURCE_INDEX

if TYPE_CHECKING:
    from ..data.gpus import GpuTable
    from ..index.parse import RequiresDist
    from ..index.sdist import SdistMetadata
    from ..model.gpu import GpuArch

log = logging.getLogger(__name__)


class Dependencies:
    """``gpu_table``: the definitions' (``Definitions.gpu_table``), asked only with ``gpus`` and a
    jit-cache shim."""

    def __init__(
        self,
        finder: Finder,
        target: Target,
        flashinfer: FlashInferRules,
        policy: Policy,
        overrides: Overrides | None = None,
        gpus: tuple[GpuArch, ...] = (),
        gpu_table: Callable[[], GpuTable] | None = None,
        sdist_metadata: SdistMetadata | None = None,
    ) -> None:
        self.finder = finder
        self.target = target
        self.flashinfer = flashinfer
        self.policy = policy
        self.overrides = overrides
        # FlashInfer extras left out because they need a torch the plan cannot have (rule 4)
        self.dropped_extras: dict[tuple[str, str], tuple[str, ...]] = {}

        self.gpus = gpus  # () = any GPU: every provider the shim lists
        self.gpu_table = gpu_table
        # a --build package's sdist whose PKG-INFO is not static: its build backend's metadata
        self.sdist_metadata = sdist_metadata
        self._built_metadata: dict[str, tuple[str, ...]] = {}
        # a marker's verdict on the target, per extras: by the parsed marker (the finder parses each
        # Requires-Dist line once) and by its text (many releases' lines repeat one marker)
        self._verdicts: dict[tuple[int, frozenset[str]], tuple[Marker, bool]] = {}
        self._by_text: dict[tuple[str, frozenset[str]], bool] = {}

    def of(self, cand: Cand, extras: frozenset[str] = frozenset()) -> list[Req]:
        """What ``cand`` (with ``extras``) requires: its Requires-Dist (a shim's providers only for
        the GPUs), and the FlashInfer alignment for flashinfer-python, with the overrides applied."""
        base = self.requirements(cand, frozenset())
        skipped = set(self.skipped_providers(cand, base))
        deps = self._overridden(cand, [r for r in base if r.name not in skipped]) + self.coupled(cand)
        if extras:
            deps += self.of_extras(cand, extras)
        return deps

    def of_extras(self, cand: Cand, extras: frozenset[str]) -> list[Req]:
        """What ``cand``'s ``extras`` add, with the overrides applied. An extra of a FlashInfer
        component that needs a torch the plan cannot have (``[b12x]``: torch>=2.12.0 against a
        2.12 nightly) is left out, and remembered for a note."""
        rules = self.overrides.rules if self.overrides is not None else None
        if rules is None or cand.name not in self.flashinfer.components:
            return self._overridden(cand, self.requirements(cand, extras))
        out: list[Req] = []
        for extra in sorted(extras):
            reqs = self.requirements(cand, frozenset({extra}))
            unmet = [str(r) for r in reqs if rules.torch_unmet(r)]
            if unmet:
                self.dropped_extras[(f"{cand.name} {cand.version}", extra)] = tuple(unmet)
                continue
            out += reqs
        return self._overridden(cand, out)

    def _overridden(self, cand: Cand, reqs: list[Req]) -> list[Req]:
        return self.overrides.apply(cand, reqs) if self.overrides is not None else reqs

    def skipped_providers(self, cand: Cand, base: list[Req] | None = None) -> tuple[str, ...]:
        """The providers a jit-cache shim lists that the GPUs do not need (FlashInfer's scoring:
        the best provider per GPU), sorted; () without GPUs or for anything but the shim."""
        if not self.gpus or cand.name != self.flashinfer.jit_cache or self.gpu_table is None:
            return ()
        reqs = base if base is not None else self.requirements(cand, frozenset())
        listed = sorted({r.name for r in reqs if self.flashinfer.is_provider(r.name)})

        needed = set(needed_providers(self.gpu_table().select_providers(self.gpus, listed)))
        return tuple(n for n in listed if n not in needed)

    def requirements(self, cand: Cand, extras: frozenset[str], lines: Sequence[str] | None = None) -> list[Req]:
        """The Requires-Dist lines (``lines``, or the candidate's own) that apply to the target
        with exactly ``extras`` (none: the base requirements)."""
        if lines is None:
            lines = self._requires_dist(cand)
        out: list[Req] = []
        parent = f"{cand.name} {cand.version}"
        for line in lines:
            req = self._parse(cand, line)
            if req is None or not self._marker_ok(req.marker, extras):
                continue
            out.append(Req(name=req.name, specifier=req.specifier, extras=req.extras, parent=parent, text=req.text))
        return out

    def coupled(self, cand: Cand) -> list[Req]:
        """The FlashInfer alignment, added as requirements: cubin == python; jit-cache == V+label."""
        fi = self.flashinfer
        versions = self.policy.flashinfer_versions
        if cand.name != fi.python or versions is None:
            return []
        parent = f"{cand.name} {cand.version} (FlashInfer alignment)"
        out = []
        if fi.cubin in self.policy.flashinfer_components:
            out.append(Req(name=fi.cubin, specifier=SpecifierSet(f"=={cand.version}"), parent=parent, text=f"{fi.cubin}=={cand.version}"))
        label = versions.get(cand.version)
        if fi.jit_cache in self.policy.flashinfer_components and label:
            v = jit_cache_version(cand.version, label)
            out.append(Req(name=fi.jit_cache, specifier=SpecifierSet(f"=={v}"), parent=parent, text=f"{fi.jit_cache}=={v}"))
        return out

    def _parse(self, cand: Cand, line: str) -> RequiresDist | None:
        req = self.finder.requires_dist(line)
        if req is None:
            log.warning("%s: ignoring unparsable requirement %r", cand, line)
            return None
        if req.url:
            log.warning("%s: ignoring direct-URL requirement %r", cand, line)
            return None
        return req

    def _requires_dist(self, cand: Cand) -> tuple[str, ...]:
        if cand.file is None:
            return tuple(self.policy.installed_requires.get(cand.name, ()))
        meta = self.finder.metadata(cand.file)
        if cand.file.is_wheel or self.sdist_metadata is None or cand.file.index == SOURCE_INDEX:
            return meta.requires_dist

        from ..index.sdist import pkg_info_is_static  # an sdist only (--build NAME): +4 ms on a plain resolve

        if pkg_info_is_static(meta):
            return meta.requires_dist
        known = self._built_metadata.get(cand.file.url)
        if known is None:
            known = self._built_metadata[cand.file.url] = self.sdist_metadata(cand.file, meta).requires_dist
        return known

    def _marker_ok(self, marker: Marker | None, extras: frozenset[str]) -> bool:
        if marker is None:
            return not extras
        key = (id(marker), extras)
        known = self._verdicts.get(key)
        if known is None or known[0] is not marker:
            text = (str(marker), extras)
            verdict = self._by_text.get(text)
            if verdict is None:
                verdict = self._by_text[text] = self._evaluate(marker, extras)
            known = self._verdicts[key] = (marker, verdict)
        return known[1]

    def _evaluate(self, marker: Marker, extras: frozenset[str]) -> bool:
        envs = [dict(self.target.markers, extra=e) for e in sorted(extras)] if extras else [dict(self.target.markers, extra="")]
        for env in envs:
            try:
                if marker.evaluate(env):
                    return True
            except (UndefinedComparison, UndefinedEnvironmentName):
                continue
        return False
