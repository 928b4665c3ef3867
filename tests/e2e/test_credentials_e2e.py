"""Credentials end to end: every command a user runs against an index that wants a token, with
``--verbose``; afterwards the token (and its base64 in Basic auth) is in no output, no log record,
no cache file, no lock file, no snapshot file and no error message. A test greps for it everywhere.

Ways a token reaches the tool: ``user:token@`` in ``--index`` URLs, a ``~/.netrc`` entry, and the
PyPI URL from the environment (``UV_INDEX_URL``). There is no way to hand the tool a raw
Authorization header (no flag, no setting), so there is no such path to test.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.doors import run_cli
from support.faults import LISTING, TARGET, story_run
from support.server import IndexServer

USER = "alice"
TOKEN = "tok-5ecr3t-9f8e7d6c"
WRONG = "wr0ng-t0ken-1a2b3c"


def secrets(token: str = TOKEN) -> list[bytes]:
    """The token as it could leak: plain, in a Basic header, and URL-encoded in a user:token@ URL."""
    basic = base64.b64encode(f"{USER}:{token}".encode())
    return [token.encode(), basic, basic.decode().rstrip("=").encode()]


def leaks(root: Path, *, skip: tuple[Path, ...] = ()) -> list[str]:
    """Every file under ``root`` holding a secret (``skip``: files that hold it on purpose)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p not in skip):
        data = path.read_bytes()
        for secret in secrets() + secrets(WRONG):
            if secret in data:
                found.append(f"{path.relative_to(root)} holds {secret[:6]!r}...")
    return found


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in secrets() + secrets(WRONG):
            assert secret.decode() not in text, f"secret leaked: ...{text[max(0, text.find(secret.decode()) - 80) :][:200]}"


def with_credentials(url: str, token: str = TOKEN) -> str:
    return url.replace("http://", f"http://{USER}:{token}@", 1)


@pytest.mark.parametrize("how", ["url", "netrc", "environment"])
def test_token_never_leaks_from_resolve_lock_check_snapshot(tmp_path: Path, capsys, caplog, monkeypatch, how: str) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.chdir(tmp_path)  # no project config above: check looks at the files it is given
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with story_run(tmp_path / "run") as run:
        run.srv.auth = (USER, TOKEN)
        base = run.srv.url
        urls = {"pytorch": base + "whl/", "flashinfer": base + "fi/", "pypi": base + "simple/"}
        netrc = home / ".netrc"
        if how == "netrc":
            netrc.write_text(f"machine 127.0.0.1 login {USER} password {TOKEN}\n")
            netrc.chmod(0o600)
        else:
            urls = {name: with_credentials(url) for name, url in urls.items()}
        if how == "environment":
            monkeypatch.setenv("UV_INDEX_URL", urls.pop("pypi"))
        index = [f for name, url in urls.items() for f in ("--index", f"{name}={url}")]
        common = [*TARGET, *index, "--cache-dir", str(run.cache), "--verbose"]
        out_dir = tmp_path / "run" / "out"
        seen: list[str] = []

        def step(*argv: str, expect: int = 0) -> str:
            rc, out, err = run_cli(capsys, *argv)
            seen.extend([out, err])
            assert rc == expect, out + err
            return out + err

        step("resolve", *common, "--format", "json")
        step("lock", *common, "-o", str(out_dir / "pylock.x.toml"), "-o", str(out_dir / "constraints.txt"))
        step("check", str(out_dir / "pylock.x.toml"), str(out_dir / "constraints.txt"))
        step("snapshot", *common, "--output", str(tmp_path / "run" / "snap"), "--format", "json")
        # candidates lists one package's builds for the target's torch: no resolve flags (--verbose, --upgrade-package)
        listing = [*LISTING, *index, "--cache-dir", str(run.cache)]
        step("candidates", "flashinfer-jit-cache", *listing, "--format", "json")
        assert (out_dir / "pylock.x.toml").is_file() and (tmp_path / "run" / "snap" / "manifest.json").is_file()
        # the token did reach the server, on every request
        assert run.srv.log and all(h.get("Authorization") == "Basic " + secrets()[1].decode() for _, _, h in run.srv.log)

        # a refused token: one clear error, still without either token
        if how != "netrc":
            wrong = [a.replace(TOKEN, WRONG) for a in common]
            monkeypatch.setenv("UV_INDEX_URL", with_credentials(base + "simple/", WRONG))
            text = step("resolve", *wrong, "--cache-dir", str(tmp_path / "run" / "cold-cache"), expect=3)
            assert "401 Unauthorized" in text and "were refused" in text

        assert_no_secret(*seen, caplog.text, *(r.getMessage() for r in caplog.records))
        assert leaks(tmp_path, skip=(netrc,)) == []


@pytest.mark.slow
def test_token_never_leaks_from_install_and_doctor_with_verbose_logging(tmp_path: Path) -> None:
    """The real program in subprocesses (real stderr logging at DEBUG, httpx's included):
    lock, install into a venv, check and doctor; then grep every file of the run, the venv included."""
    from support import install_world

    if not install_world._glibc_ok() or not Path(install_world.UV).exists():
        pytest.skip("needs Linux with glibc >= 2.28 and uv next to this interpreter")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_", "VIRTUAL_ENV"))}
    env.update({"HOME": str(tmp_path / "home"), "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"})
    world = install_world.build_world(tmp_path / "www")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        srv.auth = (USER, TOKEN)
        python = install_world.make_venv(tmp_path / "venv", env, install_world.torch_wheel(world, install_world.NIGHTLY))
        index = [
            "--index",
            f"pytorch={with_credentials(srv.url)}whl/",
            "--index",
            f"flashinfer={with_credentials(srv.url)}fi/",
            "--index",
            f"pypi={with_credentials(srv.url)}simple/",
        ]
        common = ["--python", python, *index, "--cache-dir", str(tmp_path / "cache"), "--verbose"]
        outputs: list[str] = []

        def program(*argv: str, ok: tuple[int, ...] = (0,)) -> None:
            proc = subprocess.run([sys.executable, "-m", "resolve_gpu_stack", *argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
            outputs.extend([proc.stdout, proc.stderr])
            assert proc.returncode in ok, proc.stdout + proc.stderr

        program("lock", *common, "-o", "pylock.x.toml", "-o", "constraints.txt")
        program("install", *common, "--format", "json", "-o", "pylock.installed.toml")
        program("check", "pylock.x.toml", "pylock.installed.toml", "constraints.txt")
        # the tiny wheels have no importable `flashinfer`: doctor says so (exit 1); only its output matters here
        program("doctor", "--python", python, "--verbose", "--nvidia-smi", str(tmp_path / "no-nvidia-smi"), "--format", "json", ok=(0, 1))
        assert any("DEBUG" in text and "GET http://127.0.0.1" in text for text in outputs), "the runs did log their requests"
        assert json.loads(outputs[2])["packages"]  # install reported what it did
    installed = subprocess.run([python, "-c", "import flashinfer_jit_cache, sys; print(sys.prefix)"], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    assert_no_secret(*outputs)
    assert leaks(tmp_path) == []
