"""Issue 22, item 6: a file a config (or a flag) names to be read is a regular file inside the
project, of bounded size, and no error quotes a line of it.

A committed config with ``overrides-file = "~/.netrc"`` printed the password line in the parse
error; ``/dev/zero`` grew to 2.6 GB, ``/dev/stdin`` hung. Through the command line, on real files
(a FIFO, devices, a symlink out of the project); the cases that would hang or fill memory run the
real console script in a subprocess with a time and memory limit.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from resolve_gpu_stack.cli import app as cli

TOOL = Path(sys.executable).with_name("resolve-gpu-stack")
SECRET = "s3cretpassw0rd"
MAX_OVERRIDES_BYTES = 1 << 20  # the README's cap on an overrides file
NETRC = f"machine mirror.example\n  login alice\n  password {SECRET}\n"


def project(root: Path, overrides_file: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        textwrap.dedent(f"""\
        [tool.resolve-gpu-stack.defaults]
        python = "3.12"
        overrides-file = {overrides_file!r}

        [[tool.resolve-gpu-stack.target]]
        name = "t"
        output = "pylock.t.toml"
        """).replace("'", '"')
    )
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(NETRC)
    monkeypatch.setenv("HOME", str(home))
    return home


def check(capsys, root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(root)
    capsys.readouterr()
    rc = cli.main(["check"])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def assert_no_line_of_netrc(text: str) -> None:
    for word in (SECRET, "alice", "machine mirror.example"):
        assert word not in text, text


@pytest.mark.parametrize("named", ["~/.netrc", "HOME/.netrc", "link-to-netrc", "../home/.netrc"])
def test_a_config_never_reads_or_prints_a_file_outside_the_project(tmp_path, home, capsys, monkeypatch, named):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "link-to-netrc").symlink_to(home / ".netrc")
    rc, said = check(capsys, project(root, named.replace("HOME", str(home))), monkeypatch)
    assert rc == 2 and "Traceback" not in said
    assert "is outside the project folder" in said or "cannot read" in said
    assert_no_line_of_netrc(said)


def test_an_error_names_the_line_number_and_never_quotes_the_line(tmp_path, capsys, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "overrides.txt").write_text(f"# pins\nnumpy==2.2.0\ntoken = {SECRET}\n")
    rc, said = check(capsys, project(root, "overrides.txt"), monkeypatch)
    assert rc == 2 and f"{root / 'overrides.txt'}: line 3: not a requirement" in said
    assert SECRET not in said and "token" not in said
    (root / "overrides.txt").write_text(f"numpy==2.2.0\n--index-url https://alice:{SECRET}@mirror.example/\n")
    rc, said = check(capsys, root, monkeypatch)
    assert rc == 2 and "line 2: an option; only requirements are read" in said and SECRET not in said


def test_an_overrides_file_over_the_size_cap_is_refused(tmp_path, capsys, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "overrides.txt").write_bytes(b"# " + b"x" * MAX_OVERRIDES_BYTES + b"\n")
    rc, said = check(capsys, project(root, "overrides.txt"), monkeypatch)
    assert rc == 2 and f"over the {MAX_OVERRIDES_BYTES}-byte limit" in said


def test_a_good_overrides_file_inside_the_project_still_works(tmp_path, capsys, monkeypatch):
    root = tmp_path / "proj"
    (root / "pins").mkdir(parents=True)
    (root / "pins" / "overrides.txt").write_text("numpy==2.2.0  # decided\n")
    rc, said = check(capsys, project(root, "pins/overrides.txt"), monkeypatch)
    assert rc == 1 and "pylock.t.toml: missing" in said  # the config loaded; the lock is not written yet


def _run(argv: list[str], cwd: Path, seconds: float = 20) -> subprocess.CompletedProcess[str]:
    """The console script, with stdin an open pipe nobody writes to, under a 2 GiB memory limit."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run(
        [str(TOOL), *argv],
        cwd=cwd,
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=seconds,
        preexec_fn=limit,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/stdin", "fifo"])
def test_devices_and_fifos_are_refused_at_once(tmp_path, special):
    """``--overrides /dev/zero`` (or /dev/stdin, or a FIFO nobody writes) on the command line, and
    the same inside a project's config: exit 2 within seconds (before: memory grew without bound, or
    it waited forever)."""
    root = tmp_path / "proj"
    root.mkdir()
    if special == "fifo":
        os.mkfifo(root / "fifo")
        special = str(root / "fifo")
    done = _run(["--python", "3.12", "--snapshot", str(tmp_path / "none"), "--overrides", special], root)
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr
    project(root, "fifo" if special.endswith("fifo") else special)
    done = _run(["check"], root)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert ("not a regular file" if special.endswith("fifo") else "is outside the project folder") in done.stderr
