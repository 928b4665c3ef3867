"""One KeptTorch per request: the kept torch's CUDA and its closure are derived in one place each and
read from the ``KeptTorch`` value everywhere else (issue 47 item 3).

A lint over the source tree: who may call the derivations (``kept_torch_cuda``, ``read_closure``,
``probed_closure``), who may build a ``KeptClosure``, and who may attach a closure to a
``KeptTorch`` (``replace(kept, closure=...)``). A new door that derives the closure again, instead
of reading ``request.kept.closure``, fails here with the file and line.
"""

from __future__ import annotations

import ast

import pytest
from support.paths import SRC

# the function -> the modules that may call it (its makers)
MAKERS: dict[str, frozenset[str]] = {
    # the CUDA of a torch by the one rule: the KeptTorch maker, and the probe that reads an interpreter's torch
    "kept_torch_cuda": frozenset({"model/kept.py", "resolver/kept.py", "env/probe.py"}),
    # the closure read: a declared torch's from its index (torch_pins), a probed torch's from its dists
    "read_closure": frozenset({"resolver/torch_pins.py"}),
    "probed_closure": frozenset({"resolver/kept.py"}),
    "KeptClosure": frozenset({"resolver/kept_closure.py"}),
}
# the modules that attach a closure to a KeptTorch (a `closure=` keyword of dataclasses.replace)
ATTACHERS = frozenset({"resolver/kept.py", "resolver/torch_pins.py"})


def _calls() -> list[tuple[str, int, str, ast.Call]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                out.append((rel, node.lineno, name, node))
    return out


CALLS = _calls()


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_a_kept_torch_derivation_is_called_only_by_its_maker(name: str) -> None:
    where = {rel for rel, _, called, _ in CALLS if called == name}
    assert where, f"{name} is called nowhere: the lint has gone stale"
    strays = sorted(f"{rel}:{line}" for rel, line, called, _ in CALLS if called == name and rel not in MAKERS[name])
    assert not strays, f"{name} derived outside its maker (read it from the KeptTorch instead): {strays}"


def test_only_the_makers_attach_a_closure_to_the_kept_torch() -> None:
    attach = [(rel, line) for rel, line, called, node in CALLS if called == "replace" and any(k.arg == "closure" for k in node.keywords)]
    assert {rel for rel, _ in attach} == ATTACHERS, attach


def test_the_resolve_reads_the_closure_from_the_kept_torch() -> None:
    text = (SRC / "resolver" / "resolve.py").read_text(encoding="utf-8")
    assert "request.kept.closure" in text
    for name in ("probed_closure", "read_closure", "kept_torch_cuda"):
        assert name not in text, f"resolve.py derives {name} itself"
