#!/usr/bin/env python3
"""Check the tool's verdicts on today's serving stack (2026-12-01) against today's wheels on PyPI.

For each compiled wheel of the SGLang and vLLM closures that binds to torch or CUDA (the rows
below, from shared/reference/today.md), ``inspect NAME==VERSION`` reads the wheel's ``.so`` members
by range requests and judges them against PyPI's torch 2.15.0 (declared: no +cuNNN label, CUDA
13.2, ``--cuda cu132``). Each verdict is checked against the members' own symbols as the scan read
them (stable: no member imports a C++ symbol of torch and some import the C shim; locked: some
do; CUDA majors: the libcudart each deciding member needs), and the data rows against the newest
releases: ``[abi] cuda-build-members`` must name torch-memory-saver's twins, the expected kind
(today.md) must be what the wheel's symbols say, and the torch family's PyPI releases must match no
coupling row (they are judged by their scans: components.toml). A version-locked wheel runs only on
a torch exporting every C++ import: torch 2.15.0's exports are read from its own wheel on PyPI
(routing.toml ``kept``); where they cannot be read, the verdict is counted as unverified, not as
agreeing.

    .venv/bin/python indexes/verify_today.py [--pypi URL] [--pytorch URL] [--json FILE]

PyPI's URL comes from uv/pip configuration (or --pypi). Offline, it says so and exits 0. Exit 1
when a verdict disagrees with the symbols or a data row with the wheels.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from packaging.version import Version  # noqa: E402

from resolve_gpu_stack.cli.app import main as cli  # noqa: E402
from resolve_gpu_stack.cli.userconfig import discover_pypi_url  # noqa: E402
from resolve_gpu_stack.data.definitions import load_definitions  # noqa: E402
from resolve_gpu_stack.errors import ResolveGpuStackError  # noqa: E402

TARGET = ["--platform", "x86_64-manylinux_2_34", "--installed", "torch==2.15.0", "--cuda", "cu132"]


@dataclass(frozen=True)
class Row:
    """A wheel of today's closures and what today.md says of it."""

    name: str
    version: str
    kind: str | None  # stable | locked | None (links no torch) | "any" (its kind is not what is checked)
    runs: bool  # on PyPI's torch 2.15.0 (CUDA 13.2), by today.md
    twins: bool = False  # members per CUDA major (cuda-build-members must name them)
    family: bool = False  # a torch-family release on PyPI: no coupling row may claim it


ROWS = (
    Row("vllm", "0.33.0", "stable", runs=True),  # C-shim only, libcudart.so.13
    Row("sglang", "0.5.23", "locked", runs=True),  # 34 C++ imports, all exported by torch 2.15.0
    Row("sglang-kernel", "0.4.10", "locked", runs=True),  # 122 C++ imports, none missing
    Row("sgl-deep-ep", "0.1.2.post1", "locked", runs=True),  # 49 C++ imports, none missing
    Row("torch-memory-saver", "0.0.10", "any", runs=True, twins=True),  # CUDA-only twins; loads the _cu13 one
    Row("xformers", "0.0.35", "stable", runs=False),  # shim-only, CUDA 12 only
    # the torch family's PyPI releases: C-shim only, torch>= floors (no coupling row: their scan decides)
    Row("torchvision", "0.29.2", "stable", runs=True, family=True),
    Row("torchaudio", "2.11.1", "stable", runs=True, family=True),
    Row("torchcodec", "0.17.0", "stable", runs=True, family=True),
    Row("torchao", "0.18.0", "any", runs=True, family=True),
)


def inspect(row: Row, flags: Sequence[str]) -> dict[str, Any]:
    """The ``inspect`` report of ``row`` (its JSON), or ``{"error": ...}``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(["inspect", f"{row.name}=={row.version}", *flags, *TARGET, "--format", "json"])
    if code not in (0, 1):
        return {"error": err.getvalue().strip().splitlines()[0] if err.getvalue().strip() else f"exit {code}"}
    return json.loads(out.getvalue())


def symbols_say(report: Mapping[str, Any]) -> str | None:
    """The kind the members' own symbols say: locked (a C++ import of torch), stable (C-shim imports
    only), or None (no member links torch)."""
    members = [m for m in report.get("members", []) if m.get("torch_libraries")]
    if not members:
        return None
    if any(m.get("cxx_imports") is None for m in members):
        return "unread"
    return "locked" if any(m["cxx_imports"] for m in members) else "stable"


def check(row: Row, report: Mapping[str, Any], twins_named: bool) -> tuple[str, str]:
    """(agree | disagree | unverified, why) for one row."""
    if "error" in report:
        return "unverified", f"not read: {report['error']}"
    verdict = report.get("verdict") or {}
    said = symbols_say(report)
    if said == "unread":
        return "unverified", "the symbols of a torch-linked member were not read to the end"
    if row.kind != "any" and said != row.kind:
        return "disagree", f"today.md says {row.kind}, its symbols say {said}"
    if verdict.get("abi") != said and not (said is None and verdict.get("abi") in (None, "cuda")):
        return "disagree", f"verdict {verdict.get('abi')}, symbols say {said}"
    if row.twins and not twins_named:
        return "disagree", "cuda-build-members does not name its twins"
    if row.family and (rule := load_definitions().coupling_rule(row.name, Version(row.version))) is not None:
        return "disagree", f"a coupling row claims it ({rule[0].value}: {rule[1]}); its scan must decide"
    refusal = verdict.get("refusal") or ""
    if said == "locked" and "could not be read" in refusal:
        return "unverified", "locked: torch 2.15.0's exports could not be read here"
    if (not refusal) != row.runs:
        return "disagree", f"today.md says it {'runs' if row.runs else 'cannot run'}; the verdict: {refusal or 'runs'}"
    return "agree", refusal or verdict.get("note") or "runs"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pypi", help="PyPI's simple URL (default: from uv/pip configuration)")
    ap.add_argument("--pytorch", help="the PyTorch index's URL, where torch 2.15.0+cu132's exports are read (default: the data's)")
    ap.add_argument("--python", default="3.12", help="the declared target's Python (default 3.12)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    try:
        pypi = args.pypi or discover_pypi_url(os.environ)
    except ResolveGpuStackError as exc:
        print(f"skipped: {exc}")
        return 0
    rules = load_definitions().abi
    with tempfile.TemporaryDirectory() as cache:
        flags = [
            "--python",
            args.python,
            "--index",
            f"pypi={pypi}",
            *(["--index", f"pytorch={args.pytorch}"] if args.pytorch else []),
            "--cache-dir",
            cache,
            "--timeout",
            "60",
        ]
        results = []
        for row in ROWS:
            report = inspect(row, flags)
            if "error" in report and not results:
                print(f"skipped (offline?): {row.name} {row.version}: {report['error']}")
                return 0
            names = [m.get("name", "").rsplit("/", 1)[-1] for m in report.get("members", [])]
            majors = {rules.cuda_build_of(n) for n in names} - {None}
            status, why = check(row, report, twins_named=len(majors) >= 2)
            results.append({"package": f"{row.name} {row.version}", "status": status, "why": why})
            print(f"{status:10} {row.name} {row.version}: {why}")
    agree = sum(r["status"] == "agree" for r in results)
    unverified = sum(r["status"] == "unverified" for r in results)
    disagree = [r for r in results if r["status"] == "disagree"]
    print(f"verdicts agreeing with the wheels' symbols: {agree}/{len(results) - unverified} ({unverified} unverified)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
