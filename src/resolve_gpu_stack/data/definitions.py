"""Index definitions, the routing table and the component rules, loaded from ``indexes/*.toml``.

Pure: stdlib + packaging. Which index serves what lives in the data files, not in code.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..errors import IndexDefinitionError, UsageError
from ..model import Coupling, CudaLabel
from ..urls import normalize_base_url, redact_url, strip_userinfo
from .toml import load_toml

INDEX_NAMES = ("pytorch", "flashinfer", "pypi")


def data_dir() -> Path:
    """The folder holding the index definitions: packaged copy first, then the source tree's."""
    packaged = Path(__file__).resolve().parents[1] / "_indexes"
    if (packaged / "routing.toml").is_file():
        return packaged
    source = Path(__file__).resolve().parents[3] / "indexes"
    if (source / "routing.toml").is_file():
        return source
    raise IndexDefinitionError("cannot find the index definitions (indexes/*.toml)")


def read_toml(path: Path, *, error: type[UsageError] = IndexDefinitionError) -> dict[str, Any]:
    """A TOML file as a dict; a missing, unreadable or malformed file raises ``error`` naming it."""
    return load_toml(path, error=error)


def _spec(text: str | None, where: str) -> SpecifierSet | None:
    if text is None:
        return None
    try:
        return SpecifierSet(text, prereleases=True)
    except InvalidSpecifier as exc:
        raise IndexDefinitionError(f"{where}: bad version specifier {text!r}") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexDefinition:
    name: str
    url: str  # base URL, ends with "/"; "" when not configured yet (pypi)
    dialect: str  # html | json-or-html
    hashes: str  # all | except-nightly
    metadata: str  # pep658 | none | pep658-or-range
    hosts: tuple[str, ...]
    channels: Mapping[str, str]
    retention_days: int = 0
    cuda_labels: tuple[str, ...] = ()

    def page_url(self, path: str) -> str:
        """The URL of a page below this index, without the base URL's ``user:token@``: page URLs
        reach notes, logs and messages; the fetcher sends the credentials by origin."""
        if not self.url:
            raise IndexDefinitionError(
                f"index {self.name!r} has no URL",
                hint=f"pass --index {self.name}=URL",
            )
        return strip_userinfo(self.url) + path.lstrip("/")

    def allows_host(self, url: str) -> bool:
        """Whether a file URL found on this index may be followed (its own host always may)."""
        host = (urlsplit(url).hostname or "").lower()
        own = (urlsplit(self.url).hostname or "").lower()
        return "*" in self.hosts or host == own or host in self.hosts


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    patterns: tuple[str, ...]
    index: str
    page: str
    versions: SpecifierSet | None = None
    flashinfer_channel: str | None = None  # "stable" | "nightly" | None (any)
    legacy: bool = False

    def names(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in self.patterns)

    @property
    def is_wildcard(self) -> bool:
        return self.patterns == ("*",)


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteContext:
    """The variables a page template may use (see indexes/routing.toml)."""

    torch_channel: str = "nightly"  # nightly | test | stable
    cuda: str | None = None  # torch's CUDA variant, e.g. cu130
    flashinfer_channel: str = "stable"  # stable | nightly
    torch_series: str | None = None  # "2.12"


@dataclass(frozen=True, slots=True, kw_only=True)
class PageLocation:
    """One page to read for a package, and the route that sent us there."""

    index: str
    url: str
    route: Route
    cuda_label: str | None = None  # the {fi_cuda} value this page was expanded with


