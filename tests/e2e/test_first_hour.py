"""The first hour, second pass (issue 24, item 3): what a new user trying the README runs into."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from support.doors import run_cli
from support.paths import REPO, SNAPSHOT
from support.server import IndexServer, closed_port
from support.stack_world import build_story_world

import resolve_gpu_stack
from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.data.gpus import default_gpu_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT)]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# -- the override, and hints that fit --------------------------------------------------------------


def test_an_override_that_excludes_the_kept_torch_says_so_before_anything_else(capsys):
    code, out, err = run_cli(capsys, *STORY, "--override", "torch<2")
    assert code == 1 and out == ""
    assert "error: --override 'torch<2' conflicts with the installed torch 2.12.0.dev20260307+cu130, which is kept" in err
    assert "not in snapshot" not in err  # it was: a snapshot miss of an unrelated FlashInfer version
    assert "hint: drop --override 'torch<2'" in err


def test_an_override_the_kept_torch_meets_is_fine(capsys):
    code, _, err = run_cli(capsys, *STORY, "--override", "torch>=2.12.0.dev20260307", "--format", "json")
    assert code == 0, err


def test_a_flashinfer_version_that_does_not_exist_is_not_told_to_drop_the_jit_cache(capsys):
    code, _, err = run_cli(capsys, *STORY, "--flashinfer", "9.9.9")
    assert code == 1
    assert "no flashinfer-python wheel fits Python 3.12 on x86_64-manylinux_2_28 at 9.9.9" in err
    hint = err.split("hint: ", 1)[1]
    assert "--no-jit-cache" not in hint and "--no-cubin" not in hint and "--flashinfer latest" in hint


def test_a_floor_above_every_release_does_not_suggest_the_nightly_already_asked_for():
    from resolve_gpu_stack.model.declared import declared_target
    from resolve_gpu_stack.model.request import ResolveRequest
    from resolve_gpu_stack.resolver.flashinfer_selection import Floor, _floor_error

    target = declared_target("3.12", "x86_64-manylinux_2_28")
    floors = [Floor(what="--require-api mm_mxfp8 on sm120", version=Version("9.0"), source="test")]
    for choice, suggests in (("nightly", False), ("latest", True)):
        err = _floor_error(ResolveRequest.build(target=target, flashinfer=choice), floors, [Version("0.6.5")], "Python 3.12")
        assert ("--flashinfer nightly" in (err.hint or "")) is suggests


def test_no_internal_reference_numbers_reach_a_user():
    """Floors and their sources end up in errors and hints: no "ref §2b" or "rule 15" of a document
    the user does not have."""
    table = default_gpu_table()
    texts = [table.selection_source, *(r.source for r in table.gpus), *(v.source for v in table.variants)]
    texts += [t for row in table.apis for t in (row.source, *(g.source for g in row.per_gpu))]
    leaks = [t for t in texts if re.search(r"\bref §|\brule \d", t)]
    assert not leaks


# -- names checked up front, counts that add up, no empty display, quiet check ------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["lock", "--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130", "-o", "plan.json"],
        ["install", "--python", sys.executable, "-o", "lock.yaml"],
    ],
)
def test_an_output_name_is_refused_before_anything_is_resolved(capsys, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    dead = f"http://127.0.0.1:{closed_port()}/"
    code, _, err = run_cli(capsys, *argv, "--index", f"pytorch={dead}", "--index", f"flashinfer={dead}", "--index", f"pypi={dead}simple/")
    assert code == 2, err
    assert "not a lock file name" in err and "127.0.0.1" not in err  # no index was asked


@pytest.mark.parametrize(
    ("files", "cached", "size", "unknown", "line"),
    [
        (
            6,
            0,
            4896,
            ("flashinfer-jit-cache",),
            "would download 6 of 6 wheels: 4.9 kB (4,896 bytes) for 5 of them; 1 of a size the index does not give (flashinfer-jit-cache)",
        ),
        (6, 2, 4896, (), "would download 4 of 6 wheels: 4.9 kB (4,896 bytes); 2 already in the wheel cache"),
        (2, 0, 0, ("a", "b"), "would download 2 of 2 wheels: 2 of a size the index does not give (a, b)"),
    ],
)
def test_download_counts_add_up(files, cached, size, unknown, line):
    from resolve_gpu_stack.cli.cmd_install import download_line
    from resolve_gpu_stack.env.install import DownloadSummary, InstallReport

    report = InstallReport(python="p", dry_run=True, rows=(), download=DownloadSummary(files=files, cached=cached, bytes=size, unknown_size=unknown))
    assert download_line(report) == line


def test_no_progress_display_until_something_downloads_and_none_for_a_dry_run(monkeypatch):
    from resolve_gpu_stack.cli.downloads import download_progress
    from resolve_gpu_stack.cli.options import OutputOptions

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    with download_progress(OutputOptions(quiet=False)) as report:
        assert report is not None
    assert terminal.getvalue() == ""  # nothing downloaded: no (empty) bar
    with download_progress(OutputOptions(quiet=False), dry_run=True) as report:
        assert report is None
    with download_progress(OutputOptions(quiet=False)) as report:
        report("x.whl", 10, 10)
    assert "x.whl" in terminal.getvalue()


def test_check_quiet_prints_errors_only_and_counts_the_warnings(capsys):
    from resolve_gpu_stack.cli.cmd_check import _report
    from resolve_gpu_stack.lock.check import ERROR, NOTE, WARNING, Finding

    findings = [
        Finding(level=NOTE, path=Path("a"), message="not an output of a configured target"),
        Finding(level=WARNING, path=Path("a"), message="an old nightly"),
    ]
    assert _report(findings, 1, quiet=True) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == ["ok: 1 lock file consistent and fresh, 1 warning (`resolve-gpu-stack check` without -q shows them)"]  # issue 52: one line
    assert _report([*findings, Finding(level=ERROR, path=Path("a"), message="broken")], 1, quiet=True) == 1
    err = capsys.readouterr().err
    assert "broken" in err and "check failed: 1 problem" in err and "an old nightly" not in err and "not an output" not in err


# -- tables that fit --------------------------------------------------------------------------------


def test_the_plan_table_fits_80_columns_and_keeps_names_and_versions_whole(capsys, monkeypatch):
    code, out, _ = run_cli(capsys, *STORY, "--format", "json")
    rows = {(p["name"], p["version"]) for p in json.loads(out)["packages"]}
    monkeypatch.setenv("COLUMNS", "80")
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    assert main([*STORY, "--format", "table"]) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    assert max(len(line) for line in text.splitlines()) <= 80
    table = {tuple(line.split()[:2]) for line in text.splitlines() if len(line.split()) >= 3}
    assert rows <= table, sorted(rows - table)  # each name and version whole, on its row


def test_candidates_shorten_hashes_on_a_narrow_terminal(capsys, monkeypatch):
    argv = ["candidates", "flashinfer-jit-cache", "--cuda", "cu130", "--python", "3.12", "--snapshot", str(SNAPSHOT)]
    full = json.loads(run_cli(capsys, *argv, "--format", "json")[1])["files"][0]["sha256"]
    for columns, shown in (("80", full[:12] + "…"), ("300", full)):
        monkeypatch.setenv("COLUMNS", columns)
        terminal = Terminal()
        monkeypatch.setattr("sys.stdout", terminal)
        assert main([*argv, "--format", "table"]) == 0
        text = terminal.getvalue()
        assert shown in text and (columns == "300" or full not in text)
        assert max(len(line) for line in re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()) <= int(columns)


# -- -V, and the README's advice -------------------------------------------------------------------


def test_short_version_flag(capsys):
    code, out, _ = run_cli(capsys, "-V")
    assert code == 0 and out.strip() == f"resolve-gpu-stack {resolve_gpu_stack.__version__}"


def test_the_readme_says_how_to_install_the_tool_apart_from_the_target():
    readme = (REPO / "README.md").read_text()
    assert "uv tool install" in readme and "pipx install" in readme
    assert "--python /path/to/venv/bin/python" in readme


def test_ci_runs_the_readmes_test_command_as_written():
    """The README's first block is two commands; the second (set up and run the tests) is the one
    CI runs, word for word, so a reader who copies it gets what CI checked."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", readme, flags=re.S)
    assert block is not None
    commands = block.group(1).strip().splitlines()
    assert len(commands) == 2 and "pytest" in commands[1]
    assert commands[1] in (REPO / ".ci" / "run").read_text().splitlines()


