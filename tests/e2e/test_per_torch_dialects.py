"""Issue 50, item 2: per-torch builds in every dialect.

Each publisher of per-torch builds writes the torch and CUDA a build is for in its own local label
dialect; components.toml ``[[per-torch.dialect]]`` reads them all (data, not if-chains) into
(torch, CUDA, C++ ABI). On a loopback world of today's shape (PyPI's torch 2.15.0 kept, CUDA 13.2),
one per-torch index per dialect, configured for flash-attn (``--package-index``): the build for the
kept torch and its CUDA is planned, not the highest version on the page; ``candidates`` shows each
build's torch; a build whose label names the kept torch but whose symbols refuse it is refused,
saying that the label lied.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version
from support.abi_world import have_cxx
from support.doors import index_flags, run_cli
from support.paths import REPO
from support.server import IndexServer
from support.today_world import TORCH, build_today_world
from support.wheels import build_wheel
from support.world import World, _Entry

from resolve_gpu_stack.data.definitions import load_definitions

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

DEFS = load_definitions()
NATIVE = "cp39-abi3-manylinux_2_28_x86_64"

# dialect -> (the build for torch 2.15 + CUDA 13.x, builds for another torch or a CUDA newer than 13.2)
DIALECTS = {
    "cuXXtorchA.B": ("cu13torch2.15cxx11abiTRUE", ("cu13torch2.16cxx11abiTRUE", "cu12torch2.15cxx11abiTRUE", "cu13torch2.15cxx11abiFALSE")),
    "cu.X.Y.torch.A.B": ("cu.13.0.torch.2.15", ("cu.13.0.torch.2.16", "cu.13.4.torch.2.15", "cu.12.8.torch.2.15")),
    "ptABcuXXX": ("pt215cu130", ("pt216cu130", "pt214cu130", "pt215cu134")),
    "torchA.BcuXXX": ("torch2.15cu130", ("torch2.16cu130", "torch2.15cu134", "torch2.14cu130")),
}


def _page(w: World, page: str, version: str, so: bytes) -> None:
    files = {"flash_attn/__init__.py": b"", "flash_attn_2_cuda.abi3.so": so}
    wheel = build_wheel(w.root / "assets", "flash-attn", version, NATIVE, ["torch", "numpy"], files=files)
    w._add(page, "pypi", _Entry(wheel, "assets/" + wheel.filename, sidecar=False))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, IndexServer]]:
    root = tmp_path_factory.mktemp("dialects")
    w, objects = build_today_world(root)
    for i, (right, others) in enumerate(DIALECTS.values()):
        for local in (right, *others):
            _page(w, f"builds-{i}/flash-attn/", f"2.8.3+{local}", objects["locked_ok.so"])
    # a liar: the newest release, labelled for the kept torch, importing a C++ symbol it does not export
    _page(w, "builds-liar/flash-attn/", "2.8.3+cu.13.0.torch.2.15", objects["locked_ok.so"])
    _page(w, "builds-liar/flash-attn/", "2.8.4+cu.13.0.torch.2.15", objects["locked_bad.so"])
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        yield w, srv


def flags(w: World, srv: IndexServer, tmp_path: Path, page: str) -> list[str]:
    return [
        "--python",
        "3.11",
        "--platform",
        "x86_64-manylinux_2_28",
        "--installed",
        f"torch=={TORCH}",
        "--torch",
        "installed",
        "--flashinfer",
        "none",
        *index_flags(srv.url),
        "--package-index",
        f"flash-attn={srv.url}{page}/",
        "--cache-dir",
        str(tmp_path / "c"),
    ]


@pytest.mark.parametrize(
    ("local", "torch", "cuda", "abi"),
    [
        ("cu12torch2.8cxx11abitrue", "2.8", "12", "true"),
        ("cu128torch2.9", "2.9", "128", None),
        ("cu.12.8.torch.2.11", "2.11", "128", None),
        ("pt29cu128", "2.9", "128", None),
        ("pt210cu126", "2.10", "126", None),
        ("torch2.9cu128", "2.9", "128", None),
    ],
)
def test_every_dialect_reads_torch_cuda_and_abi_from_data(local: str, torch: str, cuda: str, abi: str | None) -> None:
    assert DEFS.per_torch is not None
    said = DEFS.per_torch.built_for(str(Version(f"1.0+{local}").local))
    assert said is not None and (said.torch, said.cuda, said.cxx11abi) == (torch, cuda, abi), said
    for none in ("cu130", "cpu", "pt113cpu", "post1"):
        assert DEFS.per_torch.built_for(none) is None


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_the_build_for_the_kept_torch_and_its_cuda_is_planned_not_the_highest(world, capsys, tmp_path, dialect) -> None:
    w, srv = world
    i = list(DIALECTS).index(dialect)
    right, others = DIALECTS[dialect]
    highest = max(Version(f"2.8.3+{x}") for x in (right, *others))
    assert highest != Version(f"2.8.3+{right}")  # without the dialect, the highest would win
    for door in (["resolve"], ["lock", "-o", str(tmp_path / f"pylock.{i}.toml")]):
        code, out, err = run_cli(capsys, *door, "--with", "flash-attn", *flags(w, srv, tmp_path, f"builds-{i}"), "--format", "json")
        assert code == 0, err
    plan = json.loads(run_cli(capsys, "resolve", "--with", "flash-attn", *flags(w, srv, tmp_path, f"builds-{i}"), "--format", "json")[1])
    fa = {p["name"]: p for p in plan["packages"]}["flash-attn"]
    assert Version(fa["version"]) == Version(f"2.8.3+{right}") and fa["index"] == "package:flash-attn", fa
    assert fa["built_for"] == "2.15" and fa["abi"]["kind"] == "locked" and fa["abi"]["refusal"] is None, fa
    assert Version(f"2.8.3+{right}").local in (tmp_path / f"pylock.{i}.toml").read_text()


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_candidates_shows_each_builds_torch(world, capsys, tmp_path, dialect) -> None:
    w, srv = world
    i = list(DIALECTS).index(dialect)
    right, _ = DIALECTS[dialect]
    argv = ["candidates", "flash-attn", *flags(w, srv, tmp_path, f"builds-{i}")]
    argv = [a for a in argv if a not in ("--torch", "installed", "--flashinfer", "none")]
    code, out, err = run_cli(capsys, *argv, "--cuda", "cu132", "--format", "json")
    assert code == 0, err
    rows = {r["version"]: r for r in json.loads(out)["files"]}
    assert len(rows) == 4 and all(r["built_for"] is not None and r["built_for"].startswith("torch 2.1") for r in rows.values()), rows
    fitting = [v for v, r in rows.items() if r["fits_target"]]
    assert [Version(v) for v in fitting] == [Version(f"2.8.3+{right}")], rows
    assert rows[str(Version(f"2.8.3+{right}"))]["built_for"].startswith("torch 2.15, CUDA 13")
    code, out, err = run_cli(capsys, *argv, "--cuda", "cu132")
    assert code == 0 and "built for" in out and "torch 2.16" in out, out


def test_a_label_that_lies_is_refused_by_its_symbols_saying_so(world, capsys, tmp_path) -> None:
    w, srv = world
    code, out, err = run_cli(capsys, "resolve", "--with", "flash-attn", *flags(w, srv, tmp_path, "builds-liar"))
    assert code == 1 and out == "", err
    assert "flash-attn 2.8.4+cu.13.0.torch.2.15" in err and "the label lied" in err, err
    # asked for the older build, the one whose label tells the truth is planned
    code, out, err = run_cli(capsys, "resolve", "--with", "flash-attn<2.8.4", *flags(w, srv, tmp_path, "builds-liar"), "--format", "json")
    assert code == 0, err
    fa = {p["name"]: p for p in json.loads(out)["packages"]}["flash-attn"]
    assert fa["version"] == "2.8.3+cu.13.0.torch.2.15", fa


def test_a_dialect_without_the_groups_it_needs_is_refused_naming_its_row(tmp_path) -> None:
    import shutil

    from resolve_gpu_stack.errors import IndexDefinitionError

    src = REPO / "indexes"
    for f in src.glob("*.toml"):
        shutil.copy(f, tmp_path / f.name)
    text = (tmp_path / "components.toml").read_text()
    bad = text.replace("local = '^torch(?P<torch>\\d+\\.\\d+)cu(?P<cuda>\\d+)$'", "local = '^torch(?P<torch>\\d+\\.\\d+)cu\\d+$'")
    assert bad != text
    (tmp_path / "components.toml").write_text(bad)
    with pytest.raises(IndexDefinitionError, match=r"per-torch.dialect #4.*named groups torch"):
        load_definitions(tmp_path)