@dataclass(frozen=True, slots=True, kw_only=True)
class CouplingRule:
    patterns: tuple[str, ...]
    coupling: Coupling
    why: str
    versions: SpecifierSet | None = None
    local: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferRules:
    python: NormalizedName
    cubin: NormalizedName
    jit_cache: NormalizedName
    providers: str  # fnmatch pattern
    agnostic_since: Version
    jit_cache_since: Version
    providers_since: Version
    arch_table: tuple[tuple[SpecifierSet, Mapping[str, tuple[str, ...]], Mapping[str, tuple[str, ...]]], ...] = ()
    components: tuple[NormalizedName, ...] = ()  # python, cubin, jit-cache: install order

    def is_provider(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.providers)

    def members(self, name: str) -> bool:
        return name in (self.python, self.cubin, self.jit_cache) or self.is_provider(name)

    def requested(self, *, cubin: bool, jit_cache: bool) -> tuple[NormalizedName, ...]:
        """The components to install, in install order (components.toml ``components``):
        flashinfer-python always, cubin and jit-cache when asked for."""
        off = {n for n, on in ((self.cubin, cubin), (self.jit_cache, jit_cache)) if not on}
        return tuple(n for n in self.components if n == self.python or n not in off)

    def jit_cache_archs(self, version: Version, label: str, machine: str) -> tuple[str, ...] | None:
        """The SASS targets a monolithic jit-cache build covers, or None when not in the table."""
        for spec, labels, aarch64_extra in self.arch_table:
            if version in spec and label in labels:
                archs = tuple(labels[label])
                if machine == "aarch64":
                    archs += tuple(aarch64_extra.get(label, ()))
                return archs
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Definitions:
    """Everything under indexes/: the three logical indexes, the routes, the component rules."""

    indexes: Mapping[str, IndexDefinition]
    routes: tuple[Route, ...]
    default_index: str
    couplings: tuple[CouplingRule, ...]
    flashinfer: FlashInferRules
    pytorch_family: frozenset[NormalizedName] = frozenset()  # components.toml [pytorch] family
    source: Path | None = None

    # -- routing ---------------------------------------------------------------------------
    def routes_for(self, name: str, ctx: RouteContext) -> list[Route]:
        name = canonicalize_name(name)
        applicable = [
            r for r in self.routes
            if r.flashinfer_channel in (None, ctx.flashinfer_channel)
        ]
        explicit = [r for r in applicable if not r.is_wildcard and r.names(name)]
        if explicit:
            return explicit
        # A name that some route claims on another channel is not handed to the wildcard.
        if any(not r.is_wildcard and r.names(name) for r in self.routes):
            return []
        return [r for r in applicable if r.is_wildcard]

    def owner(self, name: str, version: Version, ctx: RouteContext) -> str | None:
        """The index that owns this exact version of the package under ``ctx``."""
        for route in self.routes_for(name, ctx):
            if route.versions is None or version in route.versions:
                return route.index
        return None

    def pages_for(self, name: str, ctx: RouteContext) -> list[PageLocation]:
        """Every page to read for ``name`` under ``ctx``, in route order."""
        name = canonicalize_name(name)
        out: list[PageLocation] = []
        for route in self.routes_for(name, ctx):
            index = self.indexes[route.index]
            labels: list[str | None] = [None]
            if "{fi_cuda}" in route.page:
                labels = list(self.flashinfer_labels(ctx.cuda))
            for label in labels:
                path = expand_page(route.page, name=name, ctx=ctx, fi_cuda=label)
                if path is None:
                    continue
                out.append(PageLocation(index=route.index, url=index.page_url(path), route=route, cuda_label=label))
        return out

    def flashinfer_labels(self, cuda: str | None) -> list[str]:
        """Published labels with torch's CUDA major that are <= torch's CUDA, newest first."""
        if cuda is None:
            return []
        want = CudaLabel.parse(cuda)
        if want is None:
            return []
        known = [label for text in self.indexes["flashinfer"].cuda_labels if (label := CudaLabel.parse(text)) is not None]
        return [str(label) for label in sorted(known, reverse=True) if label.serves(want)]

    # -- components ------------------------------------------------------------------------
    def coupling(self, name: str, version: Version) -> tuple[Coupling, str]:
        name = canonicalize_name(name)
        local = version.local or ""
        for rule in self.couplings:
            if not any(fnmatch.fnmatchcase(name, p) for p in rule.patterns):
                continue
            if rule.versions is not None and version not in rule.versions:
                continue
            if rule.local is not None:
                m = rule.local.match(local)
                if not m:
                    continue
                return rule.coupling, rule.why.format(**m.groupdict())
            return rule.coupling, rule.why
        return Coupling.AGNOSTIC, "pure package"

    def recorded_urls(self) -> dict[str, str | None]:
        """Each logical index's base URL as a plan records it (credentials redacted), or None."""
        return {n: redact_url(d.url) if d.url else None for n, d in sorted(self.indexes.items())}

    def with_index_urls(self, urls: Mapping[str, str]) -> Definitions:
        """A copy with base URLs overridden (``--index NAME=URL``); a mirror keeps the same paths."""
        indexes = dict(self.indexes)
        for name, url in urls.items():
            if name not in indexes:
                raise IndexDefinitionError(
                    f"unknown index {name!r} in --index", hint=f"known indexes: {', '.join(indexes)}"
                )
            indexes[name] = replace(indexes[name], url=normalize_base_url(url))
        return replace(self, indexes=indexes)


def expand_page(template: str, *, name: str, ctx: RouteContext, fi_cuda: str | None = None) -> str | None:
    """Fill a page template; None when a variable it needs is unknown in this context."""
    needed = set(re.findall(r"{(\w+)}", template))
    values: dict[str, str | None] = {
        "name": name,
        "torch_channel": _channel_prefix(ctx.torch_channel),
        "cuda": ctx.cuda,
        "fi_channel": "nightly/" if ctx.flashinfer_channel == "nightly" else "",
        "fi_cuda": fi_cuda,
        "torch_series": ctx.torch_series,
    }
    if any(values.get(k) is None for k in needed):
        return None
    return template.format(**{k: values[k] for k in needed})


