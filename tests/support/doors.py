"""The command line as the tests drive it, in this process: a world's indexes as flags, and one command run."""

from __future__ import annotations

import pytest

from resolve_gpu_stack.cli.app import main
from support.world import index_urls


def index_flags(base: str) -> list[str]:
    """``--index NAME=URL`` for each index of a world served at ``base``."""
    return [word for name, url in index_urls(base).items() for word in ("--index", f"{name}={url}")]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``resolve-gpu-stack ARGV...``: its exit status and what it printed (and only what it printed)."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
