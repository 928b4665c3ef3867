"""The CLI is typed: no ``Any`` where a type exists (issue 51, item 6).

A setting is parsed once at the edge into its model (``cli/settings.py``'s ``Value``), a JSON
output is a ``render.Json`` value or a TypedDict, a rich console is a ``Console``. What is left is
counted here, and a change that adds one fails: give the value its type instead.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "src" / "resolve_gpu_stack" / "cli"

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
