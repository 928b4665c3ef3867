"""The first hour, third pass (issue 34): each miss a new user met, through the command line they typed."""

from __future__ import annotations

import io
import json
import platform
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from support.doors import index_flags, run_cli
from support.install_world import NIGHTLY, PLAT, UV, build_world, fake_python, installed, make_venv, needs_linux, torch_wheel
from support.paths import REPO, SNAPSHOT
from support.server import IndexServer
from support.stack_world import ABI3, FI_REQUIRES

from resolve_gpu_stack.cli.app import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

# -- install --snapshot: the route that installs --------------------------------------------------


@pytest.fixture
def snapshot_of_a_venv(tmp_path: Path, uv_env, capsys):
    """A venv with the nightly torch, a loopback world, and a snapshot of the plan's reads."""
    world = build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
        target = ["--python", python, *index_flags(srv.url)]
        code, _, err = run_cli(capsys, "snapshot", *target, "--cache-dir", str(tmp_path / "c0"), "--output", str(tmp_path / "snap"), "--format", "json")
        assert code == 0, err
        yield srv, python, [*target, "--snapshot", str(tmp_path / "snap")]


@pytest.mark.slow
@needs_linux
def test_install_from_a_snapshot_downloads_with_live_fallback(snapshot_of_a_venv, tmp_path, capsys):
    srv, python, argv = snapshot_of_a_venv
    code, out, err = run_cli(capsys, "install", *argv, "--live-fallback", "--cache-dir", str(tmp_path / "c1"), "--format", "json")
    assert code == 0, err  # it was: "not in the wheel cache, and downloads are off"
    assert installed(python)["flashinfer-python"] == "0.6.5"
    assert json.loads(out)["schema"] == "resolve-gpu-stack/install/v1"


@pytest.mark.slow
@needs_linux
def test_install_from_a_snapshot_without_the_wheels_names_the_routes_that_work(snapshot_of_a_venv, tmp_path, capsys):
    srv, python, argv = snapshot_of_a_venv
    code, out, err = run_cli(capsys, "install", *argv, "--cache-dir", str(tmp_path / "c1"), "--format", "json")
    assert code == 3 and out == ""
    assert "downloads are off (--snapshot)" in err
    hint = err.split("hint: ", 1)[1]
    assert "or with network" not in hint  # it was: the network was there, the flag kept it off
    assert "--live-fallback" in hint and "install --lock pylock.x.toml" in hint
    # the route the hint names works: lock the snapshot's plan, install the lock
    lock = tmp_path / "pylock.x.toml"
    snap = argv[argv.index("--snapshot") + 1]
    lock_argv = ["lock", "--snapshot", snap, *argv[: argv.index("--snapshot")], "--cache-dir", str(tmp_path / "c1"), "-o", str(lock)]
    code, _, err = run_cli(capsys, *lock_argv)
    assert code == 3 and "triton" in err and "add --live-fallback" in err  # the nightly triton's index lists no sha256
    code, _, err = run_cli(capsys, *lock_argv, "--live-fallback")
    assert code == 0, err
    code, _, err = run_cli(capsys, "install", "--lock", str(lock), "--python", python, "--cache-dir", str(tmp_path / "c1"), "--format", "json")
    assert code == 0, err
    assert installed(python)["flashinfer-cubin"] == "0.6.5"


# -- installed FlashInfer: kept with a true reason, `latest` typed means the newest, alignment goes up ---


@pytest.fixture
def fi_world(tmp_path: Path):
    world = build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield srv


def declared(srv, tmp_path: Path, *installed: str) -> list[str]:
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    flags = [w for spec in (f"torch=={NIGHTLY}", *installed) for w in ("--installed", spec)]
    return [
        "--python",
        py,
        "--platform",
        f"{platform.machine()}-manylinux_2_28",
        *flags,
        *index_flags(srv.url),
        "--cache-dir",
        str(tmp_path / "c"),
        "--format",
        "json",
    ]


def flashinfer_rows(out: str) -> dict[str, dict]:
    return {p["name"]: p for p in json.loads(out)["packages"] if p["name"].startswith("flashinfer")}


def planned_flashinfer(capsys, *argv: str) -> dict[str, dict]:
    """The FlashInfer rows of the plan of ``argv`` (which must give one)."""
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    return flashinfer_rows(out)


