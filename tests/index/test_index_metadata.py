"""Issue 50, item 4: index metadata the tool used to ignore.

- ``--exclude-newer DAY`` (one row of the settings table) on every resolving command: a file
  uploaded after DAY (PEP 700 ``upload-time``, which JSON pages carry) is no candidate; a page
  without upload times (the PyTorch index's and FlashInfer's HTML pages) is said in the plan, not cut.
- PEP 792 project status (``project-status`` on JSON pages, ``pypi:project-status`` on HTML ones):
  an archived or deprecated project is a warning in the plan; a quarantined one is refused unless
  asked for by name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from support.abi_world import have_cxx
from support.doors import index_flags, run_cli
from support.server import IndexServer
from support.today_world import TORCH, build_today_world
from support.world import World

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, IndexServer]]:
    root = tmp_path_factory.mktemp("meta")
    w, _ = build_today_world(root)
    w.pypi("sglang", "0.5.24", requires=["numpy"], upload_time="2026-12-05T10:00:00Z")  # after the day below
    w.pypi("archived-lib", "1.0")
    w.pypi("bad-lib", "1.0")
    w.pypi("uses-bad", "1.0", requires=["bad-lib"])
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        for name, status, reason in (("archived-lib", "archived", "superseded by new-lib"), ("bad-lib", "quarantined", "malware reported")):
            set_status(w.root / "simple" / name, status, reason)
        yield w, srv


def set_status(page: Path, status: str, reason: str) -> None:
    """PEP 792 markers on a written page: ``project-status`` in its JSON, ``pypi:project-status``
    meta tags in its HTML (api-version 1.4)."""
    data = json.loads((page / "index.json").read_text())
    data["project-status"] = {"status": status, "reason": reason}
    data["meta"]["api-version"] = "1.4"
    (page / "index.json").write_text(json.dumps(data))
    html = (page / "index.html").read_text()
    tags = f'<meta name="pypi:project-status" content="{status}">\n    <meta name="pypi:project-status-reason" content="{reason}">\n'
    (page / "index.html").write_text(html.replace("    <title>", "    " + tags + "    <title>", 1))


def flags(w: World, srv: IndexServer, tmp_path: Path) -> list[str]:
    return [
        "--python",
        "3.11",
        "--platform",
        "x86_64-manylinux_2_28",
        "--installed",
        f"torch=={TORCH}",
        *index_flags(srv.url),
        "--cache-dir",
        str(tmp_path / "c"),
    ]


def test_exclude_newer_cuts_files_uploaded_after_the_day_at_resolve_and_lock(world, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no project config around
    w, srv = world
    base = ["--torch", "installed", "--with", "sglang", *flags(w, srv, tmp_path)]
    code, out, err = run_cli(capsys, "resolve", *base, "--format", "json")
    assert code == 0, err
    assert {p["name"]: p["version"] for p in json.loads(out)["packages"]}["sglang"] == "0.5.24"
    code, out, err = run_cli(capsys, "resolve", *base, "--exclude-newer", "2026-12-01", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    got = {p["name"]: p["version"] for p in plan["packages"]}
    assert got["sglang"] == "0.5.23" and got["torch"] == TORCH, got
    # FlashInfer's index lists no upload times: its files are not cut, and the plan says so
    [note] = [n for n in plan["notes"] if n.startswith("--exclude-newer 2026-12-01")]
    assert "the flashinfer index's pages carry no upload times" in note and "flashinfer-jit-cache" in note, note
    lock = tmp_path / "pylock.toml"
    code, _, err = run_cli(capsys, "lock", *base, "--exclude-newer", "2026-12-01", "-o", str(lock))
    assert code == 0, err
    data = tomllib.loads(lock.read_text())
    assert {p["name"]: p["version"] for p in data["packages"]}["sglang"] == "0.5.23"
    assert "2026-12-01" in json.dumps(data["tool"]["resolve-gpu-stack"]), data["tool"]["resolve-gpu-stack"]  # the lock records it (its inputs, its command)
    code, out, err = run_cli(capsys, "check", str(lock))
    assert code == 0, out + err


def test_exclude_newer_at_candidates_and_a_bad_day(world, capsys, tmp_path) -> None:
    w, srv = world
    code, out, err = run_cli(capsys, "candidates", "sglang", *flags(w, srv, tmp_path), "--exclude-newer", "2026-12-01", "--format", "json")
    assert code == 0, err
    rows = {r["version"]: r for r in json.loads(out)["files"]}
    assert rows["0.5.24"]["fits_target"] is False and rows["0.5.24"]["why_not"] == "uploaded after --exclude-newer", rows["0.5.24"]
    assert rows["0.5.23"]["fits_target"] is True
    code, out, err = run_cli(capsys, "resolve", *flags(w, srv, tmp_path), "--exclude-newer", "yesterday")
    assert code == 2 and out == "" and "--exclude-newer 'yesterday' is not a day (YYYY-MM-DD)" in err and "Traceback" not in err, err


def test_project_status_archived_is_a_warning_quarantined_is_refused_unless_named(world, capsys, caplog, tmp_path) -> None:
    w, srv = world
    base = ["--torch", "installed", "--flashinfer", "none", *flags(w, srv, tmp_path)]
    code, out, err = run_cli(capsys, "resolve", *base, "--with", "archived-lib", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert {p["name"] for p in plan["packages"]} >= {"archived-lib"}
    note = "archived-lib: its index marks the project archived (PEP 792): superseded by new-lib"
    assert note in plan["notes"] and note in [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    # quarantined: none of its files is planned, the error names it and what required it
    code, out, err = run_cli(capsys, "resolve", *base, "--with", "uses-bad")
    assert code == 1 and out == "", err
    assert "bad-lib: its index marks the project quarantined (PEP 792" in err and "uses-bad 1.0" in err and "malware reported" in err, err
    # asked for by name, it is planned, said as a warning
    code, out, err = run_cli(capsys, "resolve", *base, "--with", "uses-bad", "--with", "bad-lib", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert "bad-lib" in {p["name"] for p in plan["packages"]}
    assert "bad-lib: its index marks the project quarantined (PEP 792): malware reported" in plan["notes"]


@pytest.mark.parametrize("kind", ["json", "html"])
def test_the_status_is_read_from_both_page_dialects(world, kind) -> None:
    from resolve_gpu_stack.index.parse import parse_page
    from resolve_gpu_stack.model import IndexPage

    w, srv = world
    page = w.root / "simple" / "archived-lib" / f"index.{kind}"
    content_type = "application/vnd.pypi.simple.v1+json" if kind == "json" else "text/html"
    parsed = parse_page(IndexPage(url=f"{srv.url}simple/archived-lib/", content=page.read_bytes(), content_type=content_type), index="pypi")
    assert (parsed.status, parsed.status_reason) == ("archived", "superseded by new-lib") and len(parsed.files) == 1
