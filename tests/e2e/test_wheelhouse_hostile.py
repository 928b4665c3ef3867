"""Issue 22, items 5, 7 and 8 for `wheelhouse`: deletions and writes stay inside DIR, its inputs
are checked before anything is placed or published, and no input ends in a traceback.

Through the command line, against a real file tree: a lock of a loopback world, exported once
into a wheelhouse, then hostile trees (a symlinked ``files/`` or ``simple/``, a folder that is not a
wheelhouse, a link planted at a temp name) and hostile inputs (a non-wheel with a valid hash, a
credential in a lock, bad ``--base-url`` values). Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from support.hostile_inputs import corrupt_wheel
from support.install_world import export

from resolve_gpu_stack.data.toml import parse_toml


def tree(root: Path) -> dict[str, bytes | str]:
    """Every file and link below ``root`` (links not followed): what must not change."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = f"-> {os.readlink(path)}"
        elif path.is_file():
            out[rel] = path.read_bytes()
    return out


def _edit_lock(lock: Path, out: Path, edit) -> Path:
    """``lock`` with its numpy [[packages]] entry changed by ``edit`` (everything else as written)."""
    import tomli_w

    doc = parse_toml(lock.read_text(), str(lock))
    edit(next(p for p in doc["packages"] if p["name"] == "numpy"), out.parent)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(tomli_w.dumps(doc))
    return out


# -- 5. deletions and writes stay inside ---------------------------------------------------------------


@pytest.mark.parametrize("linked", ["files", "simple"])
def test_prune_through_a_symlinked_folder_deletes_nothing_outside(exported, tmp_path, capsys, linked):
    lock, house, cache, _ = exported
    elsewhere = tmp_path / "elsewhere"
    (house / linked).rename(elsewhere)
    (elsewhere / "precious.txt").write_text("not the wheelhouse's")
    (elsewhere / "victim").mkdir()
    (elsewhere / "victim" / "index.html").write_text("another project's page")
    (house / linked).symlink_to(elsewhere, target_is_directory=True)
    before = tree(elsewhere)
    rc, out, err = export(capsys, lock, house, cache, "--prune")
    assert rc == 2 and out == "" and f"{house / linked} is a symbolic link" in err and "Traceback" not in err
    assert tree(elsewhere) == before


def test_prune_in_a_folder_that_is_not_a_wheelhouse_deletes_nothing(exported, tmp_path, capsys):
    lock, _, cache, _ = exported
    foreign = tmp_path / "foreign"
    for rel, text in (("notes.txt", "mine"), ("files/old.bin", "mine too"), ("simple/x/index.html", "a page of mine")):
        (foreign / rel).parent.mkdir(parents=True, exist_ok=True)
        (foreign / rel).write_text(text)
    before = tree(foreign)
    rc, _, err = export(capsys, lock, foreign, cache, "--prune")
    assert rc == 2 and "is not a wheelhouse" in err and "nothing there is deleted" in err
    assert tree(foreign) == before


def test_prune_never_follows_a_link_inside_simple(exported, tmp_path, capsys):
    lock, house, cache, _ = exported
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_text("keep")
    (house / "simple" / "evil").symlink_to(outside, target_is_directory=True)
    (house / "files" / "evil.whl").symlink_to(outside / "sub" / "keep.txt")
    before = tree(outside)
    rc, out, err = export(capsys, lock, house, cache, "--prune")
    assert rc == 0, err
    assert tree(outside) == before and (house / "simple" / "evil").is_symlink()


@pytest.mark.parametrize("flags", [(), ("--prune",)], ids=["export", "prune"])
def test_a_symlinked_project_folder_in_simple_is_never_written_through(exported, tmp_path, capsys, flags):
    """Issue 32, N25: ``simple/<project>`` a link to another folder: its pages were written there."""
    lock, house, cache, _ = exported
    outside = tmp_path / "outside-project"
    (house / "simple" / "numpy").rename(outside)
    (outside / "index.html").write_text("another site's page")  # not the page the export writes: it would write it
    (house / "simple" / "numpy").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    rc, out, err = export(capsys, lock, house, cache, *flags)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert f"{house / 'simple' / 'numpy'} is a symbolic link" in err
    assert tree(outside) == before and (house / "simple" / "numpy").is_symlink()


def test_temp_files_are_never_written_through_a_planted_link(exported, tmp_path, capsys):
    """The wheelhouse wrote ``files/.<wheel>.metadata.<pid>.tmp`` through whatever was there (another
    user's file was overwritten); temp files are now created exclusively under names no one can
    guess. Stale temp files a killed export left are swept; a running one's are not."""
    lock, house, cache, _ = exported
    victim = tmp_path / "victim.txt"
    victim.write_text("another user's file")
    wheel = next(p for p in (house / "files").glob("numpy-*.whl"))
    for leaf in (wheel.name, wheel.name + ".metadata"):
        (house / "files" / leaf).unlink()
        (house / "files" / f".{leaf}.{os.getpid()}.tmp").symlink_to(victim)
    stale, fresh = house / "files" / ".tmp-4242-1-0", house / "files" / ".tmp-4242-1-1"
    for path, age in ((stale, 3600), (fresh, 5)):
        path.write_bytes(b"half a wheel")
        os.utime(path, (time.time() - age, time.time() - age))
    rc, out, err = export(capsys, lock, house, cache)
    assert rc == 0, err
    assert victim.read_text() == "another user's file"
    assert (house / "files" / wheel.name).is_file() and (house / "files" / (wheel.name + ".metadata")).read_bytes().startswith(b"Metadata-Version")
    assert not stale.exists() and fresh.exists()


