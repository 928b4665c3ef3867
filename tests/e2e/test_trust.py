"""Trust nothing the user's files or the cache hand us (issue 15): malformed index URLs, tampered
locks, config outputs outside the project, stale temp files, hostile TOML, quadratic corners,
honest messages and the synthetic rows of the bundled snapshot. Each test goes through the CLI."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.doors import run_cli
from support.paths import SNAPSHOT

SECRET = "s3cr3t-9f8e"
DECLARED = ["--python", "3.12", "--cuda", "cu130"]


def _files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


# -- 3: malformed index URLs are usage errors that never show the password -------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"http://user:{SECRET}/x@127.0.0.1:9/simple/",
        f"http://user:{SECRET}#x@127.0.0.1:9/simple/",
        f"http://user:{SECRET}?x@127.0.0.1:9/simple/",
        "http://127.0.0.1:99999/simple/",
        f"http://user:{SECRET}@[::1/simple/",
    ],
)
def test_a_malformed_index_url_is_a_usage_error_without_the_secret(tmp_path: Path, capsys, url: str) -> None:
    out_file = tmp_path / "pylock.toml"
    rc, out, err = run_cli(capsys, "lock", *DECLARED, "--index", f"pypi={url}", "--cache-dir", str(tmp_path / "c"), "-o", str(out_file))
    assert rc == 2, err
    assert "--index pypi: not an index URL" in err
    assert SECRET not in out + err and "Traceback" not in err
    assert not out_file.exists() and _files_holding(tmp_path, SECRET) == []


def test_a_password_with_a_slash_in_a_config_is_refused_as_credentials(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [tool.resolve-gpu-stack]
        snapshot = "{SNAPSHOT}"
        indexes = {{ pypi = "http://user:{SECRET}/x@127.0.0.1:9/simple/" }}

        [[tool.resolve-gpu-stack.target]]
        name = "t"
        python = "3.12"
        cuda = "cu130"
        output = ["pylock.t.toml", "t.txt"]
        """)
    )
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "lock")
    assert rc == 2, err
    assert "indexes.pypi: the URL carries credentials" in err
    assert SECRET not in out + err
    assert _files_holding(tmp_path, SECRET) == [tmp_path / "pyproject.toml"]
    assert not (tmp_path / "pylock.t.toml").exists() and not (tmp_path / "t.txt").exists()


# -- 7: a config writes only below its own folder, unless the user opts in -------------------------


def _snapshot_config(outputs: list[str], *, second: list[str] | None = None) -> str:
    text = textwrap.dedent(f"""\
        [tool.resolve-gpu-stack]
        snapshot = "{SNAPSHOT}"

        [tool.resolve-gpu-stack.defaults]
        python = "3.12"
        cuda = "cu130"
        flashinfer = "none"

        [[tool.resolve-gpu-stack.target]]
        name = "a"
        output = {outputs!r}
        """).replace("'", '"')
    if second is not None:
        text += f'\n[[tool.resolve-gpu-stack.target]]\nname = "b"\noutput = {second!r}\n'.replace("'", '"')
    return text


def test_config_outputs_outside_its_folder_are_refused_unless_allowed(tmp_path: Path, capsys, monkeypatch) -> None:
    project = tmp_path / "repo" / "sub"
    project.mkdir(parents=True)
    outside = tmp_path / "x" / "x.txt"  # constraints: no wheel to download for a hash
    notes = tmp_path / "abs" / "notes.txt"
    (project / "pyproject.toml").write_text(_snapshot_config(["../../x/x.txt", str(notes)]))
    monkeypatch.chdir(project)
    rc, out, err = run_cli(capsys, "lock", "--cache-dir", str(tmp_path / "c"))
    assert rc == 2, err
    assert f"target 'a': output {outside} is outside the project folder" in err and "--allow-outside-project" in err
    assert not outside.exists() and not notes.exists()
    rc, out, err = run_cli(capsys, "lock", "--cache-dir", str(tmp_path / "c"), "--allow-outside-project")
    assert rc == 0, err
    assert outside.is_file() and notes.is_file()


