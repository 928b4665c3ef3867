"""A first hour without surprises (issue 13, items 10-18): what a newcomer types, and what they see."""

from __future__ import annotations

import importlib.metadata
import io
import json
import re
from pathlib import Path

import pytest
from support.doors import run_cli
from support.paths import REPO, SNAPSHOT

import resolve_gpu_stack
from resolve_gpu_stack.cli.app import COMMANDS, _parse, build_parser, main

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT)]


# -- 12: --version, mistyped commands and flags --------------------------------------------------------


def test_version_comes_from_one_place(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0
    assert out.strip() == f"resolve-gpu-stack {resolve_gpu_stack.__version__}"
    assert importlib.metadata.version("resolve-gpu-stack") == resolve_gpu_stack.__version__
    pyproject = (REPO / "pyproject.toml").read_text()
    assert not re.search(r"(?m)^version\s*=", pyproject), "the version lives in __init__.__version__ only"
    assert 'dynamic = ["version"]' in pyproject


def test_a_mistyped_command_lists_the_commands(capsys):
    code, out, err = run_cli(capsys, "chek")
    assert code == 2 and out == ""
    assert "unknown command 'chek'; did you mean 'check'?" in err
    from resolve_gpu_stack.cli.app import COMMANDS

    assert f"commands: {', '.join(COMMANDS)} (no command: resolve)" in err and "check" in COMMANDS


@pytest.mark.parametrize(
    "argv, wrong, right",
    [
        (["--pyhton", "3.12"], "--pyhton", "--python"),
        (["lock", "--snapshto=x"], "--snapshto", "--snapshot"),
        (["doctor", "--nvida-smi", "x"], "--nvida-smi", "--nvidia-smi"),
    ],
)
def test_a_mistyped_flag_gets_a_suggestion(capsys, argv, wrong, right):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert f"{wrong}: did you mean {right}?" in err


# -- 14: tables at 80 columns never cut a version or a name ------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_candidates_table_at_80_columns_keeps_every_version_whole(capsys, monkeypatch):
    from resolve_gpu_stack.cli import render

    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, "candidates", "flashinfer-jit-cache", "--cuda", "cu130", "--python", "3.12", "--snapshot", str(SNAPSHOT), "--format", "json")
    data = json.loads(out)
    versions = {f["version"] for f in data["files"]}
    seen: list[str] = []
    monkeypatch.setattr(render, "print_json", lambda *a: seen.append("json"))
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    assert main(["candidates", "flashinfer-jit-cache", "--cuda", "cu130", "--python", "3.12", "--snapshot", str(SNAPSHOT), "--format", "table"]) == 0
    table = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())
    cells = {cell.strip() for line in table.splitlines() if line.startswith("│") for cell in line.split("│")}
    assert versions <= cells, sorted(versions - cells)  # each version whole, in its own cell
    assert max(len(line) for line in table.splitlines()) <= 80  # the other columns wrapped or went


# -- 13: results on stdout, diagnostics on stderr, JSON with a schema -------------------------------------


@pytest.fixture
def broken_lock(tmp_path, monkeypatch) -> Path:
    """This repository's own x86_64 pylock with flashinfer-cubin's version hand-edited."""
    text = (REPO / "constraints" / "pylock.x86_64-py312-cu130.toml").read_text()
    edited = re.sub(r'(name = "flashinfer-cubin"\nversion = )"[^"]+"', r'\1"0.6.4"', text)
    assert edited != text
    (tmp_path / "pylock.x.toml").write_text(edited)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "pylock.x.toml"


def test_check_prints_its_findings_on_stderr(capsys, broken_lock):
    code, out, err = run_cli(capsys, "check", str(broken_lock))
    assert code == 1 and out == ""
    assert "error: pylock.x.toml: PEP 751: Version in 'flashinfer_cubin-0.6.5-py3-none-any.whl' is not consistent with package version '0.6.4'" in err
    assert "(flashinfer-cubin)" in err and "check failed: 1 problem" in err


def test_check_json_is_one_schema_object_on_stdout(capsys, broken_lock):
    code, out, err = run_cli(capsys, "check", str(broken_lock), "--format", "json")
    report = json.loads(out)
    assert code == 1 and err == ""
    assert report["schema"] == "resolve-gpu-stack/check/v1" and report["ok"] is False
    assert (report["files"], report["errors"], report["warnings"]) == (1, 1, 0)
    [finding] = report["findings"]
    assert (
        finding["level"] == "error"
        and finding["path"] == "pylock.x.toml"
        and "package version '0.6.4'" in finding["message"]
        and "(flashinfer-cubin)" in finding["message"]
    )
    code, out, _ = run_cli(capsys, "check", str(REPO / "constraints" / "pylock.x86_64-py312-cu130.toml"), "--format", "json")
    assert code == 0 and json.loads(out)["ok"] is True