# -- 7. inputs: METADATA before placing, local sources copied, credentials, --base-url ---------------------


@pytest.mark.parametrize("how", ["not-a-zip", "bad-deflate"])
def test_a_file_that_is_not_the_wheel_is_never_placed(exported, tmp_path, capsys, how):
    """A lock's local ``path`` names a file with the right sha256 and size that is not the wheel
    (not a zip; a zip whose METADATA does not inflate): exit 3 naming it, nothing of it in ``files/``
    (before: placed first, then a traceback or a LockFileError with the file left there)."""
    lock, house, cache, _ = exported
    real = next((house / "files").glob("numpy-*.whl"))
    data = b"<html>a proxy's login page</html>" if how == "not-a-zip" else corrupt_wheel(real.read_bytes(), "bad-deflate")

    def local(entry: dict, folder: Path) -> None:
        bad = folder / "wheels" / real.name
        bad.parent.mkdir(parents=True, exist_ok=True)
        bad.write_bytes(data)
        wheel = entry["wheels"][0]
        del wheel["url"]
        wheel.update(path=f"wheels/{real.name}", size=len(data), hashes={"sha256": hashlib.sha256(data).hexdigest()})

    edited = _edit_lock(lock, tmp_path / "edited" / "pylock.x.toml", local)
    fresh = tmp_path / "fresh-house"
    rc, out, err = export(capsys, edited, fresh, tmp_path / "fresh-cache")
    assert rc == 3 and out == "" and real.name in err and "not an intact wheel" in err and "Traceback" not in err
    assert not (fresh / "files" / real.name).exists() and not (fresh / "files" / (real.name + ".metadata")).exists()


def test_a_local_source_is_copied_not_hard_linked(exported, tmp_path, capsys):
    lock, house, cache, _ = exported
    real = next((house / "files").glob("numpy-*.whl"))
    source = tmp_path / "edited" / "wheels" / real.name

    def local(entry: dict, folder: Path) -> None:
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(real.read_bytes())
        del entry["wheels"][0]["url"]
        entry["wheels"][0]["path"] = f"wheels/{real.name}"

    edited = _edit_lock(lock, tmp_path / "edited" / "pylock.x.toml", local)
    fresh = tmp_path / "fresh-house"
    rc, _, err = export(capsys, edited, fresh, tmp_path / "fresh-cache")
    assert rc == 0, err
    published = fresh / "files" / real.name
    assert published.read_bytes() == source.read_bytes()
    assert source.stat().st_nlink == 1 and published.stat().st_ino != source.stat().st_ino  # a later change of the source changes nothing published
    assert not any(p.stat().st_ino == source.stat().st_ino for p in (tmp_path / "fresh-cache").rglob("*.whl"))


def test_credentials_never_reach_a_published_lock(exported, tmp_path, capsys):
    lock, house, cache, url = exported
    text = lock.read_text()
    assert f'index = "{url}simple/"' in text
    edited = tmp_path / "edited" / "pylock.x.toml"
    edited.parent.mkdir()
    edited.write_text(text.replace(f'index = "{url}simple/"', f'index = "{url.replace("http://", "http://alice:s3cret@")}simple/"'))
    rc, out, err = export(capsys, edited, house, cache)
    assert rc == 0, err
    assert "s3cret" not in (house / "pylock.x.toml").read_text() and "alice" not in (house / "pylock.x.toml").read_text()
    assert "carried credentials" in err and "removed" in err and "s3cret" not in err + out


@pytest.mark.parametrize(
    "base",
    [
        "https://mirror.example/house?token=1",
        "https://mirror.example/house#frag",
        "https://mirror.example/my house",
        "https://mirror.example/house\r\nX-Evil: 1",
        "https://mirror.example/\x00house",
        "http://mirror.example/house",
        "http://[::1/",
        "https://mirror.example:99999/house",
        "ftp://mirror.example/house",
    ],
)
def test_a_bad_base_url_is_a_usage_error(exported, capsys, base):
    lock, house, cache, _ = exported
    before = tree(house)
    rc, out, err = export(capsys, lock, house, cache, "--base-url", base)
    assert rc == 2 and out == "" and "--base-url" in err and "Traceback" not in err
    assert tree(house) == before


def test_a_loopback_http_base_url_is_fine(exported, capsys):
    lock, house, cache, _ = exported
    rc, _, err = export(capsys, lock, house, cache, "--base-url", "http://127.0.0.1:8000/house")
    assert rc == 0, err
    assert 'url = "http://127.0.0.1:8000/house/files/' in (house / "pylock.x.toml").read_text()


# -- 8. no traceback -----------------------------------------------------------------------------------


def test_output_naming_an_existing_file_is_a_usage_error(exported, tmp_path, capsys):
    lock, _, cache, _ = exported
    target = tmp_path / "a-file"
    target.write_text("x")
    rc, _, err = export(capsys, lock, target, cache)
    assert rc == 2 and "a file is there, not a folder" in err and target.read_text() == "x"


def test_a_300_character_wheel_name_is_a_clear_error(exported, tmp_path, capsys):
    lock, house, cache, _ = exported
    long = "numpy-2.2.0-py3-none-" + "x" * 280 + ".whl"
    edited = _edit_lock(lock, tmp_path / "edited" / "pylock.x.toml", lambda e, _: e["wheels"][0].update(name=long))
    before = tree(house)
    rc, _, err = export(capsys, edited, house, cache)
    assert rc == 1 and "a wheel file name of 305 characters" in err and "Traceback" not in err
    assert tree(house) == before