@needs_linux
def test_an_installed_flashinfer_is_kept_on_request_with_a_reason_that_says_so_and_names_the_newer(fi_world, tmp_path, capsys):
    argv = declared(fi_world, tmp_path, "flashinfer-python==0.6.4", "flashinfer-cubin==0.6.4")
    rows = planned_flashinfer(capsys, *argv, "--flashinfer", "installed")
    assert rows["flashinfer-python"]["version"] == "0.6.4" and rows["flashinfer-python"]["action"] == "keep"
    reason = rows["flashinfer-python"]["reason"]
    assert "newest FlashInfer with" not in reason.split(";")[0]  # it was: "newest FlashInfer ..." for 0.6.4
    assert reason.startswith("installed version kept (--flashinfer installed)") and "0.6.5" in reason and "--flashinfer latest" in reason


@needs_linux
def test_flashinfer_latest_default_or_typed_means_the_newest(fi_world, tmp_path, capsys):
    argv = declared(fi_world, tmp_path, "flashinfer-python==0.6.4", "flashinfer-cubin==0.6.4")
    for extra in ((), ("--flashinfer", "latest")):  # issue 52: the default is what --help says, typed or not
        rows = planned_flashinfer(capsys, *argv, *extra)
        assert {n: (r["version"], r["action"]) for n, r in rows.items()} == {
            "flashinfer-python": ("0.6.5", "upgrade"),
            "flashinfer-cubin": ("0.6.5", "upgrade"),
            "flashinfer-jit-cache": ("0.6.5+cu130", "install"),
        }
        assert rows["flashinfer-python"]["reason"].startswith("newest FlashInfer with")


@needs_linux
def test_a_newer_cubin_beside_an_older_python_aligns_up(fi_world, tmp_path, capsys):
    argv = [*declared(fi_world, tmp_path, "flashinfer-python==0.6.4", "flashinfer-cubin==0.6.5"), "--flashinfer", "installed"]
    rows = planned_flashinfer(capsys, *argv)
    assert (rows["flashinfer-python"]["version"], rows["flashinfer-python"]["action"]) == ("0.6.5", "upgrade")
    assert (rows["flashinfer-cubin"]["version"], rows["flashinfer-cubin"]["action"]) == ("0.6.5", "keep")  # it was: downgraded to 0.6.4
    # ... unless something pins it: a --with pin on the older version holds it there
    code, out, err = run_cli(capsys, *argv, "--with", "flashinfer-python==0.6.4")
    assert code == 0, err
    assert flashinfer_rows(out)["flashinfer-cubin"]["version"] == "0.6.4"


# -- messages that miss ----------------------------------------------------------------------------

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--snapshot", str(SNAPSHOT)]


