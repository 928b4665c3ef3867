"""``--build`` values (pure): a package name, or a PEP 508 direct reference to a source tree, in
the spelling pip and uv write: ``NAME @ git+URL[@REV][#subdirectory=DIR]`` (a git repository at
a revision) or ``NAME @ file:///path/to/tree`` (a local, possibly patched, checkout).

``SourceTree`` is such a source once fetched (``env/sources.py``): its commit, the archive of its
files (whose sha256 is the build's input: a patch gives another build) and the metadata read from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..errors import UsageError
from .plan import SourceOrigin

_HINT = "write a package name (--build sgl-kernel), or a direct reference: 'NAME @ git+URL@REV#subdirectory=DIR' or 'NAME @ file:///path/to/tree'"


@dataclass(frozen=True, slots=True, kw_only=True)
class BuildSpec:
    """One ``--build`` value: the package, and the source tree it is built from (None: its sdist)."""

    name: NormalizedName
    source: SourceOrigin | None = None  # not fetched yet: no commit


def parse_build_spec(text: str) -> BuildSpec:
    """``sgl-kernel`` or ``sgl-kernel @ git+file:///src/sglang@v0.5#subdirectory=sgl-kernel``."""
    raw = text.strip()
    if "@" not in raw:
        if not raw or any(c in raw for c in "<>=!~;[ "):
            raise UsageError(f"--build {text!r} is not a package name", hint=_HINT)
        return BuildSpec(name=canonicalize_name(raw))
    try:
        req = Requirement(raw)
    except InvalidRequirement as exc:
        raise UsageError(f"--build {text!r} is not a PEP 508 direct reference ({exc})", hint=_HINT) from None
    if req.url is None or req.specifier or req.extras or req.marker is not None:
        raise UsageError(f"--build {text!r}: only NAME @ URL is a build source (no version, extras or markers)", hint=_HINT)
    return BuildSpec(name=canonicalize_name(req.name), source=parse_source_url(req.url, text))


def parse_source_url(url: str, text: str) -> SourceOrigin:
    """A direct URL's source: ``git+SCHEME://...[@REV][#subdirectory=DIR]`` or ``file:///path``."""
    parts = urlsplit(url)
    fragment = dict(p.split("=", 1) for p in parts.fragment.split("&") if "=" in p)
    subdirectory = fragment.get("subdirectory") or None
    if subdirectory is not None and (subdirectory.startswith("/") or ".." in subdirectory.split("/")):
        raise UsageError(f"--build {text!r}: subdirectory {subdirectory!r} must be a relative folder inside the repository", hint=_HINT)
    if parts.scheme.startswith("git+"):
        return _git_source(parts, text, subdirectory)
    if parts.scheme == "file":
        return _folder_source(parts, text, subdirectory)
    raise UsageError(f"--build {text!r}: a build source is git+URL or file:///path, not {parts.scheme or 'a bare path'}", hint=_HINT)


def _git_source(parts: SplitResult, text: str, subdirectory: str | None) -> SourceOrigin:
    """A ``git+SCHEME://...[@REV]`` source: the repository, the revision asked for."""
    scheme = parts.scheme[len("git+") :]
    if scheme not in ("file", "https", "http", "ssh"):
        raise UsageError(f"--build {text!r}: git over {scheme!r} is not supported", hint="use git+https://, git+ssh:// or git+file://")
    path, rev = parts.path, None
    if "@" in path.rsplit("/", 1)[-1]:
        path, rev = path.rsplit("@", 1)
    repo = f"{scheme}://{parts.netloc}{path}"
    if parts.username or parts.password:
        raise UsageError(
            f"--build: a git URL with credentials in it ({scheme}://...@...)", hint="give git its credentials through its own helper, never in the URL"
        )
    return SourceOrigin(kind="git", url=repo, rev=rev or None, subdirectory=subdirectory)


def _folder_source(parts: SplitResult, text: str, subdirectory: str | None) -> SourceOrigin:
    """A ``file:///path`` source: a folder on this machine (and the subdirectory in it)."""
    if parts.netloc not in ("", "localhost"):
        raise UsageError(f"--build {text!r}: a file URL names a folder on this machine (file:///path)", hint=_HINT)
    path = unquote(parts.path)
    if subdirectory:
        path = path.rstrip("/") + "/" + subdirectory
    return SourceOrigin(kind="directory", url=path.rstrip("/") or "/")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceTree:
    """A build source fetched: its origin (with the commit), the archive of its files in the wheel
    cache (``url`` a file URL; ``sha256`` the digest of the tree's files) and its metadata."""

    name: NormalizedName
    version: Version
    origin: SourceOrigin
    url: str
    filename: str
    sha256: str
    size: int
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None


__all__ = ["BuildSpec", "SourceTree", "parse_build_spec", "parse_source_url"]
