"""Issue 50, item 1: degrade, don't die, when an optional host is down.

FlashInfer's own index (``indexes/flashinfer.toml`` ``optional = true``) is needed only for what
lives there alone: flashinfer-jit-cache and its providers, flashinfer-cubin from 0.6.14 on. When
its host refuses connections, or answers 5xx, a plan on PyPI's torch that did not ask for those by
name (``--torch installed --with sglang``) is made without them, with one warning naming the host,
what was left out and what that costs; a part asked for by name is an error naming the host.
Every door that resolves: resolve, ``lock -o``, ``install --dry-run``, ``candidates``.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from support.abi_world import have_cxx
from support.doors import run_cli
from support.paths import REPO
from support.server import IndexServer
from support.today_world import TORCH, build_today_world

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")


class _Failing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, fmt: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def down(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, dict[str, str]], str]]:
    """The today world served; FlashInfer's index two ways down: a port that refuses, a server
    answering 503. Yields ({mode: index URLs}, a venv holding PyPI's torch 2.15.0 stand-in)."""
    root = tmp_path_factory.mktemp("down")
    world, _ = build_today_world(root)
    failing = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=failing.serve_forever, daemon=True).start()
    with socket.socket() as s:  # a port nothing listens on: connections are refused
        s.bind(("127.0.0.1", 0))
        refused = s.getsockname()[1]
    try:
        with IndexServer(world.root) as srv:
            world.write(srv.url)
            urls = world.index_urls(srv.url)
            modes = {
                "refused": {**urls, "flashinfer": f"http://127.0.0.1:{refused}/"},
                "503": {**urls, "flashinfer": f"http://127.0.0.1:{failing.server_address[1]}/"},
            }
            venv = root / "venv"
            env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
            python = str(venv / "bin" / "python")
            pip = [python, "-m", "pip", "install", "-q", "--no-deps", "--index-url", f"{srv.url}pypi-torch/", f"torch=={TORCH}"]
            subprocess.run(pip, check=True, env=env, capture_output=True)
            yield modes, python
    finally:
        failing.shutdown()
        failing.server_close()


def flags(urls: dict[str, str], tmp_path: Path) -> list[str]:
    return [*(w for n, u in urls.items() for w in ("--index", f"{n}={u}")), "--cache-dir", str(tmp_path / "c")]