# -- 15: -q is quiet, -v is readable, threads never share a line ------------------------------------------


def test_quiet_lock_prints_nothing_but_errors(capsys, tmp_path):
    code, out, err = run_cli(capsys, "lock", *STORY, "--installed", "triton==3.7.0+git9c288bc5", "-q", "-o", str(tmp_path / "gpu.txt"))
    assert code == 0 and (tmp_path / "gpu.txt").is_file()
    assert err == "" and out == ""
    code, _, err = run_cli(capsys, "lock", *STORY, "--installed", "triton==3.7.0+git9c288bc5", "-o", str(tmp_path / "gpu.txt"))
    assert code == 0 and "wrote " in err  # without -q it says so


def test_verbose_says_skipped_links_once_per_page(capsys, caplog):
    """``candidates -v`` reads a page whole and says its unusable links once, with a count; a
    resolve reads only the rows its target can use (tqdm's .exe and .egg links are not among them)."""
    import logging

    caplog.set_level(logging.INFO, logger="resolve_gpu_stack.index.finder")

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "/simple/tqdm/" in r.getMessage() and "skipped" in r.getMessage()]

    code, _, err = run_cli(capsys, "candidates", "tqdm", *STORY, "--format", "json", "-v")
    assert code == 0, err
    assert len(said()) == 1 and re.search(r"\(and \d+ more links skipped\)", said()[0]), said()
    caplog.clear()
    code, _, err = run_cli(capsys, *STORY, "--format", "json", "-v")
    assert code == 0, err
    assert said() == []


def test_progress_lines_are_written_whole_under_one_lock(monkeypatch):
    import threading

    writes: list[str] = []

    class Recorder(io.StringIO):
        def isatty(self) -> bool:
            return True

        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

    monkeypatch.setattr("sys.stderr", Recorder())
    from resolve_gpu_stack.cli.options import OutputOptions, progress_printer

    printer = progress_printer(OutputOptions(quiet=False))
    assert printer is not None
    threads = [threading.Thread(target=lambda i=i: [printer(f"fetching {i} pages from pypi") for _ in range(50)]) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert writes and all(w.endswith("\n") and w.count("\n") == 1 and w.startswith("fetching ") for w in writes)


# -- 16: long waits are not silent ------------------------------------------------------------------------


def test_each_retry_is_shown_as_it_happens_and_not_with_quiet(capsys, tmp_path):
    from urllib.parse import urlsplit

    from support.server import Fault, IndexServer
    from support.stack_world import build_story_world

    world = build_story_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        urls = world.index_urls(srv.url)
        page = urlsplit(urls["pypi"]).path + "numpy/"
        flags = [
            "--python",
            "3.12",
            "--installed",
            "torch==2.12.0.dev20260307+cu130",
            "--format",
            "json",
            *[f for name, url in urls.items() for f in ("--index", f"{name}={url}")],
        ]
        srv.script(page, [Fault(status=503), Fault(status=503)])
        code, _, err = run_cli(capsys, *flags, "--cache-dir", str(tmp_path / "c1"))
        assert code == 0, err
        lines = [line for line in err.splitlines() if line.startswith("retrying ")]
        assert len(lines) == 1, err  # one line per URL (issue 52 item 5): its second, short retry is not another line
        assert re.fullmatch(rf"retrying {re.escape(srv.url.rstrip('/') + page)} in \d+\.\d s \(503 Service Unavailable\), attempt 2 of 5", lines[0]), lines
        srv.script(page, [Fault(status=503)])
        code, _, err = run_cli(capsys, *flags, "--cache-dir", str(tmp_path / "c2"), "-q")
        assert code == 0 and "retrying" not in err


# -- 11: lock outside a project ---------------------------------------------------------------------------


def test_lock_outside_a_project_says_there_is_nothing_to_lock(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "lock")
    assert code == 2 and out == ""
    assert "error: nothing to lock: no config (pyproject.toml with [tool.resolve-gpu-stack], or gpu-stack.toml)" in err
    assert "-o FILE" in err
    code, _, check_err = run_cli(capsys, "check")
    assert code == 2 and "nothing to check: no config" in check_err  # the same words as check's


# -- 18: hints that fit ------------------------------------------------------------------------------------


def test_no_cuda_label_hint_does_not_suggest_installed_for_an_interpreter(capsys):
    import sys

    code, _, err = run_cli(capsys, "--python", sys.executable, "--snapshot", str(SNAPSHOT))  # this venv: no torch
    assert code == 2 and "no CUDA label" in err and "resolve-gpu-stack's own environment" in err  # the tool's: issue 52 item 2
    hint = next(line for line in err.splitlines() if line.startswith("hint:"))
    assert "--installed" not in hint and "--cuda cuNNN" in hint  # --installed is refused with an interpreter
    code, _, err = run_cli(capsys, "--python", "3.12", "--snapshot", str(SNAPSHOT))  # a declared target: it fits there
    assert code == 2 and "--installed torch==VERSION+cuNNN" in err


@pytest.mark.parametrize("torch, suggests_nightly", [("nightly", False), ("stable", True), ("<2.12", True)])
def test_downgrade_hint_does_not_suggest_the_channel_that_was_asked_for(torch, suggests_nightly):
    from packaging.version import Version

    from resolve_gpu_stack.errors import DowngradeRefused
    from resolve_gpu_stack.model.declared import declared_target
    from resolve_gpu_stack.model.request import ResolveRequest
    from resolve_gpu_stack.resolver.torch_selection import _not_lower

    installed = "2.12.0.dev20260307+cu130"
    request = ResolveRequest.build(target=declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={installed}"]), torch=torch)
    with pytest.raises(DowngradeRefused) as err:
        _not_lower({Version("2.12.0.dev20260306+cu130"), Version("2.10.0+cu130")}, Version(installed), request)
    assert "--torch installed" in err.value.hint
    assert ("--torch nightly" in err.value.hint) is suggests_nightly, err.value.hint


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--python", "3.99", "--cuda", "cu130"], "unknown Python version 3.99"),
        (["--python", "/bin/ls"], "/bin/ls: not a Python interpreter"),
    ],
)
def test_impossible_pythons_are_refused_up_front_in_one_line(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv, "--snapshot", str(SNAPSHOT))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {message}") and len(err.splitlines()) == 2, err  # the error and its hint
    assert "RESOLVE-GPU-STACK-PROBE" not in err and "import json" not in err