# -- 11: honest messages ---------------------------------------------------------------------------


def test_an_output_that_is_a_directory_writes_nothing_and_says_so(tmp_path: Path, capsys, monkeypatch) -> None:
    """A write failure is exit 4 (not "no plan"), and a lock writes every output of every target or
    none: the other target's file is not written either (issue 13 item 6)."""
    (tmp_path / "pyproject.toml").write_text(_snapshot_config(["a.txt", "dir.txt"], second=["b.txt"]))
    (tmp_path / "dir.txt").mkdir()
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "lock", "--cache-dir", str(tmp_path / "c"))
    assert rc == 4, err
    assert "cannot write dir.txt: it is a directory" in err and "Traceback" not in err
    assert not (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()
    assert "wrote" not in err


def test_an_output_folder_that_cannot_be_made_writes_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text(_snapshot_config(["a.txt", "blocked/a.txt"]))
    (tmp_path / "blocked").write_text("a file where a folder should be\n")
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "lock", "--cache-dir", str(tmp_path / "c"))
    assert rc == 4, err
    assert "cannot write blocked/a.txt" in err and "nothing was written" in err and "Traceback" not in err
    assert not (tmp_path / "a.txt").exists()


# -- 9: hostile configs, locks and flags are errors, never tracebacks ------------------------------

LONG = "1" * 5000


@pytest.mark.parametrize(
    "argv",
    [
        ["--python", f"3.{LONG}", "--cuda", "cu130"],
        ["--python", "3.12", "--cuda", f"cu{LONG}"],
        ["--python", "3.12", "--cuda", "cu130", "--installed", f"torch==2.{LONG}"],
        ["--python", "3.12", "--cuda", "cu130", "--torch", f"==2.{LONG}"],
        ["--python", "3.12", "--cuda", "cu130", "--with", f"numpy>=2.{LONG}"],
    ],
)
def test_a_flag_with_an_absurdly_long_number_is_a_usage_error(capsys, argv: list[str]) -> None:
    rc, out, err = run_cli(capsys, "resolve", *argv, "--snapshot", str(SNAPSHOT))
    assert rc == 2, err
    assert "a number of 50" in err and "digits; no version or number is that long" in err
    assert len(err) < 1000  # the number is not echoed


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("[tool.resolve-gpu-stack]\nx = " + "[" * 100_000 + "]" * 100_000 + "\n", "not valid TOML: nested too deeply"),
        ('[tool.resolve-gpu-stack]\nsnapshot = "\xff"\n', "not UTF-8 text"),
        (
            f'[tool.resolve-gpu-stack]\n[[tool.resolve-gpu-stack.target]]\nname = "a"\npython = "3.{LONG}"\noutput = "a.txt"\n',
            "line 4: a number of 5000 digits",
        ),
        (f'[tool.resolve-gpu-stack.defaults]\ncuda = "cu{LONG}"\n', "line 2: a number of 5000 digits"),
        (f"[tool.resolve-gpu-stack]\nx = {LONG}\n", "a number of 5000 digits"),
    ],
)
def test_a_hostile_config_is_a_usage_error(tmp_path: Path, capsys, monkeypatch, body: str, says: str) -> None:
    (tmp_path / "pyproject.toml").write_bytes(body.encode("latin-1"))
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "lock")
    assert rc == 2, err
    assert says in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("pylock.toml", 'lock-version = "1.0"\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n", "not valid TOML: nested too deeply"),
        ("pylock.toml", f'lock-version = "1.0"\nx = {LONG}\n', "line 2: a number of 5000 digits"),
        ("pylock.toml", f'lock-version = "1.0"\n[[packages]]\nname = "torch"\nversion = "2.{LONG}"\n', "line 4: a number of 5000 digits"),
        ("c.txt", f"torch==2.{LONG}\n", "line 1: a number of 5000 digits"),
    ],
)
def test_a_hostile_lock_fails_check_with_a_message(tmp_path: Path, capsys, monkeypatch, name: str, body: str, says: str) -> None:
    (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(capsys, "check", name)
    assert rc == 1, out + err
    assert says in out + err and "Traceback" not in out + err