def _channel_prefix(channel: str) -> str:
    return {"nightly": "nightly/", "test": "test/"}.get(channel, "")


def _patterns(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(p, str) for p in raw):
        raise IndexDefinitionError(f"{where}: 'packages' must be a non-empty list of names")
    return tuple(p if "*" in p else canonicalize_name(p) for p in raw)


def load_definitions(directory: Path | None = None) -> Definitions:
    directory = directory or data_dir()
    indexes: dict[str, IndexDefinition] = {}
    for name in INDEX_NAMES:
        raw = read_toml(directory / f"{name}.toml")
        try:
            url = raw.get("url", "")
            indexes[name] = IndexDefinition(
                name=raw["name"],
                url=normalize_base_url(url) if url else "",
                dialect=raw["dialect"],
                hashes=raw["hashes"],
                metadata=raw["metadata"],
                hosts=tuple(h.lower() for h in raw.get("hosts", [])),
                channels=dict(raw.get("channels", {})),
                retention_days=int(raw.get("retention-days", 0)),
                cuda_labels=tuple(raw.get("cuda-labels", [])),
            )
        except KeyError as exc:
            raise IndexDefinitionError(f"{directory / (name + '.toml')}: missing key {exc}") from exc
    routing = read_toml(directory / "routing.toml")
    routes = []
    for i, r in enumerate(routing.get("route", [])):
        where = f"routing.toml route #{i + 1}"
        if r.get("index") not in indexes:
            raise IndexDefinitionError(f"{where}: unknown index {r.get('index')!r}")
        routes.append(
            Route(
                patterns=_patterns(r.get("packages"), where),
                index=r["index"],
                page=r["page"],
                versions=_spec(r.get("versions"), where),
                flashinfer_channel=(r.get("when") or {}).get("flashinfer"),
                legacy=bool(r.get("legacy", False)),
            )
        )
    comp = read_toml(directory / "components.toml")
    couplings = []
    for i, c in enumerate(comp.get("coupling", [])):
        where = f"components.toml coupling #{i + 1}"
        couplings.append(
            CouplingRule(
                patterns=_patterns(c.get("packages"), where),
                coupling=Coupling(c["coupling"]),
                why=c.get("why", ""),
                versions=_spec(c.get("versions"), where),
                local=re.compile(c["local"]) if "local" in c else None,
            )
        )
    fi = comp["flashinfer"]
    arch_table = tuple(
        (
            _spec(row["versions"], "components.toml jit-cache-archs"),
            {k: tuple(v) for k, v in row["labels"].items()},
            {k: tuple(v) for k, v in row.get("aarch64-extra", {}).items()},
        )
        for row in comp.get("jit-cache-archs", [])
    )
    flashinfer = FlashInferRules(
        python=canonicalize_name(fi["python"]),
        cubin=canonicalize_name(fi["cubin"]),
        jit_cache=canonicalize_name(fi["jit-cache"]),
        providers=fi["providers"],
        agnostic_since=Version(fi["agnostic-since"]),
        jit_cache_since=Version(fi["jit-cache-since"]),
        providers_since=Version(fi["providers-since"]),
        arch_table=arch_table,  # type: ignore[arg-type]
        components=_components(fi),
    )
    return Definitions(
        indexes=indexes,
        routes=tuple(routes),
        default_index=routing.get("default", "pypi"),
        couplings=tuple(couplings),
        flashinfer=flashinfer,
        pytorch_family=frozenset(canonicalize_name(n) for n in _patterns((comp.get("pytorch") or {}).get("family"), "components.toml [pytorch] family")),
        source=directory,
    )


def _components(fi: Mapping[str, Any]) -> tuple[NormalizedName, ...]:
    """components.toml ``[flashinfer] components``: each one of python / cubin / jit-cache."""
    named = {canonicalize_name(fi[k]) for k in ("python", "cubin", "jit-cache")}
    raw = fi.get("components")
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise IndexDefinitionError("components.toml [flashinfer]: 'components' must be a list of names")
    out = tuple(canonicalize_name(n) for n in raw)
    if set(out) != named or len(out) != len(named):
        raise IndexDefinitionError(
            "components.toml [flashinfer]: 'components' must list python, cubin and jit-cache once each",
            hint=f"expected the names {', '.join(sorted(named))}",
        )
    return out


def iter_index_names(defs: Definitions) -> Iterable[str]:
    return defs.indexes.keys()


__all__ = [
    "Definitions",
    "FlashInferRules",
    "IndexDefinition",
    "PageLocation",
    "Route",
    "RouteContext",
    "expand_page",
    "load_definitions",
    "normalize_base_url",
    "redact_url",
    "strip_userinfo",
]
_ = field  # keep dataclasses.field importable for subclasses
