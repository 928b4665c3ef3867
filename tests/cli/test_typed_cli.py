"""The CLI is typed: no ``Any`` where a type exists (issue 51, item 6).

A setting is parsed once at the edge into its model (``cli/settings.py``'s ``Value``), a JSON
output is a ``render.Json`` value or a TypedDict, a rich console is a ``Console``. What is left is
counted here, and a change that adds one fails: give the value its type instead.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest
from support.paths import SNAPSHOT, SRC

CLI = SRC / "cli"

# The one left, and why: settings.fetch_settings fills the network settings (TransportSettings,
# FetchSettings) from the NETWORK table's rows by name, through dataclasses.replace(**...): the
# typed path from flag to socket is issue 51's item 2 (its import is the other count).
ALLOWED = {"settings.py": 2}


def any_names(path: Path) -> int:
    """How many times the name ``Any`` is used in ``path``'s code (its comments and docstrings not
    counted), in a quoted annotation or type alias too."""
    count = 0
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if token.type == tokenize.NAME and token.string == "Any":
            count += 1
        elif token.type == tokenize.STRING and not token.string.startswith(('"""', "'''")):
            words = token.string.replace("[", " ").replace("]", " ").replace("|", " ").replace(",", " ").split()
            count += words.count("Any")
    return count


def test_no_any_in_the_cli_beyond_the_ones_counted():
    found = {p.name: n for p in sorted(CLI.rglob("*.py")) if (n := any_names(p))}
    assert found == ALLOWED, f"Any in cli/: {found} (allowed: {ALLOWED}); give the value its type (a model, render.Json, a TypedDict)"


def test_the_count_sees_an_any(tmp_path):
    """The counter counts what mypy would read as Any: a name, a quoted annotation; not a word in prose."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""Any static server."""\nfrom typing import Any\nx: dict[str, Any] = {}\ny: "list[Any]" = []\n# Any comment\n')
    assert any_names(sample) == 3


# -- parsed once, at the edge ------------------------------------------------------------------------

TARGET = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130"]


@pytest.mark.parametrize("door", ["resolve", "lock"])
def test_the_target_settings_are_parsed_once_per_command(door, tmp_path, monkeypatch, capsys):
    """--python, --platform and --installed are each parsed once, where the command reads its flags;
    the declared target is made of those models (no second parse of the texts)."""
    from resolve_gpu_stack.cli.app import main
    from resolve_gpu_stack.model import declared

    calls = {"python": 0, "platform": 0, "installed": 0}

    def counted(name, real):
        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(declared, "parse_python_version", counted("python", declared.parse_python_version))
    monkeypatch.setattr(declared, "_parse_platform", counted("platform", declared._parse_platform))
    monkeypatch.setattr(declared, "parse_installed", counted("installed", declared.parse_installed))
    monkeypatch.chdir(tmp_path)
    out = ["-o", str(tmp_path / "pylock.toml")] if door == "lock" else ["--format", "json"]
    code = main([door, *TARGET, "--snapshot", str(SNAPSHOT), "--cache-dir", str(tmp_path / "cache"), *out])
    assert code == 0, capsys.readouterr().err
    assert calls == {"python": 1, "platform": 1, "installed": 1}
    if door == "lock":
        assert (tmp_path / "pylock.toml").is_file()


DOORS = {
    "resolve": ["resolve", *TARGET],
    "lock -o": ["lock", *TARGET, "-o", "OUT/pylock.toml"],
    "export uv": ["export", "uv", *TARGET, "--project", "OUT"],
    "install --dry-run": ["install", "--dry-run", "--python", "3.12"],
    "candidates": ["candidates", "flashinfer-python", *TARGET],
    "inspect": ["inspect", "torch==2.12.0", *TARGET],
    "snapshot": ["snapshot", "--output", "OUT/snap", *TARGET],
}


@pytest.mark.parametrize("door", sorted(DOORS))
@pytest.mark.parametrize(("flag", "value", "said"), [("--platform", "x86_64-windows", "unknown platform"), ("--cuda", "cu1", "not a CUDA label")])
def test_a_bad_setting_is_a_usage_error_before_the_command_runs(door, flag, value, said, tmp_path):
    """Every door that takes the setting refuses a bad value at once: exit 2, the value named, no
    traceback, nothing written, no index read (the snapshot named does not exist)."""
    import subprocess
    import sys

    argv = [w.replace("OUT", str(tmp_path / "out")) for w in DOORS[door]]
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    done = subprocess.run(
        [sys.executable, "-m", "resolve_gpu_stack", *argv, "--snapshot", str(tmp_path / "none"), "--cache-dir", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2 and said in done.stderr and value in done.stderr, (door, done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
