from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from server import IndexServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "indexes" / "snapshots" / "2026-03-07"
DATA = Path(__file__).parent / "data"


@pytest.fixture
def index_server(tmp_path: Path):
    """A loopback HTTP server over an empty tree under tmp_path/'www'."""
    root = tmp_path / "www"
    root.mkdir()
    with IndexServer(root) as srv:
        yield srv
