"""``check`` of a build row built from a source tree (``--build 'NAME @ URL'``): the lock records
where the tree came from (``SourceOrigin``), and the tree it names must still be that tree.

- git: the revision asked for (``rev``, e.g. a tag) must still name the commit locked (a moved tag
  or a branch that went on is named), and the sdist URL must be that commit's reference;
- a local tree: its files' digest (the archive ``env/sources.py`` makes) must still be the lock's.

A repository or folder that cannot be read now is a warning, not an error (a CI machine may not
reach it); the build row's other checks (provenance, the wheel) are ``check.build_findings``'."""

from __future__ import annotations

import re
from dataclasses import replace

from ...errors import ResolveGpuStackError
from ...model import SourceDist, SourceOrigin
from ...net.gitsource import resolve_commit, tree_digest

_COMMIT = re.compile(r"[0-9a-f]{40}")


def source_problems(sdist: SourceDist) -> tuple[list[str], list[str]]:
    """(errors, warnings) about the source tree a locked build row names."""
    origin = sdist.origin
    assert origin is not None
    return _git_problems(sdist, origin) if origin.kind == "git" else _tree_problems(sdist, origin)


def _git_problems(sdist: SourceDist, origin: SourceOrigin) -> tuple[list[str], list[str]]:
    """A git source: the lock holds a commit, the sdist URL is it, the revision still names it."""
    if not (origin.commit and _COMMIT.fullmatch(origin.commit)):
        return [f"its source {origin.url} records no commit (a lock holds a commit, never a moving revision)"], []
    if sdist.url != origin.reference:
        return [f"its sdist URL {sdist.url} is not its source's commit {origin.reference}"], []
    try:
        now = resolve_commit(origin)
    except ResolveGpuStackError as exc:
        return [], [f"cannot read its source {origin.url} to check commit {origin.commit[:12]}: {exc.message}"]
    if now != origin.commit:
        return [f"its source revision {origin.rev or 'HEAD'} of {origin.url} now names commit {now[:12]}, the lock built {origin.commit[:12]}"], []
    return [], []


def _tree_problems(sdist: SourceDist, origin: SourceOrigin) -> tuple[list[str], list[str]]:
    """A local source tree: its files' digest is still the one locked."""
    try:
        digest = tree_digest(origin, sdist.filename)
    except OSError as exc:
        return [], [f"cannot read its source tree {origin.url}: {exc}"]
    if digest != sdist.sha256:
        return [
            f"its source tree {origin.url} changed since it was locked (its files' sha256 is {digest[:12]}, the lock's {(sdist.sha256 or 'none')[:12]})"
        ], []
    return [], []


def relock_reference(sdist: SourceDist) -> str:
    """What to lock again with: the source at the revision asked for (not the locked commit)."""
    assert sdist.origin is not None
    return replace(sdist.origin, commit=None).reference


__all__ = ["relock_reference", "source_problems"]
