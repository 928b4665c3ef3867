"""A wheelhouse is served by a web server that may run as another user: everything `wheelhouse`
publishes (``files/*.whl``, their ``.metadata``, the pages, the locks, the manifest) is readable by
others. Wheels and ``.metadata`` were 0o600 (partial downloads are created 0o600, the cache kept
that mode and the wheelhouse hard-linked it; the ``.metadata`` temp file was 0o600): the server
answered 403. Through the command line, against a loopback world.
"""

from __future__ import annotations

import os
from pathlib import Path

from support.install_world import export
from support.install_world import exported as exported


def published(house: Path) -> list[Path]:
    return [p for p in sorted(house.rglob("*")) if p.is_file()]


def test_published_wheels_and_metadata_are_readable_by_others(exported):
    _, house, _, _ = exported
    files = published(house)
    wheels = [p for p in files if p.name.endswith(".whl")]
    metadata = [p for p in files if p.name.endswith(".whl.metadata")]
    assert wheels and len(metadata) == len(wheels)
    unreadable = {str(p.relative_to(house)): oct(p.stat().st_mode & 0o777) for p in files if p.stat().st_mode & 0o044 != 0o044}
    assert unreadable == {}


def test_a_rerun_places_again_what_an_earlier_run_left_unreadable(exported, capsys):
    """A wheelhouse an earlier version published 0o600 (its cache's wheels 0o600 too, one inode):
    the rerun places those files again, readable, and leaves the cache's files as they are."""
    lock, house, cache, _ = exported
    wheels = sorted((house / "files").glob("*.whl"))
    for wheel in wheels:
        for path in (wheel, wheel.with_name(wheel.name + ".metadata")):
            os.chmod(path, 0o600)
    cached = {p: p.stat().st_mode & 0o777 for p in (cache / "wheels" / "sha256").rglob("*.whl")}
    rc, _, err = export(capsys, lock, house, cache)
    assert rc == 0, err
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in published(house))
    assert {p: p.stat().st_mode & 0o777 for p in cached} == cached