def warnings(err: str, caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings said: logged (the CLI prints them on stderr) or printed on stderr (retry
    progress lines are not warnings). Read once: the log is cleared for the next command."""
    logged = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    caplog.clear()
    return logged + [line for line in err.splitlines() if "warning" in line.lower()]


def host(urls: dict[str, str]) -> str:
    return urls["flashinfer"].split("//")[1].rstrip("/")


def assert_one_warning(err: str, caplog: pytest.LogCaptureFixture, urls: dict[str, str]) -> None:
    [line] = warnings(err, caplog)
    assert f"host {host(urls)} cannot be read" in line and "planned without flashinfer-cubin, flashinfer-jit-cache" in line, err
    assert "compiles its kernels on first use" in line, line


@pytest.mark.parametrize("mode", ["refused", "503"])
def test_resolve_plans_without_what_only_the_down_host_has_with_one_warning(down, capsys, caplog, tmp_path, mode) -> None:
    modes, python = down
    urls = modes[mode]
    code, out, err = run_cli(capsys, "resolve", "--python", python, "--torch", "installed", "--with", "sglang", *flags(urls, tmp_path), "--format", "json")
    assert code == 0, err
    assert_one_warning(err, caplog, urls)
    plan = json.loads(out)
    got = {p["name"]: p["version"] for p in plan["packages"]}
    assert got["torch"] == TORCH and got["sglang"] == "0.5.23" and got["flashinfer-python"] == "0.6.5"
    assert "flashinfer-cubin" not in got and "flashinfer-jit-cache" not in got
    assert any(f"host {host(urls)} cannot be read" in n for n in plan["notes"]), plan["notes"]


def test_lock_and_install_dry_run_degrade_the_same_way(down, capsys, caplog, tmp_path, uv_env) -> None:
    modes, python = down
    urls = modes["refused"]
    lock = tmp_path / "pylock.toml"
    code, _, err = run_cli(capsys, "lock", "--python", python, "--torch", "installed", "--with", "sglang", *flags(urls, tmp_path), "-o", str(lock))
    assert code == 0, err
    assert_one_warning(err, caplog, urls)
    names = {p["name"] for p in tomllib.loads(lock.read_text())["packages"]}
    assert {"sglang", "flashinfer-python"} <= names and not names & {"flashinfer-cubin", "flashinfer-jit-cache"}
    argv = ["install", "--python", python, "--torch", "installed", "--with", "sglang", "--dry-run", *flags(urls, tmp_path)]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert_one_warning(err, caplog, urls)
    assert "flashinfer-jit-cache" not in out.replace("planned without flashinfer-cubin, flashinfer-jit-cache", "")


def test_candidates_lists_what_can_be_read_and_refuses_a_name_only_the_down_host_has(down, capsys, caplog, tmp_path) -> None:
    modes, python = down
    urls = modes["refused"]
    code, out, err = run_cli(capsys, "candidates", "sglang", "--python", python, "--torch", "installed", *flags(urls, tmp_path), "--format", "json")
    assert code == 0 and warnings(err, caplog) == [], err
    # flashinfer-cubin lives on PyPI up to 0.6.13 and on FlashInfer's host after: its PyPI rows, one warning
    code, out, err = run_cli(capsys, "candidates", "flashinfer-cubin", "--python", python, *flags(urls, tmp_path), "--format", "json")
    assert code == 0, err
    assert [r["version"] for r in json.loads(out)["files"]] == ["0.6.5"]
    [line] = warnings(err, caplog)
    assert f"host {host(urls)} cannot be read" in line
    # flashinfer-jit-cache lives there alone: asked for by name, an error naming the host
    code, out, err = run_cli(capsys, "candidates", "flashinfer-jit-cache", "--python", python, "--cuda", "cu132", *flags(urls, tmp_path))
    assert code == 3 and out == "", err
    assert f"whose host {host(urls)} cannot be read" in err and "Traceback" not in err, err


@pytest.mark.parametrize("command", ["resolve", "lock"])
def test_a_part_asked_for_by_name_is_an_error_naming_the_host(down, capsys, caplog, tmp_path, command) -> None:
    modes, python = down
    urls = modes["503"]
    out_flags = ["-o", str(tmp_path / "pylock.toml")] if command == "lock" else []
    argv = [command, "--python", python, "--torch", "installed", "--with", "sglang", "--with", "flashinfer-jit-cache", *flags(urls, tmp_path), *out_flags]
    code, out, err = run_cli(capsys, *argv)
    assert code == 3 and out == "", err
    assert f"flashinfer-jit-cache was asked for by name and lives on the flashinfer index, whose host {host(urls)} cannot be read" in err, err
    assert "503" in err and "Traceback" not in err
    assert not (tmp_path / "pylock.toml").exists()


OFFLINE = ["--index", "pypi=https://pypi.invalid/simple/", "--index", "flashinfer=https://fi.invalid/", "--index", "pytorch=https://pt.invalid/"]


@pytest.mark.parametrize(
    ("installed", "snapshot"),
    [(["torch==2.15.0", "--cuda", "cu132", "--torch", "installed"], "2026-12-07"), (["torch==2.12.0.dev20260307+cu130"], "2026-03-07")],
)
def test_the_offline_hint_names_the_snapshot_that_fits_the_kept_torch(capsys, caplog, tmp_path, installed, snapshot) -> None:
    """No host resolves (``.invalid``): FlashInfer's is left out with one warning, PyPI's is an
    error whose hint names the bundled snapshot recorded for a torch like the kept one."""
    argv = ["resolve", "--python", "3.12", "--platform", "x86_64-manylinux_2_34", "--installed", *installed, *OFFLINE, "--cache-dir", str(tmp_path / "c")]
    code, out, err = run_cli(capsys, *argv)
    assert code == 3 and out == "", err
    hint = next(line for line in err.splitlines() if line.startswith("hint:"))
    assert f"indexes/snapshots/{snapshot}" in hint, err
    other = {"2026-12-07": "2026-03-07", "2026-03-07": "2026-12-07"}[snapshot]
    assert other not in hint


def test_bundled_snapshots_are_read_from_data_and_a_bad_row_is_named(tmp_path) -> None:
    from resolve_gpu_stack.data.snapshots import bundled_path, bundled_snapshots, offline_hint
    from resolve_gpu_stack.errors import IndexDefinitionError

    rows = bundled_snapshots(bundled_path())
    assert {r.torch_from for r in rows} == {"pypi", "pytorch"} and all((REPO / r.path).is_dir() for r in rows)
    assert offline_hint((), "pypi") is None
    (tmp_path / "snapshots").mkdir()
    (tmp_path / "snapshots" / "bundled.toml").write_text('[[snapshot]]\npath = "x"\ntorch-from = "conda"\nfits = "y"\n')
    with pytest.raises(IndexDefinitionError, match="snapshot #1.*'torch-from' 'conda'"):
        bundled_snapshots(bundled_path(tmp_path))


def test_flashinfer_nightly_lives_on_the_down_host_alone_an_error_naming_it(down, capsys, caplog, tmp_path) -> None:
    modes, python = down
    urls = modes["refused"]
    code, out, err = run_cli(capsys, "resolve", "--python", python, "--torch", "installed", "--flashinfer", "nightly", *flags(urls, tmp_path))
    assert code == 3 and out == "", err
    assert f"flashinfer-python was asked for (--flashinfer nightly) and lives on the flashinfer index, whose host {host(urls)} cannot be read" in err
    assert "--flashinfer latest" in err and "Traceback" not in err


class _Toggle(http.server.BaseHTTPRequestHandler):
    """FlashInfer's host: 503 to everything while ``down``, then 404 (an answer: the host is back)."""

    down = True

    def do_GET(self) -> None:
        self.send_response(503 if _Toggle.down else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, fmt: str, *args: object) -> None:  # quiet
        pass


def test_a_plan_made_while_flashinfers_host_was_down_is_reused_while_it_stays_down(tmp_path: Path, capsys, caplog, fast_backoff) -> None:  # type: ignore[no-untyped-def]
    """The warm path on a machine that cannot reach FlashInfer's host (an air-gapped fleet reading
    PyPI through a mirror): the plan made without its parts is stored with the pages that could not
    be read, and reused while they still cannot; once the host answers, the plan is made again."""
    world, _ = build_today_world(tmp_path / "w")
    toggle = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Toggle)
    threading.Thread(target=toggle.serve_forever, daemon=True).start()
    try:
        with IndexServer(world.root) as srv:
            world.write(srv.url)
            urls = {**world.index_urls(srv.url), "flashinfer": f"http://127.0.0.1:{toggle.server_address[1]}/"}
            argv = [
                "resolve",
                "--python",
                f"{sys.version_info.major}.{sys.version_info.minor}",
                "--platform",
                "x86_64-manylinux_2_28",
                "--installed",
                f"torch=={TORCH}",
                "--cuda",
                "cu132",
            ]
            argv += ["--torch", "installed", "--with", "sglang", "--format", "json", *flags(urls, tmp_path)]
            said = []
            for down in (True, True, False):
                _Toggle.down = down
                caplog.clear()
                with caplog.at_level("INFO", logger="resolve_gpu_stack"):
                    code, out, err = run_cli(capsys, *argv)
                said.append((code, json.loads(out)["packages"] if code == 0 else err, "reusing the stored plan" in caplog.text))
                host_warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "index's host" in r.getMessage()]
                assert len(host_warned) == (1 if down else 0), host_warned  # the warm run warns as the cold one did
    finally:
        toggle.shutdown()
        toggle.server_close()
    (cold_code, cold, cold_reused), (warm_code, warm, warm_reused), (_, back, back_reused) = said
    assert cold_code == warm_code == 0, said
    assert not cold_reused and warm_reused and warm == cold  # reused while the host stays down
    # the host answers again (404 to every page here): made again, not reused, and that index's
    # answer is what the plan now rests on (no jit-cache there: the plan as asked cannot be made)
    assert not back_reused and "no flashinfer-jit-cache" in back, back