def test_an_all_keep_dry_run_says_nothing_would_change(tmp_path, capsys, monkeypatch):
    python = fake_python(tmp_path / "venv", {"torch": NIGHTLY})
    argv = ["install", "--dry-run", "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "cache"), "--uv", "/bin/true"]
    code, out, err = run_cli(capsys, *argv, "--python", str(python), "--format", "json")
    assert code == 0, err
    everything = {p["name"]: p["version"] for p in json.loads(out)["packages"]}
    python = fake_python(tmp_path / "all", everything)
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = run_cli(capsys, *argv, "--python", str(python), "--format", "table")
    assert code == 0, err
    assert "Would change" not in out and "would download 0 of 0" not in out  # it was both
    assert "Nothing would change in" in out and "dry run: nothing would change, every package is kept (50 keep)" in out


def test_install_from_the_bundled_snapshot_refuses_a_stand_in_digest_before_any_download(tmp_path, capsys):
    """`install --snapshot ... --live-fallback` (the route the docs give) of a plan with a row from the
    snapshot's reconstructed part: refused up front (it was: the wheel downloaded, then an integrity
    error); with `--uv /bin/false` nothing could have been installed, and no wheel is in the cache."""
    python = fake_python(tmp_path / "venv", {"torch": NIGHTLY})
    argv = ["install", "--python", str(python), "--snapshot", str(SNAPSHOT), "--live-fallback", "--flashinfer", "0.6.3"]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--uv", "/bin/false"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 1, err
    assert "refusing to install flashinfer-jit-cache 0.6.3+cu130: the sha256 comes from the reconstructed (synthetic) part" in err
    assert "--flashinfer 0.6.5" in err
    assert not (tmp_path / "cache" / "wheels").exists() or not any((tmp_path / "cache" / "wheels").rglob("*.whl"))


def test_a_cache_dir_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    code, out, err = run_cli(capsys, *STORY, "--cache-dir", str(tmp_path / "file"))
    assert code == 2 and out == ""  # it was: ignored, exit 0
    assert "argument --cache-dir:" in err and "is a file, not a directory" in err


def test_inspect_of_a_file_that_is_no_wheel_is_a_clear_error(tmp_path, capsys):
    script = tmp_path / "mist.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    code, out, err = run_cli(capsys, "inspect", str(script))
    assert code == 2 and out == ""  # it was: JSON `unknown`, no error
    assert f"error: {script} is not a wheel" in err


def test_install_lock_of_a_url_says_urls_are_not_accepted(tmp_path, capsys):
    code, out, err = run_cli(capsys, "install", "--lock", "http://127.0.0.1:9/house/pylock.x.toml", "--python", sys.executable)
    assert code == 2 and out == ""
    assert "http:/127" not in err  # it was: the URL mangled into a path
    assert "http://127.0.0.1:9/house/pylock.x.toml is a URL; a local file is needed" in err


@needs_linux
def test_a_uv_that_says_nothing_is_not_said_to_have_said_something(tmp_path, uv_env, capsys):
    world = build_world(tmp_path / "w2")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        python = make_venv(tmp_path / "venv", uv_env, torch_wheel(world, NIGHTLY))
        code, out, err = run_cli(capsys, "install", "--python", python, *index_flags(srv.url), "--cache-dir", str(tmp_path / "c"), "--uv", "/bin/false")
    assert code != 0 and "Traceback" not in err
    assert "see uv's message above" not in err  # it was: there was none
    assert "said nothing" in err and "--uv /path/to/uv" in err


@pytest.fixture
def gap_world(tmp_path: Path):
    """The install world, plus flashinfer-python 0.6.3 (with its jit-cache) and no flashinfer-cubin 0.6.3."""
    world = build_world(tmp_path / "www")
    world.pypi("flashinfer-python", "0.6.3", requires=FI_REQUIRES, requires_python=">=3.10")
    for label in ("cu129", "cu130"):
        world.flashinfer("flashinfer-jit-cache", f"0.6.3+{label}", tag=f"{ABI3}-{PLAT}", page=f"{label}/flashinfer-jit-cache")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield srv


@needs_linux
def test_a_with_of_a_package_that_does_not_exist_says_so(gap_world, tmp_path, capsys):
    code, out, err = run_cli(capsys, *declared(gap_world, tmp_path), "--with", "sglnag")
    assert code == 1 and out == ""
    assert "relax a --with pin" not in err  # it was the hint
    assert f"error: sglnag: no such package on its index ({gap_world.url}simple/sglnag/ (pypi) answered 404)" in err
    assert "check the spelling of sglnag" in err


@needs_linux
def test_a_without_that_leaves_nothing_out_warns(gap_world, tmp_path, capsys):
    code, out, err = run_cli(capsys, *declared(gap_world, tmp_path), "--without", "nonexistent")
    assert code == 0, err
    assert "warning: --without nonexistent: no package of the plan requires nonexistent, so nothing was left out" in err  # it was silent
    assert any(n.startswith("--without nonexistent:") for n in json.loads(out)["notes"])
    code, out, err = run_cli(capsys, *declared(gap_world, tmp_path), "--without", "numpy")  # one that does leave something out
    assert code == 0 and "warning: --without" not in err and "numpy" not in {p["name"] for p in json.loads(out)["packages"]}


@needs_linux
def test_a_cubin_gap_is_blamed_on_the_cubin(gap_world, tmp_path, capsys):
    code, out, err = run_cli(capsys, *declared(gap_world, tmp_path), "--with", "flashinfer-python==0.6.3")
    assert code == 1 and out == ""
    assert "error: (requested with --with) requires flashinfer-python==0.6.3, and flashinfer-cubin has no wheel at 0.6.3" in err
    assert "available for this target: 0.6.5, 0.6.4, 0.6.3" not in err  # it was: flashinfer-python 0.6.3 listed as there, yet "impossible"
    assert "--no-cubin" in err.split("hint: ", 1)[1]
    code, _, err = run_cli(capsys, *declared(gap_world, tmp_path), "--with", "flashinfer-python==0.6.3", "--no-cubin")
    assert code == 0, err


@needs_linux
def test_a_flashinfer_version_that_does_not_exist_says_so_and_names_the_newest(gap_world, tmp_path, capsys):
    code, out, err = run_cli(capsys, *declared(gap_world, tmp_path), "--flashinfer", "9.9.9")
    assert code == 1 and out == ""
    assert "error: flashinfer-python 9.9.9 does not exist: its index lists no such version (the newest with a wheel for Python" in err
    assert "is 0.6.5)" in err


def test_on_the_bundled_snapshot_too_a_flashinfer_that_does_not_exist_says_so(capsys):
    code, _, err = run_cli(capsys, *STORY, "--flashinfer", "9.9.9")
    assert code == 1 and "flashinfer-python 9.9.9 does not exist" in err and "0.6.5" in err


def test_a_host_that_does_not_resolve_is_said_once_per_url_with_the_snapshot_hint(tmp_path, capsys, monkeypatch):
    real = socket.getaddrinfo

    def no_dns(host, *args, **kwargs):
        if (host.decode("ascii") if isinstance(host, bytes) else str(host)).endswith(".invalid"):  # an ASCII name is asked as bytes
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    indexes = [w for n in ("pypi", "pytorch", "flashinfer") for w in ("--index", f"{n}=https://{n}.invalid/simple/")]
    target = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}"]
    code, out, err = run_cli(capsys, *target, *indexes, "--cache-dir", str(tmp_path / "c"))
    assert code == 3 and out == ""
    assert "retrying" not in err  # it was: 4 retry lines per URL, then the error
    assert len([line for line in err.splitlines() if line.startswith("error: ")]) == 1
    assert "cannot resolve " in err and ".invalid (Name or service not known)" in err
    assert "--snapshot DIR" in err.split("hint: ", 1)[1]