@pytest.mark.parametrize("command", ["resolve", "lock", "candidates", "check"])
def test_a_negative_timeout_is_refused_like_doctor_does(capsys, command):
    argv = [command, *(["torch"] if command == "candidates" else []), "--timeout", "-1"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "--timeout: -1: must be a positive number of seconds" in err


def test_a_platform_below_torchs_glibc_is_explained_as_a_platform_problem(capsys):
    argv = ["--python", "3.12", "--platform", "x86_64-manylinux_2_17", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 1 and out == ""
    assert "error: the installed torch 2.12.0.dev20260307+cu130 has no wheel for Python 3.12 on x86_64-manylinux_2_17" in err
    assert "manylinux_2_28_x86_64" in err and "--platform" in err
    assert "jit-cache" not in err


def _has_network_flags(command: str) -> bool:
    sub = next(a for a in build_parser(command)._actions if a.dest == "command")
    return "--scan-budget" in sub.choices[command].format_help()  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", [name for name in COMMANDS if _has_network_flags(name)])
def test_every_network_flag_reaches_the_fetchers_settings_as_typed(command):
    """A network flag is one row of ``settings.NETWORK``: each command that reads the network reads
    it into the one frozen ``FetchSettings`` its fetcher, transport and range child are made from."""
    from dataclasses import fields

    from resolve_gpu_stack.cli import settings as S
    from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

    assert {s.name for s in S.NETWORK if s.into == "transport"} <= {f.name for f in fields(TransportSettings)}
    assert {s.name for s in S.NETWORK if s.into == "fetch"} <= {f.name for f in fields(FetchSettings)}
    words = ["--timeout", "7.5", "--system-certs", "--scan-budget", "2M", "--allow-insecure-host", "a.test", "--allow-insecure-host", "b.test"]
    needed = {"candidates": ["torch"], "inspect": ["torch"], "snapshot": ["--output", "snap"], "export": ["uv"], "wheelhouse": ["x.lock", "-o", "out"]}.get(
        command, []
    )
    argv = [command, *needed, *words]
    args = _parse(argv)
    assert not isinstance(args, int)
    network = COMMANDS[command].read(args, {"HOME": "/nonexistent"}).network
    assert network.fetch == FetchSettings(
        transport=TransportSettings(timeout=7.5, system_certs=True, allow_insecure_hosts=("a.test", "b.test")), scan_budget=2 * 2**20
    )
    untyped = COMMANDS[command].read(_parse([command, *needed]), {"HOME": "/nonexistent"})  # type: ignore[arg-type]
    assert untyped.network.fetch == FetchSettings()
