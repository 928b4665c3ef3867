"""The values ``indexes/*.toml`` is loaded into: indexes, routes, page templates, component rules.

Pure: stdlib + packaging. ``definitions.py`` loads them and answers questions with them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from packaging.version import Version

from ..errors import IndexDefinitionError
from ..model import Coupling
from ..model.channel import FLASHINFER_CHANNEL_NAMES, TORCH_CHANNEL_NAMES, torch_origin
from ..model.channel import torch_channel as channel_of
from ..model.kept import KeptTorch
from ..urls import strip_userinfo

INDEX_NAMES = ("pytorch", "flashinfer", "pypi")
# A logical index the user adds for one package (``--package-index NAME=URL``, config
# ``package-indexes``) is named ``package:NAME``; it alone owns NAME (see ``Definitions.routes_for``).
PACKAGE_INDEX_PREFIX = "package:"


def package_index_name(package: str) -> str:
    return PACKAGE_INDEX_PREFIX + package


DIALECTS = ("html", "json-or-html")
# The variables a page template may use (indexes/routing.toml documents them).
TEMPLATE_VARIABLES = ("name", "torch_channel", "cuda", "fi_channel", "fi_cuda", "torch_series")
# Which index's [channels] table gives each channel prefix, and the channels it must name.
CHANNEL_TABLES = {"pytorch": TORCH_CHANNEL_NAMES, "flashinfer": FLASHINFER_CHANNEL_NAMES}

ArchRow = tuple[SpecifierSet, Mapping[str, tuple[str, ...]], Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True, slots=True)
class NamePatterns:
    """Shell-style patterns (``fnmatch.fnmatchcase``: case-sensitive) a package name is matched
    against, as one set of the plain names and one regular expression of the others: a match is a
    look-up and at most one regex, not a pass over every pattern (a 215-package crawl asks ~15,000
    times). ``NamePatterns.of(ps)(name)`` is ``any(fnmatchcase(name, p) for p in ps)``."""

    plain: frozenset[str]
    wild: re.Pattern[str] | None

    @classmethod
    def of(cls, patterns: Iterable[str]) -> NamePatterns:
        plain = frozenset(p for p in patterns if not any(c in p for c in "*?["))
        wild = [fnmatch.translate(p) for p in patterns if p not in plain]  # each is "(?s:...)\\Z": alternatives anchored alike
        return cls(plain, re.compile("|".join(wild)) if wild else None)

    def __call__(self, name: str) -> bool:
        return name in self.plain or (self.wild is not None and self.wild.match(name) is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexDefinition:
    """One logical index of ``indexes/<name>.toml``: where it is, its page dialect, hosts and channels."""

    name: str
    url: str  # base URL, ends with "/"; "" when not configured yet (pypi)
    dialect: str  # html | json-or-html
    hosts: tuple[str, ...]
    channels: Mapping[str, str]  # channel name -> path prefix below the base URL
    retention_days: int = 0
    cuda_labels: tuple[str, ...] = ()
    layout: str | None = None  # a mirror layout of routing.toml [layouts] (--index NAME=flat:URL); None: the index's own paths
    optional: bool = False  # a plan needs it only for what it must take from there: unreachable, what only it has is left out
    without: str = ""  # what a plan without it costs the user, in words (said with the warning)
    _own_host: list[str] = field(default_factory=list, init=False, repr=False, compare=False)  # the base URL's host, split once: a memo

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
        if not self._own_host:
            self._own_host.append((urlsplit(self.url).hostname or "").lower())
        return "*" in self.hosts or host == self._own_host[0] or host in self.hosts


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """A ``routing.toml`` route: which packages are read from which index's page, for which versions."""

    patterns: tuple[str, ...]
    index: str
    page: str
    versions: SpecifierSet | None = None
    flashinfer_channel: str | None = None  # "stable" | "nightly" | None (any)
    torch_from: str | None = None  # "pytorch" | "pypi" | None (any): where the plan's torch was published
    legacy: bool = False
    kept: bool = False  # read only to know a kept torch's own release (its METADATA, its exports): never a candidate
    _names: NamePatterns = field(init=False, repr=False, compare=False)  # ``patterns`` compiled: not part of the value

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names", NamePatterns.of(self.patterns))

    def names(self, name: str) -> bool:
        return self._names(name)

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
    torch_from: str = "pytorch"  # where the plan's torch was published (model.channel.torch_origin)

    @classmethod
    def of_kept(cls, kept: KeptTorch | None, *, torch_channel: str | None = None, flashinfer_channel: str = "stable") -> RouteContext:
        """The routing of a target whose kept torch is ``kept`` (None: none): its CUDA, channel,
        series and where it was published (the family follows it)."""
        label = kept.label if kept is not None else None
        return cls.of_torch(
            kept.version if kept is not None else None, str(label) if label else None, torch_channel=torch_channel, flashinfer_channel=flashinfer_channel
        )

    @classmethod
    def of_torch(cls, torch: Version | None, cuda: str | None, *, torch_channel: str | None = None, flashinfer_channel: str = "stable") -> RouteContext:
        """The routing of a target whose torch is ``torch`` (None: none), of CUDA label ``cuda``:
        its channel (unless given), its series, and where it was published (the family follows it)."""
        return cls(
            torch_channel=torch_channel or (channel_of(torch) if torch is not None else "stable"),
            cuda=cuda,
            flashinfer_channel=flashinfer_channel,
            torch_series=f"{torch.major}.{torch.minor}" if torch is not None else None,
            torch_from=torch_origin(torch),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PageLocation:
    """One page to read for a package, and the route that sent us there."""

    index: str
    url: str
    route: Route
    cuda_label: str | None = None  # the {fi_cuda} value this page was expanded with


@dataclass(frozen=True, slots=True, kw_only=True)
class CouplingRule:
    """A ``components.toml`` coupling: how the packages it names are bound to the kept torch, and why."""

    patterns: tuple[str, ...]
    coupling: Coupling
    why: str
    versions: SpecifierSet | None = None
    local: re.Pattern[str] | None = None
    _names: NamePatterns = field(init=False, repr=False, compare=False)  # ``patterns`` compiled: not part of the value

    def __post_init__(self) -> None:
        object.__setattr__(self, "_names", NamePatterns.of(self.patterns))

    def names(self, name: str) -> bool:
        return self._names(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltFor:
    """What a per-torch build's local label says it was built for."""

    torch: str  # the torch series, "2.9"
    cuda: str  # CUDA digits: "12" (a major) or "128" (major and minor: a label)
    cxx11abi: str | None = None  # "true" | "false" | None (the label does not say)
    dialect: str = ""  # the name of the components.toml [[per-torch.dialect]] that read it


@dataclass(frozen=True, slots=True, kw_only=True)
class PerTorchDialect:
    """One way of writing the torch and CUDA of a build in its local label (components.toml
    ``[[per-torch.dialect]]``): a regular expression over the label as PEP 440 normalizes it, with
    the named groups torch (``2.9``) or torch_major and torch_minor, cuda (``12``, ``128``) or
    cuda_major and cuda_minor, and optionally cxx11abi (``true``/``false``)."""

    name: str
    local: re.Pattern[str]
    source: str = ""

    def read(self, label: str) -> BuiltFor | None:
        m = self.local.match(label)
        if m is None:
            return None
        groups = m.groupdict()
        torch = groups.get("torch") or f"{int(groups['torch_major'])}.{int(groups['torch_minor'])}"
        cuda = groups.get("cuda") or f"{int(groups['cuda_major'])}{int(groups['cuda_minor'])}"
        return BuiltFor(torch=torch, cuda=cuda, cxx11abi=groups.get("cxx11abi"), dialect=self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class PerTorchRule:
    """components.toml ``[per-torch]``: the dialects in which a build says its torch in its local
    version label (``+cu12torch2.9cxx11abiTRUE``, ``+cu128torch2.9``, ``+cu.12.8.torch.2.11``,
    ``+pt29cu128``), and since which torch the torch wheels use the C++11 ABI."""

    dialects: tuple[PerTorchDialect, ...]
    cxx11_abi_since: Version

    def built_for(self, label: str | None) -> BuiltFor | None:
        """What ``label`` (a normalized local version) says its build was built for; None when no
        dialect reads it (a label naming no torch: ``cu130``, or none)."""
        if not label:
            return None
        return next((b for d in self.dialects if (b := d.read(label)) is not None), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferExtra:
    """components.toml ``[flashinfer.extras]``: flashinfer-python's extra ``name`` is asked for when
    torch's CUDA major is ``cuda_major`` (its nvidia-cutlass-dsl build for that CUDA), from ``since`` on."""

    name: str
    cuda_major: int
    since: Version  # the first release publishing it (a release before it is resolved without it)
    torch_from: str | None = None  # "pypi" | "pytorch" | None (any): only for a torch published there


@dataclass(frozen=True, slots=True, kw_only=True)
class FlashInferRules:
    """``components.toml`` ``[flashinfer]``: FlashInfer's package names and the releases its rules change at."""

    python: NormalizedName
    cubin: NormalizedName
    jit_cache: NormalizedName
    providers: str  # fnmatch pattern
    agnostic_since: Version
    jit_cache_since: Version
    providers_since: Version
    arch_table: tuple[ArchRow, ...] = ()
    components: tuple[NormalizedName, ...] = ()  # python, cubin, jit-cache: install order
    extras: tuple[FlashInferExtra, ...] = ()  # [flashinfer.extras]: the extra for torch's CUDA major
    _providers: NamePatterns = field(init=False, repr=False, compare=False)  # ``providers`` compiled: not part of the value

    def __post_init__(self) -> None:
        object.__setattr__(self, "_providers", NamePatterns.of((self.providers,)))

    def extras_for(self, cuda_major: int | None, torch_from: str | None = None) -> tuple[FlashInferExtra, ...]:
        """The extras of flashinfer-python a torch of CUDA ``cuda_major``, published at
        ``torch_from`` (``pypi`` / ``pytorch``), asks for."""
        return tuple(e for e in self.extras if e.cuda_major == cuda_major and e.torch_from in (None, torch_from))

    def is_provider(self, name: str) -> bool:
        return self._providers(name)

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
class NoBuildsFrom:
    """``package`` (at ``versions``) loads none of its per-torch builds from torch ``torch`` on."""

    package: NormalizedName
    torch: Version
    why: str
    versions: SpecifierSet | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AbiRules:
    """components.toml ``[abi]``: how a compiled wheel's imports tell which torch it runs on."""

    stable_since: Version  # the release that brought the LibTorch stable ABI: a stable wheel's lowest floor
    shim_versioned_since: Version | None = None  # from here each shim function is versioned by its release
    shim_prefixes: tuple[str, ...] = ()  # unmangled C-shim function names start with one of these
    cxx_namespaces: tuple[str, ...] = ()  # mangled symbols of these namespaces lock a wheel to one torch
    python_prefixes: tuple[str, ...] = ()  # libtorch_python's THP* bindings (mangled or not)
    build_members: tuple[re.Pattern[str], ...] = ()  # groups major, minor: a member built for one torch
    cuda_build_members: tuple[re.Pattern[str], ...] = ()  # group cuda: a member built for one CUDA major
    no_builds_from: tuple[NoBuildsFrom, ...] = ()

    def is_shim(self, symbol: str) -> bool:
        return not symbol.startswith("_Z") and symbol.startswith(self.shim_prefixes)

    def build_of(self, member: str) -> str | None:
        """The torch series a member is a build for (``"2.9"``), from its file name; None if none."""
        base = member.rsplit("/", 1)[-1]
        for pattern in self.build_members:
            m = pattern.search(base)
            if m:
                return f"{int(m.group('major'))}.{int(m.group('minor'))}"
        return None

    def cuda_build_of(self, member: str) -> int | None:
        """The CUDA major a member is the build for (``_cu13.abi3.so`` -> 13), from its file name."""
        base = member.rsplit("/", 1)[-1]
        for pattern in self.cuda_build_members:
            m = pattern.search(base)
            if m:
                return int(m.group("cuda"))
        return None

    def loads_no_builds(self, package: str, version: Version | None, torch: Version) -> NoBuildsFrom | None:
        """The row saying ``package`` loads none of its builds on ``torch``, if there is one."""
        for row in self.no_builds_from:
            if row.package == package and torch.release >= row.torch.release:
                if row.versions is None or (version is not None and version in row.versions):
                    return row
        return None


def expand_page(template: str, values: Mapping[str, str | None]) -> str | None:
    """Fill a page template; None when a variable it needs is unknown (None) in ``values``."""
    needed = set(re.findall(r"{(\w+)}", template))
    if any(values.get(k) is None for k in needed):
        return None
    return template.format(**{k: values[k] for k in needed})


__all__ = [
    "AbiRules",
    "CHANNEL_TABLES",
    "DIALECTS",
    "INDEX_NAMES",
    "TEMPLATE_VARIABLES",
    "ArchRow",
    "CouplingRule",
    "FlashInferRules",
    "IndexDefinition",
    "NoBuildsFrom",
    "PageLocation",
    "Route",
    "RouteContext",
    "expand_page",
]


VARIANT_JUDGES = ("cuda-at-least", "cuda-at-most", "gpu-served", "torch-series")


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantProperty:
    """One variant property the tool can judge (components.toml ``[[variants.property]]``): its
    ``namespace :: feature`` (PEP 850) and how its values are compared with the target: one of
    ``VARIANT_JUDGES`` (cuda-at-least: the target's CUDA is at least the value; cuda-at-most: at
    most; gpu-served: every ``--gpu`` is one of the values, read by ``value``; torch-series: the kept
    torch's release begins with the value). A feature's values are alternatives (any one suffices)."""

    namespace: str
    feature: str
    judge: str
    value: re.Pattern[str]  # reads one value: the named group(s) the judge needs
    source: str = ""


@dataclass(frozen=True, slots=True)
class VariantRules:
    """components.toml ``[variants]``: the properties the tool judges; any other is not judged,
    and a variant that has one is not planned."""

    properties: tuple[VariantProperty, ...]

    def rule(self, namespace: str, feature: str) -> VariantProperty | None:
        return next((p for p in self.properties if (p.namespace, p.feature) == (namespace, feature)), None)