def test_a_wheel_host_that_does_not_resolve_is_not_sent_to_a_snapshot(tmp_path, capsys, monkeypatch):
    """The README's fleet route offline: `wheelhouse` of a lock downloads wheels, which no snapshot
    holds; its DNS hint says so (it was: "replay a recorded snapshot with --snapshot DIR", a flag
    `wheelhouse` does not take)."""
    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if (host.decode("ascii") if isinstance(host, bytes) else str(host)) not in ("127.0.0.1", "localhost", "::1"):  # an ASCII name is asked as bytes
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    lock = tmp_path / "locks" / "pylock.x86.toml"
    cache = ["--cache-dir", str(tmp_path / "c")]
    code, _, err = run_cli(capsys, "lock", *STORY, "--index", "pypi=https://pypi.invalid/simple/", *cache, "-o", str(lock))
    assert code == 0, err
    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    code, out, err = run_cli(capsys, "wheelhouse", str(lock), "-o", str(tmp_path / "house"), *cache)
    assert code == 3 and "cannot resolve " in err, err
    hint = err.split("hint: ", 1)[1]
    assert "a snapshot holds pages and METADATA, never wheels" in hint and "--snapshot" not in hint


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", ["80", "100", "120"])
def test_candidates_never_fold_a_wheels_tags(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    argv = ["candidates", "flashinfer-jit-cache", "--cuda", "cu130", "--python", "3.12", "--snapshot", str(SNAPSHOT), "--format", "table"]
    assert main(argv) == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue()).splitlines()
    assert max(len(line) for line in lines) <= int(columns)
    cells = [c.strip() for line in lines if line.startswith("│") for c in line.strip("│").split("│")]
    tags = [c for c in cells if "abi3" in c or "manylinux" in c]
    assert all(c in ("cp39-abi3-manylinux_2_28_x86_64", "cp39-abi3-manylinux_2_28_aarch64") for c in tags), (
        tags
    )  # it was: cp39-abi3-m / anylinux_2_2 / 8_x86_64
    assert bool(tags) == (columns != "80")  # at 80 columns the tags go whole (--format json has them)


