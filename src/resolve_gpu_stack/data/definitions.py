"""Index definitions, the routing table and the component rules, loaded from ``indexes/*.toml``.

Pure: stdlib + packaging. Which index serves what lives in the data files, not in code; the
values they are loaded into are in ``rules.py`` (re-exported here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..errors import IndexDefinitionError, UsageError
from ..model import Coupling, CudaLabel
from ..model.canonical import digest
from ..model.channel import FLASHINFER_CHANNEL_NAMES, TORCH_ORIGINS
from ..urls import normalize_base_url, redact_url, strip_userinfo
from .rules import (
    CHANNEL_TABLES,
    DIALECTS,
    INDEX_NAMES,
    PACKAGE_INDEX_PREFIX,
    TEMPLATE_VARIABLES,
    VARIANT_JUDGES,
    AbiRules,
    ArchRow,
    CouplingRule,
    FlashInferExtra,
    FlashInferRules,
    IndexDefinition,
    NoBuildsFrom,
    PageLocation,
    PerTorchDialect,
    PerTorchRule,
    Route,
    RouteContext,
    VariantProperty,
    VariantRules,
    expand_page,
    package_index_name,
)
from .toml import TomlReader, data_dir, load_toml, parse_toml, read_text

if TYPE_CHECKING:
    from .gpus import GpuTable

GPUS_FILE = "gpus.toml"


def read_toml(path: Path, *, error: type[UsageError] = IndexDefinitionError) -> dict[str, Any]:
    """A TOML file as a dict; a missing, unreadable or malformed file raises ``error`` naming it."""
    return load_toml(path, error=error)


@dataclass(frozen=True, slots=True)
class GpuSource:
    """``gpus.toml`` as read, parsed into a ``GpuTable`` on first use (only ``--gpu``,
    ``--require-api`` and ``doctor`` ask: a plain resolve never imports the table's code)."""

    where: str  # the file, for errors
    text: str
    _table: list[GpuTable] = field(default_factory=list, compare=False, repr=False)  # a memo, not data

    def table(self) -> GpuTable:
        if not self._table:
            from .gpus import read_gpu_table  # --gpu/--api only: +18 ms on a plain resolve

            self._table.append(read_gpu_table(parse_toml(self.text, self.where), self.where))
        return self._table[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class Definitions:
    """Everything under indexes/: the three logical indexes, the routes, the component rules."""

    indexes: Mapping[str, IndexDefinition]
    routes: tuple[Route, ...]
    couplings: tuple[CouplingRule, ...]
    flashinfer: FlashInferRules
    abi: AbiRules  # components.toml [abi]
    pytorch_family: frozenset[NormalizedName] = frozenset()  # components.toml [pytorch] family
    family_built_for: Mapping[NormalizedName, str] = field(default_factory=dict)  # [pytorch] built-for: member -> "date" (else "pin")
    per_torch: PerTorchRule | None = None  # components.toml [per-torch]: builds that name their torch in the local label
    variants: VariantRules | None = None  # components.toml [variants]: the variant properties judged (PEP 850, a draft)
    layouts: Mapping[str, str] = field(default_factory=dict)  # routing.toml [layouts]: name -> page template
    source: Path | None = None
    gpus: GpuSource | None = None  # gpus.toml (None: definitions without a GPU table)
    # name -> the coupling rules whose patterns name it, worked out once per name (every file on a
    # page asks; the rules do not change), and the digest: memos, not part of the value
    _rules_by_name: dict[str, tuple[CouplingRule, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    # (name, FlashInfer channel) -> its routes, and (name, context) -> its pages: the crawl, the
    # finder and the plan ask for every name several times (~650 and ~440 times in a 215-package
    # resolve), and each answer is a pass over every route's patterns
    _routes_memo: dict[tuple[str, str, str, bool], tuple[Route, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _pages_memo: dict[tuple[str, RouteContext, bool], tuple[PageLocation, ...]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _digest: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def digest(self) -> str:
        """The sha256 of the definitions' data (never of a memo: asking a question of them leaves
        it as it was), worked out once per object: a lock shares one for all targets."""
        if not self._digest:
            self._digest.append(digest(self))
        return self._digest[0]

    def gpu_table(self) -> GpuTable:
        """The GPU table (``gpus.toml``) these definitions came with."""
        if self.gpus is None:
            raise IndexDefinitionError("these index definitions have no GPU table (gpus.toml)")
        return self.gpus.table()

    # -- routing ---------------------------------------------------------------------------
    def routes_for(self, name: str, ctx: RouteContext, *, kept: bool = False) -> list[Route]:
        """The routes that own ``name`` under ``ctx`` (``kept``: instead the routes where a kept
        release of it is read, never for a candidate: routing.toml ``kept = true``)."""
        key = (name, ctx.flashinfer_channel, ctx.torch_from, kept)
        known = self._routes_memo.get(key)
        if known is None:
            known = self._routes_memo[key] = tuple(self._routes_for(canonicalize_name(name), ctx, kept))
        return list(known)

    def _routes_for(self, name: str, ctx: RouteContext, kept: bool) -> list[Route]:
        if kept:
            return [r for r in self.routes if r.kept and _claims(r, name)]
        applicable = [r for r in self.routes if _applies(r, ctx)]
        return _explicit_routes(applicable, name) or self._wildcard(applicable, name)

    def _wildcard(self, applicable: list[Route], name: str) -> list[Route]:
        """The wildcard routes for a name no applicable route claims; none for a name that some
        route claims under another context (another channel, another torch's origin)."""
        if any(_claims(r, name) for r in self.routes if not r.kept):
            return []
        return [r for r in applicable if r.is_wildcard]

    def owner(self, name: str, version: Version, ctx: RouteContext) -> str | None:
        """The index that owns this exact version of the package under ``ctx``."""
        for route in self.routes_for(name, ctx):
            if route.versions is None or version in route.versions:
                return route.index
        return None

    def pages_for(self, name: str, ctx: RouteContext, *, kept: bool = False) -> list[PageLocation]:
        """Every page to read for ``name`` under ``ctx``, in route order (``kept``: the pages of
        its ``kept`` routes, see ``routes_for``)."""
        key = (name, ctx, kept)
        known = self._pages_memo.get(key)
        if known is None:
            known = self._pages_memo[key] = tuple(self._pages_for(canonicalize_name(name), ctx, kept))
        return list(known)

    def _pages_for(self, name: str, ctx: RouteContext, kept: bool) -> list[PageLocation]:
        out: list[PageLocation] = []
        for route in self.routes_for(name, ctx, kept=kept):
            index = self.indexes[route.index]
            page = route.page
            if index.layout is not None:
                if route.legacy:
                    continue  # optional pages for the record: a mirror layout has none
                page = self.layouts[index.layout]
            labels: list[str | None] = [None]
            if "{fi_cuda}" in route.page:
                labels = list(self.flashinfer_labels(ctx.cuda))
            for label in labels:
                path = expand_page(page, self.template_values(name, ctx, fi_cuda=label))
                if path is None:
                    continue
                url = index.page_url(path)
                if any(loc.url == url and loc.route is route for loc in out):
                    continue  # a layout without the route's folders: one page for every label
                out.append(PageLocation(index=route.index, url=url, route=route, cuda_label=label))
        return out

    def template_values(self, name: str, ctx: RouteContext, *, fi_cuda: str | None = None) -> dict[str, str | None]:
        """The page-template variables under ``ctx``; a channel's prefix comes from its index's
        ``[channels]`` table (None when that table does not name the channel)."""
        return {
            "name": name,
            "torch_channel": self.indexes["pytorch"].channels.get(ctx.torch_channel),
            "cuda": ctx.cuda,
            "fi_channel": self.indexes["flashinfer"].channels.get(ctx.flashinfer_channel),
            "fi_cuda": fi_cuda,
            "torch_series": ctx.torch_series,
        }

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
        return self.coupling_rule(name, version) or (Coupling.AGNOSTIC, "pure package")

    def coupling_rule(self, name: str, version: Version) -> tuple[Coupling, str] | None:
        """The coupling the data gives ``name`` at ``version``; None when no rule matches."""
        local = version.local or ""
        for rule in self._rules_naming(name):
            if rule.versions is not None and version not in rule.versions:
                continue
            if rule.local is not None:
                m = rule.local.match(local)
                if not m:
                    continue
                return rule.coupling, rule.why.format(**m.groupdict())
            return rule.coupling, rule.why
        return None

    def _rules_naming(self, name: str) -> tuple[CouplingRule, ...]:
        """The coupling rules whose patterns name ``name``, in order (worked out once per name)."""
        rules = self._rules_by_name.get(name)
        if rules is None:
            key = canonicalize_name(name)
            rules = self._rules_by_name[name] = tuple(r for r in self.couplings if r.names(key))
        return rules

    def recorded_urls(self) -> dict[str, str | None]:
        """Each logical index's base URL as a plan records it (credentials redacted; a mirror
        layout as its ``LAYOUT:`` prefix), or None."""
        return {n: (f"{d.layout}:" if d.layout else "") + redact_url(d.url) if d.url else None for n, d in sorted(self.indexes.items())}

    def with_index_urls(self, urls: Mapping[str, str]) -> Definitions:
        """A copy with base URLs overridden (``--index NAME=URL``): a mirror keeps the index's
        paths, or says its layout as a prefix (``--index NAME=flat:URL``, routing.toml [layouts])."""
        indexes = dict(self.indexes)
        for name, url in urls.items():
            if name not in indexes:
                raise IndexDefinitionError(f"unknown index {name!r} in --index", hint=f"known indexes: {', '.join(indexes)}")
            layout, url = self.split_layout(url)
            indexes[name] = replace(indexes[name], url=normalize_base_url(url), layout=layout)
        return replace(self, indexes=indexes)

    def with_package_indexes(self, urls: Mapping[str, str]) -> Definitions:
        """A copy where each package of ``urls`` (``--package-index NAME=URL``) is owned by an index of
        its own, ``package:NAME`` at that URL: a simple index (PEP 503 / 691) with one ``NAME/`` page
        below the URL, whose files may live on any host (release assets). Routing stays: NAME is
        read from that index only. torch and FlashInfer's components keep their own indexes
        (``--index NAME=URL`` moves those)."""
        if not urls:
            return self
        indexes = dict(self.indexes)
        routes = list(self.routes)
        for raw, url in sorted(urls.items()):
            name = canonicalize_name(raw)
            if name in ("torch", "torchtriton") or self.flashinfer.members(name):
                raise IndexDefinitionError(
                    f"--package-index {raw}: {name} keeps its own index", hint="move a whole index with --index pytorch=URL or --index flashinfer=URL"
                )
            index = package_index_name(name)
            layout, url = self.split_layout(url)
            indexes[index] = IndexDefinition(name=index, url=normalize_base_url(url), dialect="json-or-html", hosts=("*",), channels={}, layout=layout)
            routes.insert(0, Route(patterns=(name,), index=index, page="{name}/"))
        return replace(self, indexes=indexes, routes=tuple(routes))

    def with_recorded_package_indexes(self, recorded: Mapping[str, str]) -> Definitions:
        """A copy with the package indexes a plan or lock records in its ``indexes`` table
        (``package:NAME`` -> URL), so that ``check`` judges its rows by the routing they were made with."""
        return self.with_package_indexes({k[len(PACKAGE_INDEX_PREFIX) :]: v for k, v in recorded.items() if k.startswith(PACKAGE_INDEX_PREFIX) and v})

    def split_layout(self, url: str) -> tuple[str | None, str]:
        """``flat:https://host/simple/`` -> ("flat", "https://host/simple/"); a plain URL -> (None, url)."""
        prefix, sep, rest = url.partition(":")
        if sep and prefix in self.layouts:
            if not rest:
                raise IndexDefinitionError(f"index URL {url!r}: no URL after {prefix}:", hint=f"e.g. {prefix}:https://mirror.example/simple/")
            return prefix, rest
        if sep and re.fullmatch(r"[a-z][a-z0-9-]*", prefix) and re.match(r"[a-z][a-z0-9+.-]*://", rest):
            raise IndexDefinitionError(f"index URL {url!r}: unknown layout {prefix!r}", hint=f"known layouts: {', '.join(self.layouts) or 'none'}")
        return None, url


def _applies(route: Route, ctx: RouteContext) -> bool:
    """Whether ``route`` owns packages under ``ctx``: not a ``kept`` route, of ``ctx``'s FlashInfer
    channel and of where its torch was published (or of any)."""
    return not route.kept and route.flashinfer_channel in (None, ctx.flashinfer_channel) and route.torch_from in (None, ctx.torch_from)


def _explicit_routes(applicable: list[Route], name: str) -> list[Route]:
    """The routes that name ``name``: an index the user configured for this package owns it alone."""
    explicit = [r for r in applicable if _claims(r, name)]
    own = [r for r in explicit if r.index.startswith(PACKAGE_INDEX_PREFIX)]
    return own or explicit


def _claims(route: Route, name: str) -> bool:
    """Whether ``route`` names ``name`` itself (not as the wildcard)."""
    return not route.is_wildcard and route.names(name)


# -- loading indexes/*.toml -------------------------------------------------------------------

INDEX_KEYS = ("name", "url", "dialect", "hosts", "channels", "retention-days", "cuda-labels", "optional", "without")
ROUTE_KEYS = ("packages", "index", "page", "versions", "when", "legacy", "kept")
COUPLING_KEYS = ("packages", "coupling", "why", "versions", "local")
ABI_KEYS = (
    "stable-since",
    "shim-versioned-since",
    "shim-prefixes",
    "cxx-namespaces",
    "python-prefixes",
    "build-members",
    "cuda-build-members",
    "no-builds-from",
)
NO_BUILDS_KEYS = ("package", "torch", "why", "versions")


def load_definitions(directory: Path | None = None) -> Definitions:
    """Everything under ``directory`` (default: the bundled ``indexes/``); any problem raises
    ``IndexDefinitionError`` naming the file, the table and the key."""
    directory = directory or data_dir()
    indexes = {name: _load_index(directory / f"{name}.toml", name) for name in INDEX_NAMES}
    routing = TomlReader(directory / "routing.toml")
    routing_doc = read_toml(directory / "routing.toml")  # read and parsed once: ~0.5 ms a second time
    routes = tuple(_route(routing, raw, f"route #{i + 1}", indexes) for i, raw in enumerate(routing.tables(routing_doc, "route", "routing")))
    layouts = _layouts(routing, routing_doc)
    comp = TomlReader(directory / "components.toml")
    doc = read_toml(directory / "components.toml")
    couplings = tuple(_coupling(comp, raw, f"coupling #{i + 1}") for i, raw in enumerate(comp.tables(doc, "coupling", "components")))
    flashinfer = _flashinfer(comp, doc)
    abi = _abi(comp, doc)
    family = _pytorch_family(comp, doc)
    return Definitions(
        indexes=indexes,
        routes=routes,
        couplings=couplings,
        flashinfer=flashinfer,
        abi=abi,
        pytorch_family=family,
        family_built_for=_family_built_for(comp, doc, family),
        per_torch=_per_torch(comp, doc),
        variants=_variants(comp, doc),
        layouts=layouts,
        source=directory,
        gpus=GpuSource(str(directory / GPUS_FILE), read_text(directory / GPUS_FILE)),
    )


def _load_index(path: Path, expected: str) -> IndexDefinition:
    r = TomlReader(path)
    doc = read_toml(path)
    r.unknown_keys(doc, INDEX_KEYS, "top level")
    name = r.get(doc, "name", str, "top level", required=True)
    if name != expected:
        raise r.fail("top level", f"'name' is {name!r}, expected {expected!r}")
    dialect = r.get(doc, "dialect", str, "top level", required=True)
    if dialect not in DIALECTS:
        raise r.fail("top level", f"'dialect' {dialect!r} is not one of {', '.join(DIALECTS)}")
    url = r.get(doc, "url", str, "top level") or ""
    channels = _channels(r, doc, CHANNEL_TABLES.get(name, ()))
    retention = r.get(doc, "retention-days", int, "top level") or 0
    if retention < 0:
        raise r.fail("top level", f"'retention-days' must be 0 or more, not {retention}")
    return IndexDefinition(
        name=name,
        url=normalize_base_url(url) if url else "",
        dialect=dialect,
        hosts=tuple(h.lower() for h in r.strings(doc, "hosts", "top level") or ()),
        channels=channels,
        retention_days=retention,
        cuda_labels=r.strings(doc, "cuda-labels", "top level") or (),
        optional=bool(r.get(doc, "optional", bool, "top level")),
        without=r.get(doc, "without", str, "top level") or "",
    )


def _channels(r: TomlReader, doc: Mapping[str, Any], required: tuple[str, ...]) -> dict[str, str]:
    """``[channels]``: channel name -> path prefix; every channel in ``required`` must be there."""
    channels = r.get(doc, "channels", dict, "top level") or {}
    for channel in channels:
        r.get(channels, channel, str, "channels")
    missing = [c for c in required if c not in channels]
    if missing:
        raise r.fail("channels", f"no path prefix for channel {missing[0]!r}")
    return dict(channels)


def _route(r: TomlReader, raw: Mapping[str, Any], where: str, indexes: Mapping[str, IndexDefinition]) -> Route:
    r.unknown_keys(raw, ROUTE_KEYS, where)
    index = r.get(raw, "index", str, where, required=True)
    if index not in indexes:
        raise r.fail(where, f"unknown index {index!r}", hint=f"known indexes: {', '.join(indexes)}")
    page = r.get(raw, "page", str, where, required=True)
    unknown = sorted(set(re.findall(r"{(\w+)}", page)) - set(TEMPLATE_VARIABLES))
    if unknown:
        raise r.fail(where, f"page {page!r} uses unknown variable {{{unknown[0]}}}", hint=f"known: {', '.join(TEMPLATE_VARIABLES)}")
    when = r.get(raw, "when", dict, where) or {}
    r.unknown_keys(when, ("flashinfer", "torch"), f"{where} when")
    channel = r.get(when, "flashinfer", str, f"{where} when")
    if channel is not None and channel not in FLASHINFER_CHANNEL_NAMES:
        raise r.fail(f"{where} when", f"'flashinfer' {channel!r} is not one of {', '.join(FLASHINFER_CHANNEL_NAMES)}")
    torch_from = r.get(when, "torch", str, f"{where} when")
    if torch_from is not None and torch_from not in TORCH_ORIGINS:
        raise r.fail(f"{where} when", f"'torch' {torch_from!r} is not one of {', '.join(TORCH_ORIGINS)}")
    return Route(
        patterns=_patterns(r, raw, where),
        index=index,
        page=page,
        versions=_spec(r, raw, where),
        flashinfer_channel=channel,
        torch_from=torch_from,
        legacy=bool(r.get(raw, "legacy", bool, where)),
        kept=bool(r.get(raw, "kept", bool, where)),
    )


def _layouts(r: TomlReader, doc: Mapping[str, Any]) -> dict[str, str]:
    """``[layouts]``: mirror layout name -> the page template every route of such a mirror reads."""
    table = r.get(doc, "layouts", dict, "top level") or {}
    out = {}
    for name in table:
        page = r.get(table, name, str, "layouts", required=True)
        unknown = sorted(set(re.findall(r"{(\w+)}", page)) - set(TEMPLATE_VARIABLES))
        if unknown:
            raise r.fail("layouts", f"{name}: page {page!r} uses unknown variable {{{unknown[0]}}}", hint=f"known: {', '.join(TEMPLATE_VARIABLES)}")
        out[name] = page
    return out


def _coupling(r: TomlReader, raw: Mapping[str, Any], where: str) -> CouplingRule:
    r.unknown_keys(raw, COUPLING_KEYS, where)
    local = r.get(raw, "local", str, where)
    pattern = _regex(r, local, "local", where) if local is not None else None
    return CouplingRule(
        patterns=_patterns(r, raw, where),
        coupling=r.enum(Coupling, r.get(raw, "coupling", str, where, required=True), where),
        why=r.get(raw, "why", str, where) or "",
        versions=_spec(r, raw, where),
        local=pattern,
    )


def _flashinfer(r: TomlReader, doc: Mapping[str, Any]) -> FlashInferRules:
    """``[flashinfer]`` (with ``[flashinfer.extras]``) and ``[[jit-cache-archs]]``."""
    fi = r.get(doc, "flashinfer", dict, "top level", required=True)

    def name(key: str) -> NormalizedName:
        return canonicalize_name(r.get(fi, key, str, "flashinfer", required=True))

    def version(key: str) -> Version:
        return r.version(r.get(fi, key, str, "flashinfer", required=True), f"flashinfer {key!r}")

    return FlashInferRules(
        python=name("python"),
        cubin=name("cubin"),
        jit_cache=name("jit-cache"),
        providers=r.get(fi, "providers", str, "flashinfer", required=True),
        agnostic_since=version("agnostic-since"),
        jit_cache_since=version("jit-cache-since"),
        providers_since=version("providers-since"),
        arch_table=tuple(_arch_row(r, row, f"jit-cache-archs #{i + 1}") for i, row in enumerate(r.tables(doc, "jit-cache-archs", "components"))),
        components=_components(r, fi, (name("python"), name("cubin"), name("jit-cache"))),
        extras=_flashinfer_extras(r, fi),
    )


def _flashinfer_extras(r: TomlReader, fi: Mapping[str, Any]) -> tuple[FlashInferExtra, ...]:
    """``[flashinfer.extras]``: extra name -> ``{ when-cuda-major = N, since = "V", when-torch = "pypi" }``."""
    table = r.get(fi, "extras", dict, "flashinfer") or {}
    out = []
    for extra in table:
        where = f"flashinfer.extras.{extra}"
        row = r.get(table, extra, dict, "flashinfer.extras", required=True)
        r.unknown_keys(row, ("when-cuda-major", "when-torch", "since"), where)
        major = r.get(row, "when-cuda-major", int, where, required=True)
        since = r.version(r.get(row, "since", str, where, required=True), f"{where} 'since'")
        torch_from = r.get(row, "when-torch", str, where)
        if torch_from not in (None, "pypi", "pytorch"):
            raise r.fail(where, f"'when-torch' {torch_from!r} is not one of pypi, pytorch")
        out.append(FlashInferExtra(name=extra, cuda_major=major, since=since, torch_from=torch_from))
    return tuple(out)


def _components(r: TomlReader, fi: Mapping[str, Any], named: tuple[NormalizedName, ...]) -> tuple[NormalizedName, ...]:
    """``[flashinfer] components``: python, cubin and jit-cache once each, in install order."""
    out = tuple(canonicalize_name(n) for n in r.strings(fi, "components", "flashinfer", required=True) or ())
    if sorted(out) != sorted(named):
        raise r.fail("flashinfer", "'components' must list python, cubin and jit-cache once each", hint=f"expected the names {', '.join(sorted(named))}")
    return out


def _pytorch_family(r: TomlReader, doc: Mapping[str, Any]) -> frozenset[NormalizedName]:
    """``[pytorch] family``: the packages built and released together with torch."""
    table = r.get(doc, "pytorch", dict, "top level", required=True)
    return frozenset(canonicalize_name(n) for n in _patterns(r, {"packages": table.get("family")}, "pytorch family"))


def _abi(r: TomlReader, doc: Mapping[str, Any]) -> AbiRules:
    """``[abi]``: the C-shim prefixes, the C++ namespaces, the per-torch build member patterns."""
    table = r.get(doc, "abi", dict, "top level", required=True)
    r.unknown_keys(table, ABI_KEYS, "abi")

    def version(key: str, *, required: bool) -> Version | None:
        text = r.get(table, key, str, "abi", required=required)
        return None if text is None else r.version(text, f"abi {key!r}")

    def prefixes(key: str) -> tuple[str, ...]:
        values = r.strings(table, key, "abi", required=True) or ()
        if not values or not all(values):
            raise r.fail("abi", f"{key!r} must be a non-empty array of non-empty strings")
        return values

    patterns = [
        _regex(r, text, "build-members", "abi", groups=("major", "minor"), no_groups=f"'build-members' {text!r} has no groups named 'major' and 'minor'")
        for text in r.strings(table, "build-members", "abi") or ()
    ]
    cuda_patterns = [
        _regex(r, text, "cuda-build-members", "abi", groups=("cuda",), no_groups=f"'cuda-build-members' {text!r} has no group named 'cuda'")
        for text in r.strings(table, "cuda-build-members", "abi") or ()
    ]
    stable = version("stable-since", required=True)
    assert stable is not None
    return AbiRules(
        stable_since=stable,
        shim_versioned_since=version("shim-versioned-since", required=False),
        shim_prefixes=prefixes("shim-prefixes"),
        cxx_namespaces=prefixes("cxx-namespaces"),
        python_prefixes=prefixes("python-prefixes"),
        build_members=tuple(patterns),
        cuda_build_members=tuple(cuda_patterns),
        no_builds_from=tuple(_no_builds(r, row, f"abi.no-builds-from #{i + 1}") for i, row in enumerate(r.tables(table, "no-builds-from", "abi"))),
    )


def _no_builds(r: TomlReader, row: Mapping[str, Any], where: str) -> NoBuildsFrom:
    r.unknown_keys(row, NO_BUILDS_KEYS, where)
    return NoBuildsFrom(
        package=canonicalize_name(r.get(row, "package", str, where, required=True)),
        torch=r.version(r.get(row, "torch", str, where, required=True), f"{where} 'torch'"),
        why=r.get(row, "why", str, where, required=True),
        versions=_spec(r, row, where),
    )


def _per_torch(r: TomlReader, doc: Mapping[str, Any]) -> PerTorchRule | None:
    """``[per-torch]``: ``cxx11-abi-since`` (a torch version) and ``[[per-torch.dialect]]`` rows,
    each a ``name``, a ``local`` regular expression (with the named groups torch or torch_major and
    torch_minor; cuda or cuda_major and cuda_minor; optionally cxx11abi) and its ``source``."""
    table = r.get(doc, "per-torch", dict, "top level")
    if table is None:
        return None
    r.unknown_keys(table, ("dialect", "cxx11-abi-since"), "per-torch")
    since = r.version(r.get(table, "cxx11-abi-since", str, "per-torch", required=True), "per-torch 'cxx11-abi-since'")
    dialects = []
    for i, row in enumerate(r.tables(table, "dialect", "per-torch")):
        where = f"per-torch.dialect #{i + 1}"
        r.unknown_keys(row, ("name", "local", "source"), where)
        text = r.get(row, "local", str, where, required=True)
        pattern = _regex(r, text, "local", where)
        names = set(pattern.groupindex)
        if not ({"torch"} <= names or {"torch_major", "torch_minor"} <= names) or not ({"cuda"} <= names or {"cuda_major", "cuda_minor"} <= names):
            raise r.fail(where, "'local' must have the named groups torch (or torch_major and torch_minor) and cuda (or cuda_major and cuda_minor)")
        dialects.append(PerTorchDialect(name=r.get(row, "name", str, where, required=True), local=pattern, source=r.get(row, "source", str, where) or ""))
    if not dialects:
        raise r.fail("per-torch", "no [[per-torch.dialect]]: at least one dialect is needed")
    return PerTorchRule(dialects=tuple(dialects), cxx11_abi_since=since)


_VARIANT_GROUPS = {"cuda-at-least": ("major", "minor"), "cuda-at-most": ("major", "minor"), "gpu-served": ("major", "minor"), "torch-series": ("release",)}


def _variants(r: TomlReader, doc: Mapping[str, Any]) -> VariantRules | None:
    """``[variants]``: ``[[variants.property]]`` rows, each a ``namespace``, a ``feature``, a
    ``judge`` (one of VARIANT_JUDGES), a ``value`` regular expression with the named groups that
    judge reads (major and minor; release for torch-series) and its ``source``."""
    table = r.get(doc, "variants", dict, "top level")
    if table is None:
        return None
    r.unknown_keys(table, ("property",), "variants")
    rows = []
    for i, row in enumerate(r.tables(table, "property", "variants")):
        where = f"variants.property #{i + 1}"
        r.unknown_keys(row, ("namespace", "feature", "judge", "value", "source"), where)
        judge = r.get(row, "judge", str, where, required=True)
        if judge not in VARIANT_JUDGES:
            raise r.fail(where, f"'judge' {judge!r} is not one of {', '.join(VARIANT_JUDGES)}")
        groups = _VARIANT_GROUPS[judge]
        value = _regex(
            r,
            r.get(row, "value", str, where, required=True),
            "value",
            where,
            groups=groups,
            no_groups=f"'value' must have the named groups {', '.join(groups)}",
        )
        rows.append(
            VariantProperty(
                namespace=r.get(row, "namespace", str, where, required=True),
                feature=r.get(row, "feature", str, where, required=True),
                judge=judge,
                value=value,
                source=r.get(row, "source", str, where) or "",
            )
        )
    return VariantRules(tuple(rows))


def _regex(r: TomlReader, text: str, key: str, where: str, *, groups: tuple[str, ...] = (), no_groups: str = "") -> re.Pattern[str]:
    """``key``'s regular expression ``text``, compiled; one that does not compile, or lacks any of
    the named ``groups`` (then the error says ``no_groups``), fails naming ``where``."""
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise r.fail(where, f"{key!r} {text!r} is not a regular expression: {exc}") from None
    if not set(groups) <= set(pattern.groupindex):
        raise r.fail(where, no_groups)
    return pattern


FAMILY_BUILT_FOR = ("pin", "date")  # components.toml [pytorch] built-for: how a member's nightly names its torch


def _family_built_for(r: TomlReader, doc: Mapping[str, Any], family: frozenset[NormalizedName]) -> dict[NormalizedName, str]:
    """``[pytorch] built-for``: member -> ``date`` / ``pin``, for members of ``family`` (``[pytorch] family``) only."""
    table = r.get(doc, "pytorch", dict, "top level", required=True)
    r.unknown_keys(table, ("family", "built-for"), "pytorch")
    raw = r.get(table, "built-for", dict, "pytorch") or {}
    out: dict[NormalizedName, str] = {}
    for member in raw:
        rule = r.get(raw, member, str, "pytorch built-for", required=True)
        if rule not in FAMILY_BUILT_FOR:
            raise r.fail("pytorch built-for", f"{member}: {rule!r} is not one of {', '.join(FAMILY_BUILT_FOR)}")
        if canonicalize_name(member) not in family:
            raise r.fail("pytorch built-for", f"{member} is not in the family")
        out[canonicalize_name(member)] = rule
    return out


def _arch_row(r: TomlReader, row: Mapping[str, Any], where: str) -> ArchRow:
    r.unknown_keys(row, ("versions", "labels", "aarch64-extra"), where)
    spec = _spec(r, row, where)
    if spec is None:
        raise r.fail(where, "missing 'versions'")

    def label_table(key: str) -> dict[str, tuple[str, ...]]:
        table = r.get(row, key, dict, where, required=key == "labels") or {}
        return {label: r.strings(table, label, f"{where} {key}", required=True) or () for label in table}

    return spec, label_table("labels"), label_table("aarch64-extra")


def _patterns(r: TomlReader, raw: Mapping[str, Any], where: str) -> tuple[str, ...]:
    names = r.strings(raw, "packages", where, required=True) or ()
    if not names:
        raise r.fail(where, "'packages' must be a non-empty array of names")
    return tuple(p if "*" in p else canonicalize_name(p) for p in names)


def _spec(r: TomlReader, raw: Mapping[str, Any], where: str) -> SpecifierSet | None:
    text = r.get(raw, "versions", str, where)
    if text is None:
        return None
    try:
        return SpecifierSet(text, prereleases=True)
    except InvalidSpecifier:
        raise r.fail(where, f"bad version specifier {text!r}") from None


__all__ = [
    "INDEX_NAMES",
    "AbiRules",
    "CouplingRule",
    "Definitions",
    "GpuSource",
    "data_dir",
    "FlashInferRules",
    "IndexDefinition",
    "PageLocation",
    "Route",
    "RouteContext",
    "expand_page",
    "load_definitions",
    "read_toml",
    "normalize_base_url",
    "redact_url",
    "strip_userinfo",
]
