"""Fetch a ``--build 'NAME @ URL'`` source tree (I/O edge: git, disk): a git repository at one
commit, or a local (possibly patched) checkout, made into an sdist-like archive in the wheel cache.

- git: ``git clone --no-checkout`` into a temporary folder, the revision resolved to its commit
  (``rev-parse REV^{commit}``: a lock never holds a moving branch), ``git archive`` of that commit's
  subdirectory. A second run asks ``git ls-remote`` for the revision's commit and, when that
  commit's archive is in the cache (``<cache>/sources/`` records it), clones nothing.
- a local tree: its regular files, less version-control and build outputs (``_SKIPPED``).
- a git tree whose metadata is dynamic gets a ``.git_archival.txt`` (commit, date, ``git describe``)
  when it has none: a version setuptools-scm reads from git history is read from it in the archive.

The archive is deterministic (sorted members, fixed times and owners, gzip without a time): its
sha256 is a digest of the tree's files, so a patch gives another archive, another build key, another
build; the same tree the same build. The metadata the resolver needs is read from the tree's
``pyproject.toml`` ``[project]`` (PEP 621, static) or from a ``PKG-INFO`` it carries.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from ..atomic import atomic_write
from ..data.toml import parse_toml
from ..errors import BuildError
from ..index.parse import parse_metadata
from ..model import SourceOrigin
from ..model.source import BuildSpec, SourceTree
from ..net.download import WheelCache, store_local
from ..net.gitsource import resolve_commit, tree_archive
from ..net.process import checked_git_source, git

# (version, Requires-Dist, Requires-Python) of a project
TreeMetadata = tuple[Version, tuple[str, ...], str | None]
# the metadata of a tree whose metadata is dynamic (setup.py, [project] dynamic), asked of its build
# backend in a build environment (PEP 517 prepare_metadata_for_build_wheel: ``env/build.py``'s
# ``source_metadata``): (name, the tree's archive, the archive's sha256) -> its metadata
MetadataOf = Callable[[NormalizedName, Path, str], TreeMetadata]


def fetch_source(spec: BuildSpec, cache: WheelCache, env: Mapping[str, str], metadata_of: MetadataOf | None = None) -> SourceTree:
    """``spec``'s tree fetched, archived into ``cache`` and read (see the module docstring). A git
    commit archived before is not cloned again: ``git ls-remote`` names the revision's commit, and
    the record of that commit's tree (``<cache>/sources/``) gives its archive while it is cached.
    A tree whose metadata is dynamic is asked through ``metadata_of`` (None: refused, saying so)."""
    origin = spec.source
    assert origin is not None
    if origin.kind == "git":
        known = _recorded(cache, spec, origin, env)
        if known is not None:
            return known
    tree = _fetch(spec, origin, cache, env, metadata_of)
    if tree.origin.kind == "git":
        _record(cache, tree)
    return tree


def _record_path(cache: WheelCache, origin: SourceOrigin) -> Path:
    key = json.dumps([origin.url, origin.commit, origin.subdirectory])
    return cache.root / "sources" / f"{hashlib.sha256(key.encode()).hexdigest()}.json"


def _record(cache: WheelCache, tree: SourceTree) -> None:
    record = {
        "name": tree.name,
        "version": str(tree.version),
        "filename": tree.filename,
        "sha256": tree.sha256,
        "size": tree.size,
        "requires-dist": list(tree.requires_dist),
        "requires-python": tree.requires_python,
    }
    atomic_write(_record_path(cache, tree.origin), json.dumps(record, sort_keys=True), make_parents=True)


def _recorded(cache: WheelCache, spec: BuildSpec, origin: SourceOrigin, env: Mapping[str, str]) -> SourceTree | None:
    """The tree of ``origin``'s revision as archived before (its commit asked with ``ls-remote``), or None."""
    try:
        commit = resolve_commit(origin, env)
    except BuildError:
        return None  # a short commit, or a repository ls-remote cannot read: cloned (and its error said) below
    at = SourceOrigin(kind="git", url=origin.url, rev=origin.rev, commit=commit, subdirectory=origin.subdirectory)
    try:
        raw = json.loads(_record_path(cache, at).read_text())
        hit = cache.lookup(str(raw["sha256"]), str(raw["filename"]), int(raw["size"]))
        if hit is None or canonicalize_name(str(raw["name"])) != spec.name:
            return None
        return SourceTree(
            name=spec.name,
            version=Version(str(raw["version"])),
            origin=at,
            url=hit.path.as_uri(),
            filename=hit.path.name,
            sha256=str(raw["sha256"]),
            size=int(raw["size"]),
            requires_dist=tuple(str(r) for r in raw.get("requires-dist") or ()),
            requires_python=raw.get("requires-python"),
        )
    except (OSError, ValueError, KeyError, TypeError, InvalidVersion):
        return None


