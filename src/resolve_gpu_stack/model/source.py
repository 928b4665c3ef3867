"""``--build`` values (pure): a package name, or a PEP 508 direct reference to a source tree, in
the spelling pip and uv write: ``NAME @ git+URL[@REV][#subdirectory=DIR]`` (a git repository at
a revision) or ``NAME @ file:///path/to/tree`` (a local, possibly patched, checkout).

``SourceTree`` is such a source once fetched (``env/sources.py``): its commit, the archive of its
files (whose sha256 is the build's input: a patch gives another build) and the metadata read from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..errors import UsageError
from .plan import SourceOrigin

GIT_SCHEMES = ("https", "http", "ssh", "git", "file")  # git's transports a source may name: no ext::, fd::, helper::address
# patterns compiled where first used (re's cache): only a --build 'NAME @ URL' reads a git URL
_GIT_URL = r"(?P<scheme>[a-z]+)://(?P<netloc>[^/?#]*)(?P<path>/[^?#]*)?"
# a revision as ``git check-ref-format`` allows a name (or a commit): no leading '-', no '..', no
# component starting with '.', no '@{', nothing git reads as revision syntax (~^:?*[\\), no space
_REV_BAD = r"^-|\.\.|(^|/)\.|@\{|[~^:?*\[\\\s\x00-\x1f\x7f]|\.lock(/|$)|/$|//|^@$"
_SUBDIR_BAD_CHARS = r"[\\\x00-\x1f\x7f]"


def git_source_problem(url: str, rev: str | None = None, subdirectory: str | None = None) -> str | None:
    """What makes a git source unsafe to hand to git, naming the value; None when it is sound.

    - ``url``: ``SCHEME://HOST/PATH`` with SCHEME in ``GIT_SCHEMES`` (no ``ext::``/``fd::``/
      ``helper::address`` transport, no scp-like ``host:path``), no leading ``-`` in it or its
      host or user, no space or control character;
    - ``rev``: a tag, branch or commit name (``git check-ref-format``'s grammar: no leading ``-``,
      no ``..``, no ``@{``, no component starting with ``.``, none of ``~^:?*[\\``, no space);
    - ``subdirectory``: a relative folder (no leading ``/`` or ``-``, no ``..`` component, no
      component starting with ``-``, no control character)."""
    return _git_url_problem(url) or _git_rev_problem(rev) or _git_subdirectory_problem(subdirectory)


def _git_url_problem(url: str) -> str | None:
    """What makes ``url`` unsafe as a git source URL (see ``git_source_problem``); None when sound."""
    match = re.fullmatch(_GIT_URL, url)
    if url.startswith("-"):
        return f"the git URL {url!r} starts with '-': git would read it as an option"
    if match is None or any(c.isspace() or not c.isprintable() for c in url):
        return f"the git URL {url!r} is not SCHEME://HOST/PATH (a transport such as ext:: or fd::, an scp-like host:path and spaces are refused)"
    if match["scheme"] not in GIT_SCHEMES:
        return f"the git URL {url!r} uses {match['scheme']!r}: a git source is one of {', '.join(GIT_SCHEMES)}"
    netloc = unquote(match["netloc"])  # as ssh would be handed it, percent-escapes read
    host = netloc.rpartition("@")[2]
    if host.startswith("-") or netloc.startswith("-"):
        return f"the git URL {url!r} names a host or user starting with '-': ssh would read it as an option"
    if match["scheme"] != "file" and not host:
        return f"the git URL {url!r} names no host"
    return None


def _git_rev_problem(rev: str | None) -> str | None:
    """What makes ``rev`` unsafe as a git revision (see ``git_source_problem``); None when sound or absent."""
    if rev is not None and (not rev or re.search(_REV_BAD, rev)):
        return f"the git revision {rev!r} is not a tag, branch or commit name (no leading '-', no '..', no '@{{', none of ~^:?*[\\ or spaces)"
    return None


def _git_subdirectory_problem(subdirectory: str | None) -> str | None:
    """What makes ``subdirectory`` unsafe as a folder in the repository; None when sound or absent."""
    if subdirectory is None:
        return None
    parts = subdirectory.split("/")
    if not subdirectory or subdirectory.startswith("/") or ".." in parts or any(p.startswith("-") for p in parts) or re.search(_SUBDIR_BAD_CHARS, subdirectory):
        return f"the subdirectory {subdirectory!r} must be a relative folder inside the repository (no leading '/' or '-', no '..')"
    return None


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
    if subdirectory is not None and (problem := git_source_problem("file:///", None, subdirectory)) is not None:
        raise UsageError(f"--build {text!r}: {problem}", hint=_HINT)
    if parts.scheme.startswith("git+"):
        return _git_source(parts, text, subdirectory)
    if parts.scheme == "file":
        return _folder_source(parts, text, subdirectory)
    raise UsageError(f"--build {text!r}: a build source is git+URL or file:///path, not {parts.scheme or 'a bare path'}", hint=_HINT)


def _git_source(parts: SplitResult, text: str, subdirectory: str | None) -> SourceOrigin:
    """A ``git+SCHEME://...[@REV]`` source: the repository, the revision asked for."""
    scheme = parts.scheme[len("git+") :]
    if scheme not in GIT_SCHEMES:
        raise UsageError(f"--build {text!r}: git over {scheme!r} is not supported", hint="use git+https://, git+ssh://, git+git:// or git+file://")
    path, rev = parts.path, None
    if "@" in path.rsplit("/", 1)[-1]:
        path, rev = path.rsplit("@", 1)
    repo = f"{scheme}://{parts.netloc}{path}"
    if parts.username or parts.password:
        raise UsageError(
            f"--build: a git URL with credentials in it ({scheme}://...@...)", hint="give git its credentials through its own helper, never in the URL"
        )
    rev = rev or None
    problem = git_source_problem(repo, rev, subdirectory)
    if problem is not None:
        raise UsageError(f"--build {text!r}: {problem}", hint=_HINT)
    return SourceOrigin(kind="git", url=repo, rev=rev, subdirectory=subdirectory)


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


__all__ = ["GIT_SCHEMES", "BuildSpec", "git_source_problem", "SourceTree", "parse_build_spec", "parse_source_url"]
