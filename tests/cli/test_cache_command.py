"""Issue 15 item 8: temp files and partial downloads do not accumulate, and `cache` shows and
tidies the cache. Real locks against a loopback world fill a real cache; killed writes are
simulated by their leftovers (the names the writers use), aged by mtime."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support.lock_project import build_lock_world, config_text, serve_world

from resolve_gpu_stack.cli import app as cli

DAY = 86400


def aged(path: Path, seconds: float, body: bytes = b"x" * 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    then = time.time() - seconds
    os.utime(path, (then, then))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("cacheworld")
    with serve_world(build_lock_world(root / "www")) as (_, urls):
        yield urls


@pytest.fixture
def project(world, tmp_path, monkeypatch):
    proj = tmp_path / "project"
    proj.mkdir()
    (proj / "pyproject.toml").write_text(config_text(world))
    monkeypatch.chdir(proj)
    return proj


def lock(cache: Path) -> int:
    return cli.main(["lock", "--cache-dir", str(cache)])


def info(cache: Path, capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert cli.main(["cache", *argv, "--cache-dir", str(cache), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "resolve-gpu-stack/cache/v1" and data["cache_dir"] == str(cache)
    assert data["total_bytes"] == sum(k["bytes"] for k in data["kinds"])
    return {k["kind"]: (k["files"], k["bytes"]) for k in data["kinds"]}


def test_a_run_sweeps_stale_temp_files_and_old_partials_only(project, tmp_path):
    cache = tmp_path / "cache"
    assert lock(cache) == 0
    stale = [aged(cache / "pages-v1" / "ab" / ".tmp-killed1", 3600), aged(cache / "wheels" / "urls" / "k.json.4242.tmp", 3600)]
    fresh = [aged(cache / "metadata-v1" / "cd" / ".tmp-writing", 5)]  # another process is writing it now
    old_part = [aged(cache / "wheels" / "partial" / "k1.part", 8 * DAY), aged(cache / "wheels" / "partial" / "k1.json", 8 * DAY)]
    new_part = [aged(cache / "wheels" / "partial" / "k2.part", 1 * DAY)]
    foreign = [aged(cache / "pages-v1" / "ab" / "notes.tmp", 3600)]  # not a name this tool writes
    assert lock(cache) == 0
    assert not any(p.exists() for p in stale + old_part)
    assert all(p.exists() for p in fresh + new_part + foreign)


def test_lock_sweeps_temp_files_a_killed_write_left_beside_it(project, tmp_path):
    out = project / "constraints"
    out.mkdir()
    stale = aged(out / ".pylock.x86_64-py312.toml.ab12cd34.tmp", 3600)
    fresh = aged(out / ".pylock.x86_64-py312.toml.zz99yy88.tmp", 5)
    other = aged(out / ".notes.txt.ab12cd34.tmp", 3600)
    assert lock(tmp_path / "cache") == 0
    assert not stale.exists() and fresh.exists() and other.exists()
    assert (out / "pylock.x86_64-py312.toml").is_file()


def test_cache_info_prune_and_clean(project, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert lock(cache) == 0
    before = info(cache, capsys)
    assert before["pages"][0] > 0 and before["metadata"][0] > 0 and before["results"][0] > 0
    assert before["partial downloads"] == (0, 0) and before["temp files"] == (0, 0)
    aged(cache / "wheels" / "partial" / "k.part", 4 * DAY, b"y" * 100)
    aged(cache / "wheels" / "sha256" / "ab" / ("ab" * 32) / "x-1-py3-none-any.whl", 40 * DAY, b"z" * 50)
    aged(cache / "results-v1" / "ee" / ("e" * 64), 40 * DAY)
    aged(cache / "pages-v1" / "ee" / ".tmp-x", 3600)
    now = info(cache, capsys)
    assert now["partial downloads"] == (1, 100) and now["temp files"] == (1, 10)
    assert now["wheels"] == (before["wheels"][0] + 1, before["wheels"][1] + 50)
    assert now["results"][0] == before["results"][0] + 1

    removed = info(cache, capsys, "prune", "--older-than", "30")
    assert removed["temp files"] == (1, 10) and removed["wheels"] == (1, 50) and removed["results"] == (1, 10)
    assert removed["partial downloads"] == (0, 0)  # 4 days < 30
    after = info(cache, capsys)
    assert after["pages"] == before["pages"] and after["metadata"] == before["metadata"] and after["results"] == before["results"]
    assert after["wheels"] == before["wheels"]  # the wheels used just now stay
    assert after["partial downloads"] == (1, 100)
    assert info(cache, capsys, "prune", "--older-than", "3")["partial downloads"] == (1, 100)

    info(cache, capsys, "clean")
    assert all(files == 0 for files, _ in info(cache, capsys).values())
    assert lock(cache) == 0  # a cleaned cache fills again


def test_cache_table_and_bad_days(tmp_path, capsys):
    assert cli.main(["cache", "--cache-dir", str(tmp_path), "--format", "table"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path) in out and "partial downloads" in out
    assert cli.main(["cache", "prune", "--older-than", "nan", "--cache-dir", str(tmp_path)]) == 2


# -- issue 22, item 5: the cache commands delete nothing that is not ours --------------------------------


@pytest.mark.parametrize("kind", ["results-v1", "wheels/partial", "wheels", "pages-v1"])
@pytest.mark.parametrize("action", ["clean", "prune", "info"])
def test_a_symlinked_kind_folder_is_refused_and_nothing_outside_is_touched(tmp_path, capsys, kind, action):
    """A kind folder (or the wheels folder above some) that is a link to somewhere else: before,
    `cache clean`/`prune` deleted what it pointed at. Refused (exit 2), nothing counted or deleted."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    precious = [aged(outside / "ab" / ("a" * 64), 40 * DAY), aged(outside / "k.part", 40 * DAY), aged(outside / ".tmp-9-9-9", 3600)]
    aged(cache / "metadata-v1" / "cd" / ("c" * 64), 40 * DAY)
    link = cache / kind
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside, target_is_directory=True)
    argv = ["cache", action, "--cache-dir", str(cache)] + (["--older-than", "0"] if action == "prune" else [])
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"{link} is a symbolic link" in err and "Traceback" not in err
    assert all(p.exists() for p in precious) and (cache / "metadata-v1" / "cd" / ("c" * 64)).exists()