def _fetch(spec: BuildSpec, origin: SourceOrigin, cache: WheelCache, env: Mapping[str, str], metadata_of: MetadataOf | None) -> SourceTree:
    with tempfile.TemporaryDirectory(prefix="resolve-gpu-stack-source-") as tmp_name:
        tmp = Path(tmp_name)
        if origin.kind == "git":
            commit, root = _checkout(origin, tmp, env)
            origin = SourceOrigin(kind="git", url=origin.url, rev=origin.rev, commit=commit, subdirectory=origin.subdirectory)
        else:
            root = Path(origin.url)
            if not root.is_dir():
                raise BuildError(
                    f"--build {spec.name} @ file://{origin.url}: no such folder", hint="name the folder of the project's pyproject.toml or setup.py"
                )
        static = read_tree_metadata(root, spec.name)
        if static is None and origin.kind == "git" and origin.commit:
            _keep_git_version(tmp / "repo", origin.commit, root, env)
        if static is None:  # dynamic: its build backend says (PEP 517), in a build environment, cached by the files' digest
            if metadata_of is None:
                raise BuildError(
                    f"--build {spec.name}: the tree at {root} declares its version or dependencies dynamically (setup.py, [project] dynamic)",
                    hint="give its pyproject.toml a static [project] name, version and dependencies, or build its sdist (uv build --sdist) and --build NAME from an index",
                )
            probe = tmp / f"{spec.name.replace('-', '_')}-source.tar.gz"
            probe.write_bytes(tree_archive(root, probe.name[: -len(".tar.gz")]))
            static = metadata_of(spec.name, probe, hashlib.sha256(probe.read_bytes()).hexdigest())
        version, requires, requires_python = static
        archive = tmp / f"{spec.name.replace('-', '_')}-{version}.tar.gz"
        archive.write_bytes(tree_archive(root, archive.name[: -len(".tar.gz")]))
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        stored = store_local(archive, sha256=digest, size=archive.stat().st_size, cache=cache)
    return SourceTree(
        name=spec.name,
        version=version,
        origin=origin,
        url=stored.path.as_uri(),
        filename=stored.path.name,
        sha256=digest,
        size=stored.path.stat().st_size,
        requires_dist=requires,
        requires_python=requires_python,
    )


def _checkout(origin: SourceOrigin, tmp: Path, env: Mapping[str, str]) -> tuple[str, Path]:
    """(commit, the project's folder) of a git source, its files under ``tmp``."""
    repo = tmp / "repo"
    rev = origin.rev or "HEAD"
    where = f"{origin.url}@{rev}"
    checked_git_source(origin.url, origin.rev, origin.subdirectory)
    git(["clone", "--quiet", "--no-checkout", "--template=", "--", origin.url, str(repo)], env, where)
    try:
        commit = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], env, where, cwd=repo).strip()
    except BuildError:
        commit = ""
    if not commit:
        try:
            commit = git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"origin/{rev}^{{commit}}"], env, where, cwd=repo).strip()
        except BuildError:
            raise BuildError(f"{origin.url} has no revision {rev!r}", hint="name a tag, a branch or a commit that the repository has") from None
    if not _HEX.fullmatch(commit):
        raise BuildError(f"{where}: git named {commit!r} as its commit")
    tree = tmp / "tree"
    tree.mkdir()
    try:
        archive = git(["archive", "--format=tar", commit, "--", *([origin.subdirectory] if origin.subdirectory else [])], env, where, cwd=repo, text=False)
    except BuildError as exc:
        raise BuildError(exc.message, hint="is the subdirectory in that commit?") from None
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
    except tarfile.TarError as exc:
        raise BuildError(f"{where}: git archive gave no readable tar ({exc})") from None
    root = tree / origin.subdirectory if origin.subdirectory else tree
    if not root.is_dir():
        raise BuildError(f"{where}: commit {commit[:12]} has no folder {origin.subdirectory!r}")
    return commit, root