# -- a plain `lock` in a fresh clone rewrites nothing ----------------------------------------------


@pytest.fixture
def fresh_clone(tmp_path, monkeypatch):
    """This repository's config, committed locks and bundled snapshot in a new folder (the current
    directory), with an empty cache: (the folder, the committed constraints/ bytes)."""
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copy2(REPO / "pyproject.toml", clone / "pyproject.toml")
    shutil.copytree(REPO / "constraints", clone / "constraints")
    shutil.copytree(SNAPSHOT, clone / SNAPSHOT.relative_to(REPO))
    monkeypatch.chdir(clone)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "fresh-cache"))  # a fresh machine: nothing cached
    return clone, {p.name: p.read_bytes() for p in (clone / "constraints").iterdir()}


def test_lock_in_a_fresh_clone_leaves_the_committed_locks_byte_identical(fresh_clone, capsys):
    clone, committed = fresh_clone
    code, _, err = run_cli(capsys, "lock")
    assert code == 0, err
    assert {p.name: p.read_bytes() for p in (clone / "constraints").iterdir()} == committed  # it was: both pylocks rewritten, key order only
    # a kept wheel the lock cannot list: exactly why, and what would list it (then `uv pip sync` keeps it)
    assert "note: triton 3.7.0+git9c288bc5 is kept but not listed in the pylock" in err
    assert "a kept wheel's sha256 is learnt only from the wheel cache: add --live-fallback to download it once" in err


def test_the_pylock_key_order_is_pep_751s_whatever_order_packaging_emits():
    from resolve_gpu_stack.lock.pylock import _in_order

    shuffled = {
        "tool": {},
        "packages": [{"wheels": [{"hashes": {}, "size": 1, "url": "u", "upload-time": "t", "name": "w"}], "index": "i", "version": "1", "name": "p"}],
        "created-by": "x",
        "environments": [],
        "requires-python": "==3.12.*",
        "lock-version": "1.0",
    }
    doc = _in_order(shuffled)
    assert list(doc) == ["lock-version", "environments", "requires-python", "created-by", "packages", "tool"]
    assert list(doc["packages"][0]) == ["name", "version", "index", "wheels"]
    assert list(doc["packages"][0]["wheels"][0]) == ["name", "upload-time", "url", "size", "hashes"]


# -- the README's promises -------------------------------------------------------------------------


def test_the_readme_installs_the_tool_from_a_checkout_not_from_pypi():
    readme = (REPO / "README.md").read_text()
    assert "uv tool install resolve-gpu-stack" not in readme and "pipx install resolve-gpu-stack" not in readme  # it is not on PyPI
    assert "uv tool install .`" in readme and "uv tool install git+URL" in readme
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["resolve-gpu-stack"]  # what `uv tool install .` puts on PATH