def test_clean_removes_every_kind_and_info_counts_them(tmp_path, capsys):
    cache = tmp_path / "cache"
    made = {
        "wheels": aged(cache / "wheels" / "sha256" / "ab" / ("ab" * 32) / "x-1-py3-none-any.whl", 1),
        "wheel checks": aged(cache / "wheels" / "verified" / "ab" / ("ab" * 32) / "x-1-py3-none-any.whl.json", 1),
        "download locks": aged(cache / "wheels" / "locks" / ("d" * 64 + ".lock"), 1, b""),
        "wheel records": aged(cache / "wheels" / "urls" / ("e" * 64 + ".json"), 1),
        "partial downloads": aged(cache / "wheels" / "partial" / ("f" * 64 + ".part"), 1),
    }
    now = info(cache, capsys)
    for kind in made:
        assert now[kind][0] == 1, kind
    info(cache, capsys, "clean")
    assert all(files == 0 for files, _ in info(cache, capsys).values())
    assert not [p for p in cache.rglob("*") if p.is_file() and p.name != "in-use.lock"]


def test_prune_and_clean_leave_the_wheels_a_running_command_uses(tmp_path, capsys):
    """`install`, `install --lock` and `wheelhouse` hold the wheel cache while they use its files:
    a concurrent `cache prune --older-than 0` (or `clean`) leaves wheels and partial downloads alone
    and says so; once the command is done they go."""
    from resolve_gpu_stack.net.download import WheelCache

    cache = tmp_path / "cache"
    wheel = aged(cache / "wheels" / "sha256" / "ab" / ("ab" * 32) / "x-1-py3-none-any.whl", 40 * DAY)
    part = aged(cache / "wheels" / "partial" / ("f" * 64 + ".part"), 40 * DAY)
    result = aged(cache / "results-v1" / "ee" / ("e" * 64), 40 * DAY)
    with WheelCache.under(cache).in_use():  # a running command
        capsys.readouterr()
        assert cli.main(["cache", "prune", "--older-than", "0", "--cache-dir", str(cache), "--format", "json"]) == 0
        kinds = {k["kind"]: k for k in json.loads(capsys.readouterr().out)["kinds"]}
        assert kinds["wheels"]["in_use"] and kinds["partial downloads"]["in_use"] and kinds["results"]["files"] == 1
        assert wheel.exists() and part.exists() and not result.exists()
        assert cli.main(["cache", "clean", "--cache-dir", str(cache), "--format", "table"]) == 0
        assert "in use by a running command" in capsys.readouterr().out
        assert wheel.exists() and part.exists()
    removed = info(cache, capsys, "prune", "--older-than", "0")
    assert removed["wheels"] == (1, 10) and removed["partial downloads"] == (1, 10)
    assert not wheel.exists() and not part.exists()
