"""``--build 'NAME @ URL'`` inside the resolver (pure): a fetched source tree (``SourceTree``) is
its package's only file, an sdist-like archive whose metadata was read from the tree, and the
plan's build row records where it came from (``SourceOrigin``: the URL, the commit, the folder)."""

from __future__ import annotations

from packaging.utils import NormalizedName

from ..model import IndexFile, SourceOrigin, WheelMetadata
from ..model.request import ResolveRequest
from ..model.source import SourceTree

SOURCE_INDEX = "source"  # the index name of a build row built from a source tree


def source_file(tree: SourceTree) -> IndexFile:
    """The tree's archive as the file its package is offered by (``SOURCE_INDEX``)."""
    return IndexFile(
        filename=tree.filename,
        url=tree.origin.reference,
        name=tree.name,
        version=tree.version,
        is_wheel=False,
        index=SOURCE_INDEX,
        sha256=tree.sha256,
        size=tree.size,
        requires_python=tree.requires_python,
    )


def source_metadata(tree: SourceTree) -> WheelMetadata:
    return WheelMetadata(name=tree.name, version=tree.version, requires_dist=tree.requires_dist, requires_python=tree.requires_python)


def source_origin(request: ResolveRequest, name: NormalizedName) -> SourceOrigin | None:
    """Where the build row of ``name`` comes from: its source tree's origin, or None (its index's sdist)."""
    return next((t.origin for t in request.build_sources if t.name == name), None)


__all__ = ["SOURCE_INDEX", "source_file", "source_metadata", "source_origin"]