# -- a snapshot with the rest fetched live ---------------------------------------------------------


@pytest.fixture
def served_snapshot(tmp_path, capsys):
    """The story world on a loopback server and a snapshot of the default plan's reads."""
    world = build_story_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        indexes = ["--index", f"pytorch={srv.url}whl/", "--index", f"flashinfer={srv.url}fi/", "--index", f"pypi={srv.url}simple/"]
        target = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130"]
        code, _, err = run_cli(
            capsys, "snapshot", *target, *indexes, "--cache-dir", str(tmp_path / "c0"), "--output", str(tmp_path / "snap"), "--format", "json"
        )
        assert code == 0, err
        yield srv, [*target, *indexes, "--snapshot", str(tmp_path / "snap")]


def test_live_fallback_fetches_what_the_snapshot_lacks(capsys, tmp_path, served_snapshot):
    srv, argv = served_snapshot
    code, _, err = run_cli(capsys, *argv, "--flashinfer", "0.6.4", "--format", "json")  # 0.6.5 was recorded
    assert code == 3
    assert "not in snapshot" in err and "--live-fallback" in err
    srv.log.clear()
    code, out, err = run_cli(capsys, *argv, "--flashinfer", "0.6.4", "--live-fallback", "--cache-dir", str(tmp_path / "c1"), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["flashinfer"]["version"] == "0.6.4"
    assert srv.log and not any(path.endswith("/torch/") for _, path, _ in srv.log)  # only what the snapshot lacks


def test_live_fallback_is_a_flag_of_every_command_with_a_snapshot(capsys):
    for command in ("resolve", "lock", "install", "snapshot", "candidates", "check", "export"):
        code, out, _ = run_cli(capsys, command, "--help")
        assert code == 0 and "--live-fallback" in out, command


# -- snapshot locks on a mirror with its own layout ------------------------------------------------


def devpi_mirror(world_root: Path, mirror: Path) -> None:
    """world_root's PyPI as devpi lays it out: pages under /root/pypi/+simple/, files under /root/pypi/+f/."""
    for page in (world_root / "simple").glob("*/index.json"):
        data = json.loads(page.read_text())
        for f in data["files"]:
            source = world_root / "files" / f["filename"]
            target = mirror / "root" / "pypi" / "+f" / f["hashes"]["sha256"][:3] / f["filename"]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
            f["url"] = f"../../+f/{f['hashes']['sha256'][:3]}/{f['filename']}"
        out = mirror / "root" / "pypi" / "+simple" / page.parent.name
        out.mkdir(parents=True, exist_ok=True)
        (out / "index.json").write_text(json.dumps(data))
        (out / "index.html").write_text("".join(f'<a href="{f["url"]}#sha256={f["hashes"]["sha256"]}">{f["filename"]}</a>\n' for f in data["files"]))


def test_a_snapshot_lock_places_pypi_files_on_a_mirrors_own_layout(capsys, tmp_path, served_snapshot, monkeypatch):
    srv, argv = served_snapshot
    pypi_flag = argv.index(f"pypi={srv.url}simple/")
    argv = argv[: pypi_flag - 1] + argv[pypi_flag + 1 :]  # no --index pypi=...: the user's configured PyPI
    devpi_mirror(srv.root, tmp_path / "mirror")
    with IndexServer(tmp_path / "mirror") as mirror:
        monkeypatch.setenv("PIP_INDEX_URL", f"{mirror.url}root/pypi/+simple/")  # the user's PyPI is the mirror
        lock = tmp_path / "pylock.x.toml"
        code, _, err = run_cli(capsys, "lock", *argv, "--cache-dir", str(tmp_path / "c2"), "-o", str(lock))
        assert code == 0, err
        doc = tomllib.loads(lock.read_text())
        pypi = [p for p in doc["packages"] if p["index"].startswith(mirror.url)]
        assert pypi and all(p["wheels"][0]["url"].startswith(f"{mirror.url}root/pypi/+f/") for p in pypi), (err, [p["wheels"][0]["url"] for p in pypi])
        for p in pypi:  # the mirror serves each placed URL, with the locked hash
            wheel = p["wheels"][0]
            path = tmp_path / "mirror" / wheel["url"][len(mirror.url) :]
            assert path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == wheel["hashes"]["sha256"]
    # the mirror is gone: the lock says which files it could not place
    code, _, err = run_cli(capsys, "lock", *argv, "--cache-dir", str(tmp_path / "c3"), "--timeout", "1", "-o", str(lock))
    assert code == 0, err
    assert "warning:" in err and "could not be placed on" in err
    assert any("could not be placed" in n for n in tomllib.loads(lock.read_text())["tool"]["resolve-gpu-stack"]["notes"])
