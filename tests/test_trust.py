"""Trust nothing the user's files or the cache hand us (issue 15): malformed index URLs, tampered
locks, config outputs outside the project, stale temp files, hostile TOML, quadratic corners,
honest messages and the synthetic rows of the bundled snapshot. Each test goes through the CLI."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from faults import run_cli

SECRET = "s3cr3t-9f8e"
SNAPSHOT = Path(__file__).resolve().parents[1] / "indexes" / "snapshots" / "2026-03-07"
DECLARED = ["--python", "3.12", "--cuda", "cu130"]


def _files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


# -- 3: malformed index URLs are usage errors that never show the password -------------------------

@pytest.mark.parametrize("url", [
    f"http://user:{SECRET}/x@127.0.0.1:9/simple/",
    f"http://user:{SECRET}#x@127.0.0.1:9/simple/",
    f"http://user:{SECRET}?x@127.0.0.1:9/simple/",
    "http://127.0.0.1:99999/simple/",
    f"http://user:{SECRET}@[::1/simple/",
])
def test_a_malformed_index_url_is_a_usage_error_without_the_secret(tmp_path: Path, capsys, url: str) -> None:
    out_file = tmp_path / "pylock.toml"
    rc, out, err = run_cli(capsys, "lock", *DECLARED, "--index", f"pypi={url}", "--cache-dir", str(tmp_path / "c"), "-o", str(out_file))
    assert rc == 2, err
    assert "--index pypi: not an index URL" in err
    assert SECRET not in out + err and "Traceback" not in err
    assert not out_file.exists() and _files_holding(tmp_path, SECRET) == []


def test_a_password_with_a_slash_in_a_config_is_refused_as_credentials(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [tool.resolve-gpu-stack]
        snapshot = "{SNAPSHOT}"
        indexes = {{ pypi = "http://user:{SECRET}/x@127.0.0.1:9/simple/" }}

        [[tool.resolve-gpu-stack.target]]
        name = "t"
        python = "3.12"
        cuda = "cu130"
        output = ["pylock.t.toml", "t.txt"]
        """))
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "lock")
    assert rc == 2, err
    assert "indexes.pypi: the URL carries credentials" in err
    assert SECRET not in out + err
    assert _files_holding(tmp_path, SECRET) == [tmp_path / "pyproject.toml"]
    assert not (tmp_path / "pylock.t.toml").exists() and not (tmp_path / "t.txt").exists()