def test_the_readmes_snapshot_path_outside_the_checkout_says_where_the_snapshot_lives(tmp_path, capsys, monkeypatch):
    """The README's quick start after `uv tool install .`, run in a folder of one's own: the relative
    snapshot path names nothing there (it was: "is not a snapshot: no manifest.json")."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *STORY[:-1], "indexes/snapshots/2026-03-07")
    assert code == 2 and "indexes/snapshots/2026-03-07: no such folder" in err
    assert "live in a checkout of resolve-gpu-stack, not in the installed tool" in err and "CHECKOUT/indexes/snapshots/2026-03-07" in err
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "bundled with the tool" not in readme and "an installed tool does not carry it" in readme


def test_the_building_guides_plan_on_the_bundled_snapshot_says_why_the_build_asked_for_did_not_happen(capsys):
    """docs/guides/building.md's serving block, its first line on the bundled snapshot: refused, and
    the refusal says `--build sgl-kernel` found no sdist (it was: only "compiled for another CUDA",
    the --build asked for unmentioned)."""
    argv = [*STORY, "--with", "sglang", "--override", "cuda-python>=13", "--build", "sgl-kernel", "--gpu", "sm90", "--gpu", "sm120"]
    code, _, err = run_cli(capsys, *argv)
    assert code == 1
    [reason] = [line for line in err.splitlines() if line.startswith("  - sgl-kernel 0.3.21")]
    assert reason.endswith("; --build sgl-kernel: its index has no sdist of 0.3.21")
    assert "--build sgl-kernel: its index has no sdist of 0.3.21" in " ".join((REPO / "docs" / "guides" / "building.md").read_text().split())


def test_no_page_gives_a_tag_as_the_pre_commit_rev():
    """Tags do not travel with main: the remote hook's `rev:` is a commit, written by the guide's
    block (run as written by tests/e2e/test_precommit.py); no page shows a `rev: vX.Y.Z` to paste."""
    for page in [REPO / "README.md", *(REPO / "docs").rglob("*.md")]:
        assert not re.search(r"(?m)^\s*rev: v\d", page.read_text()), page
    guide = (REPO / "docs" / "guides" / "locks-and-pre-commit.md").read_text()
    assert 'rev: $(git ls-remote "$URL" HEAD | cut -f1)' in guide


def test_lock_with_a_target_of_its_own_prints_the_plan_and_other_flags_relock_the_project(fresh_clone, capsys):
    clone, committed = fresh_clone
    code, out, err = run_cli(capsys, "lock", *STORY[:-2], "--snapshot", str(clone / SNAPSHOT.relative_to(REPO)), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["schema"] == "resolve-gpu-stack/plan/v1" and "wrote" not in err
    assert {p.name: p.read_bytes() for p in (clone / "constraints").iterdir()} == committed
    code, out, err = run_cli(capsys, "lock", "--with", "numpy")  # a resolver flag, no target of its own: the config's targets, relocked
    assert code == 0, err
    assert "x86_64-py312-cu130: wrote constraints/pylock.x86_64-py312-cu130.toml" in err
    relocked = (clone / "constraints" / "pylock.x86_64-py312-cu130.toml").read_bytes()
    assert relocked != committed["pylock.x86_64-py312-cu130.toml"] and b'"--with", "numpy"' not in relocked  # its inputs record the flag
    assert "numpy" in tomllib.loads(relocked.decode())["tool"]["resolve-gpu-stack"]["inputs"]["with"]


# -- docs/guides/troubleshooting.md: every sh block runs --------------------------------------------


def guide_commands() -> list[tuple[list[str], int]]:
    text = (REPO / "docs" / "guides" / "troubleshooting.md").read_text()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.strip().splitlines():
            expected = re.search(r"#\s*exit (\d)", line)
            words = shlex.split(line, comments=True)
            assert words[0] == "resolve-gpu-stack", line
            out.append((words[1:], int(expected[1]) if expected else 0))
    return out


def test_the_troubleshooting_guide_runs(tmp_path, capsys, monkeypatch):
    commands = guide_commands()
    assert len(commands) >= 7
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    said = {}
    for argv, expected in commands:
        argv = [str(tmp_path / w[4:]) if w.startswith("OUT/") else w for w in argv]
        code, _, err = run_cli(capsys, *argv, *(["--format", "json"] if argv[0] != "install" else []))
        assert code == expected, (argv, err)
        assert "Traceback" not in err
        said[shlex.join(argv)] = err
    assert (tmp_path / "serve.txt").is_file() and not (tmp_path / "pylock.serve.toml").exists()
    # the guide's claims beside the serving lock: as a pylock, refused before any download for the
    # stand-in digest (it was: exit 3 for torchao, then, with --live-fallback, exit 1 for this)
    [synthetic] = [e for a, e in said.items() if a.endswith("pylock.serve.toml") and "--flashinfer 0.6.5" not in a]
    assert "refusing to lock flashinfer-jit-cache 0.6.3+cu130" in synthetic and "write a constraints file (-o NAME.txt" in synthetic
    # nothing was asked of the wheel cache: torchao is named only by the plan's story (its override)
    assert not [line for line in synthetic.splitlines() if "torchao" in line and not line.startswith("  - sglang: torchao==")]
    # with FlashInfer 0.6.5: every wheel without a sha256 named, not only the first (it was: torchao alone)
    [uncached] = [e for a, e in said.items() if "--flashinfer 0.6.5" in a]
    assert "4 wheels to lock have no sha256 on their index and are not in the wheel cache" in uncached
    assert all(
        n in uncached
        for n in ("torchao-0.17.0.dev20260307", "torchaudio-2.11.0.dev20260307", "torchcodec-0.11.0.dev20260307", "torchvision-0.26.0.dev20260307")
    )
    assert "--live-fallback" in uncached and "write a constraints file (-o NAME.txt)" in uncached
    # another Python than the snapshot's: the scans it lacks are named once, with --live-fallback
    [other] = [e for a, e in said.items() if "--python 3.11" in a]
    assert "not scanned in the snapshot" in other and "add --live-fallback to scan them live" in other


# -- export uv: what `uv sync` would do to the kept torch beyond the plan ---------------------------

UV_INIT = '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = []\n'


def test_export_uv_and_check_warn_when_uv_sync_would_replace_the_environment_or_reinstall_torch(tmp_path, capsys, monkeypatch):
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "pyproject.toml").write_text(UV_INIT)
    (demo / ".python-version").write_text("3.11\n")  # what `uv init` writes on a 3.11 machine
    argv = ["export", "uv", *STORY, "--project", str(demo), "--cache-dir", str(tmp_path / "c")]
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert ".python-version asks for Python 3.11, the plan is for Python 3.12: `uv sync` would make a new .venv for 3.11" in err  # it was silent
    assert "`uv python pin 3.12`" in err
    (demo / ".python-version").write_text("3.12\n")
    info = demo / ".venv" / "lib" / "python3.12" / "site-packages" / f"torch-{NIGHTLY}.dist-info"
    info.mkdir(parents=True)
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///tmp/torch.whl", "archive_info": {}}))
    code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert ".python-version asks" not in err
    assert f"warning: torch {NIGHTLY} in " in err and "was installed from a file (file:///tmp/torch.whl): `uv sync` reinstalls it" in err
    monkeypatch.chdir(demo)
    code, out, err = run_cli(capsys, "check")
    assert f"torch {NIGHTLY} in " in out + err and "was installed from a file" in out + err  # check says it too


def test_export_uv_in_a_fresh_uv_init_project_says_how_to_make_its_venv(tmp_path, capsys, monkeypatch):
    """docs/guides/uv-projects.md's block, as a new user types it: `uv init demo && cd demo`, then
    export uv with --python .venv/bin/python; `uv init` makes no .venv."""
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "pyproject.toml").write_text(UV_INIT)
    monkeypatch.chdir(demo)
    code, _, err = run_cli(capsys, "export", "uv", "--python", ".venv/bin/python", "--dry-run")
    assert code == 2 and "Python interpreter .venv/bin/python: no such file" in err
    assert "make .venv first: `uv venv`" in err  # it was: only "pass --python with an existing interpreter path"
    guide = (REPO / "docs" / "guides" / "uv-projects.md").read_text()
    assert "uv venv && uv pip install torch" in guide  # the block makes the .venv it names


# -- uv pip sync of a snapshot lock keeps torch where the lock can list it --------------------------


@pytest.mark.slow
@needs_linux
def test_a_snapshot_lock_lists_the_kept_torch_with_live_fallback_so_uv_pip_sync_keeps_it(snapshot_of_a_venv, tmp_path, uv_env, capsys):
    srv, python, argv = snapshot_of_a_venv
    lock = tmp_path / "pylock.x.toml"
    base = ["lock", *argv, "--cache-dir", str(tmp_path / "c1"), "-o", str(lock)]
    code, _, err = run_cli(capsys, *base)  # offline: the PyTorch index lists no sha256, the wheel cache is empty
    assert code == 3 and "add --live-fallback" in err
    code, _, err = run_cli(capsys, *base, "--live-fallback")
    assert code == 0, err
    doc = tomllib.loads(lock.read_text())
    [torch] = [p for p in doc["packages"] if p["name"] == "torch"]
    assert torch["version"] == NIGHTLY and torch["wheels"][0]["hashes"]["sha256"]
    assert "torch" not in doc["tool"]["resolve-gpu-stack"].get("kept-unlisted", [])
    done = subprocess.run([UV, "pip", "sync", "--python", python, str(lock)], env=uv_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert installed(python)["torch"] == NIGHTLY  # it was: `uv pip sync` uninstalled it