_HEX = re.compile(r"[0-9a-f]{40,64}")
ARCHIVAL = ".git_archival.txt"


def _keep_git_version(repo: Path, commit: str, root: Path, env: Mapping[str, str]) -> None:
    """What a version read from git history needs, kept in the archive of a dynamic tree: the
    commit, its date and ``git describe`` of it, as setuptools-scm reads them from an archive
    (``.git_archival.txt``, the file its docs have projects add and ``git archive`` fills in). A
    tree that has one keeps its own; the same commit and tags give the same file."""
    if (root / ARCHIVAL).exists():
        return
    where = f"{repo}@{commit[:12]}"
    lines = [f"node: {commit}", f"node-date: {git(['log', '-1', '--format=%cI', commit], env, where, cwd=repo).strip()}"]
    try:
        described = git(["describe", "--tags", "--long", "--match", "*[0-9]*", commit], env, where, cwd=repo).strip()
    except BuildError:
        described = ""  # no tag reaches the commit: setuptools-scm makes a 0.1.dev version of the node
    if described:
        lines.append(f"describe-name: {described}")
    (root / ARCHIVAL).write_text("".join(f"{line}\n" for line in lines))


def read_tree_metadata(root: Path, name: str) -> TreeMetadata | None:
    """(version, Requires-Dist, Requires-Python) of the project in ``root``: static ``[project]``
    metadata (PEP 621), else the tree's ``PKG-INFO``; None when it is dynamic (its build backend
    must say: ``MetadataOf``)."""
    pyproject = root / "pyproject.toml"
    project: dict[str, object] = {}
    if pyproject.is_file():
        doc = parse_toml(pyproject.read_text(encoding="utf-8"), str(pyproject), error=BuildError)
        raw = doc.get("project")
        project = raw if isinstance(raw, dict) else {}
    raw_dynamic = project.get("dynamic")
    dynamic = raw_dynamic if isinstance(raw_dynamic, list) else []
    if project and "version" not in dynamic and "dependencies" not in dynamic and "version" in project:
        got = canonicalize_name(str(project.get("name", "")))
        if got != canonicalize_name(name):
            raise BuildError(f"--build {name}: the tree at {root} is the project {got!r}, not {name!r}")
        try:
            version = Version(str(project["version"]))
            deps = project.get("dependencies") or []
            requires = tuple(str(Requirement(str(d))) for d in deps) if isinstance(deps, list) else ()
        except (InvalidVersion, InvalidRequirement) as exc:
            raise BuildError(f"{pyproject}: [project] does not parse ({exc})") from None
        rp = project.get("requires-python")
        return version, requires, str(rp) if isinstance(rp, str) else None
    pkg_info = root / "PKG-INFO"
    if pkg_info.is_file():
        meta = parse_metadata(pkg_info.read_bytes(), source=str(pkg_info))
        if meta.name != canonicalize_name(name):
            raise BuildError(f"--build {name}: the tree at {root} is the project {meta.name!r}, not {name!r}")
        return meta.version, meta.requires_dist, meta.requires_python
    return None


__all__ = ["MetadataOf", "TreeMetadata", "fetch_source", "read_tree_metadata"]
