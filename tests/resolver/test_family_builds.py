"""Builds for the kept torch that an index already has (issue 21, items 1 and 2), on loopback worlds:

- the torch family's own nightlies: a framework's pin on torchao / torchcodec is met by the nightly
  of the kept torch's day from the PyTorch index (they name no torch in their METADATA), reported
  as an override; the PyPI page of those names is never read;
- per-torch builds on an index the user configures for a package (``--package-index``): a build
  whose local label names the kept torch's series, CUDA and C++ ABI (``+cu12torch2.9cxx11abiTRUE``)
  is chosen, and PyPI's build for another torch is never seen.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version
from support.elfbuild import compile_extension, have_cc, torch_stubs
from support.framework_world import FileClassifier
from support.server import IndexServer
from support.stack_world import X86, torch_nightly
from support.wheels import build_wheel
from support.world import World, _Entry

from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.cli.assemble import resolve_parts
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.errors import IndexDefinitionError, NoPlanError
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.model import Coupling
from resolve_gpu_stack.model.cuda import CudaLabel
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings
from resolve_gpu_stack.resolver.resolve import resolve
from resolve_gpu_stack.rules.fit import RejectReason, family_date_mismatch, per_torch_mismatch

DEFS = load_definitions()
NIGHTLY = "2.12.0.dev20260307+cu130"
STABLE = "2.9.1+cu128"


# -- the rules, as pure functions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "version", "torch", "why"),
    [
        ("date", "0.17.0.dev20260307+cu130", NIGHTLY, None),
        ("date", "0.17.0.dev20260306+cu130", NIGHTLY, "built on 20260306 against that day's torch; torch is the nightly of 20260307"),
        ("date", "0.17.0.dev20260307+cu130", "2.10.0+cu130", "torch is the release 2.10.0+cu130"),
        ("date", "0.16.0+cu130", NIGHTLY, None),  # a release names no day: left to the ABI judgement
        ("pin", "0.17.0.dev20260306+cu130", NIGHTLY, None),  # a member that pins torch is judged by its pin
        (None, "0.17.0.dev20260306", NIGHTLY, None),
    ],
)
def test_a_same_day_family_nightly_fits_only_the_torch_nightly_of_its_day(rule, version, torch, why):
    got = family_date_mismatch(rule, Version(version), Version(torch))
    assert (got is None) == (why is None)
    if why is not None:
        assert got.reason is RejectReason.TORCH_ABI and why in got.detail


@pytest.mark.parametrize(
    ("local", "torch", "cuda", "why"),
    [
        ("cu12torch2.9cxx11abiTRUE", "2.9.1+cu128", "cu128", None),
        ("cu128torch2.9", "2.9.1+cu128", "cu128", None),
        ("cu126torch2.9", "2.9.1+cu128", "cu128", None),  # an older CUDA 12 build runs under 12.8
        ("cu129torch2.9", "2.9.1+cu128", "cu128", "built for CUDA 12.9, torch for cu128"),
        ("cu12torch2.9cxx11abiTRUE", "2.9.1+cu130", "cu130", "built for CUDA 12, torch for cu130"),
        ("cu12torch2.8cxx11abiTRUE", "2.9.1+cu128", "cu128", "built for torch 2.8, torch is 2.9.1+cu128"),
        ("cu12torch2.9cxx11abiFALSE", "2.9.1+cu128", "cu128", "the old C++ ABI"),
        ("cu12torch2.6cxx11abiFALSE", "2.6.0+cu126", "cu126", None),  # before 2.7 the pip wheels used the old ABI
        ("cu130torch2.12", NIGHTLY, "cu130", "built for the torch 2.12 release, torch is the pre-release"),
        ("cu130", "2.9.1+cu130", "cu130", None),  # a label without a torch is not a per-torch build
    ],
)
def test_a_per_torch_build_fits_its_torch_series_cuda_and_cxx11_abi(local, torch, cuda, why):
    got = per_torch_mismatch(DEFS.per_torch, Version(f"2.8.3+{local}"), Version(torch), CudaLabel.parse(cuda))
    assert (got is None) == (why is None), got
    if why is not None:
        assert why in got.detail


def test_package_indexes_own_their_package_alone_and_keep_torch_and_flashinfer_apart():
    defs = DEFS.with_index_urls({"pypi": "https://pypi.example/simple/"}).with_package_indexes({"Flash_Attn": "https://wheels.example/simple"})
    from resolve_gpu_stack.data.definitions import RouteContext

    [page] = defs.pages_for("flash-attn", RouteContext())
    assert (page.index, page.url) == ("package:flash-attn", "https://wheels.example/simple/flash-attn/")
    assert defs.owner("flash-attn", Version("2.8.3+cu12torch2.9cxx11abitrue"), RouteContext()) == "package:flash-attn"
    assert defs.owner("numpy", Version("2.0"), RouteContext()) == "pypi"
    assert defs.recorded_urls()["package:flash-attn"] == "https://wheels.example/simple/"
    again = DEFS.with_recorded_package_indexes(defs.recorded_urls())
    assert again.owner("flash-attn", Version("1.0"), RouteContext()) == "package:flash-attn"
    for name in ("torch", "flashinfer-jit-cache", "flashinfer-python"):
        with pytest.raises(IndexDefinitionError, match="keeps its own index"):
            DEFS.with_package_indexes({name: "https://wheels.example/simple/"})


# -- item 1: torchao / torchcodec from the PyTorch nightly index -------------------------------------

needs_cc = pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")


def _family_world(root: Path) -> World:
    w = World(root / "www")
    torch_nightly(w, "20260307")
    for name, version in (("filelock", "3.17.0"), ("typing-extensions", "4.12.2"), ("cuda-toolkit", "13.0.2"), ("numpy", "2.2.0")):
        w.pypi(name, version)
    w.pytorch("triton", "3.7.0+git9c288bc5", tag=f"cp312-cp312-{X86}", at_root=True)
    # one torchao nightly a day; the one of the 8th was built against the torch of the 8th
    for day in ("20260306", "20260307", "20260308"):
        w.pytorch("torchao", f"0.17.0.dev{day}+cu130", tag=f"cp310-abi3-{X86}")
        w.pytorch("torchcodec", f"0.11.0.dev{day}+cu130", tag=f"cp312-cp312-{X86}")
    w.pypi("torchao", "0.9.0", tag=f"cp39-abi3-{X86}")  # PyPI's: never read, the PyTorch index owns torchao
    w.pypi("servefw", "1.0", requires=["torch==2.9.1", "torchao==0.9.0", "torchcodec==0.8.0", "numpy"])
    return w


def test_a_framework_pin_on_torchao_and_torchcodec_is_met_by_the_nightly_of_the_kept_torchs_day(tmp_path):
    world = _family_world(tmp_path)
    target = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"])
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = DEFS.with_index_urls(world.index_urls(srv.url))
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            plan = resolve_parts(defs, fetcher, owns_source=False).resolve(ResolveRequest.build(target=target, flashinfer="none", with_=("servefw",)))
        asked = [path for method, path, _ in srv.log if method == "GET"]
    got = {p.name: p for p in plan.packages}
    assert str(got["torchao"].version) == "0.17.0.dev20260307+cu130" and got["torchao"].index == "pytorch"
    assert str(got["torchcodec"].version) == "0.11.0.dev20260307+cu130" and got["torchcodec"].index == "pytorch"
    assert got["torchao"].coupling is Coupling.TORCH_ABI and not got["torchao"].abi_mismatch
    overrides = {(o.package, o.requirement): o for o in plan.overrides}
    ao = overrides[("servefw", "torchao==0.9.0")]
    assert ao.replaced_by == "torchao==0.17.0.dev20260307+cu130"
    assert ao.reason == "the torchao build for the kept torch, from its index (a nightly of that torch's day: it names no torch itself)"
    assert overrides[("servefw", "torchcodec==0.8.0")].replaced_by == "torchcodec==0.11.0.dev20260307+cu130"
    assert overrides[("servefw", "torch==2.9.1")].replaced_by == f"torch=={NIGHTLY}"
    assert not any(p.startswith(("/simple/torchao", "/simple/torchcodec")) for p in asked)


def test_no_nightly_of_the_kept_torchs_day_is_a_clear_no_plan(tmp_path):
    world = _family_world(tmp_path)
    target = declared_target("3.12", "x86_64-manylinux_2_28", ["torch==2.12.0.dev20260305+cu130"])
    torch_nightly(world, "20260305")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = DEFS.with_index_urls(world.index_urls(srv.url))
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher, pytest.raises(NoPlanError) as err:
            resolve_parts(defs, fetcher, owns_source=False).resolve(
                ResolveRequest.build(target=target, torch="installed", flashinfer="none", with_=("torchao",))
            )
    assert "torchao" in str(err.value)


# -- item 2: per-torch builds on a configured index --------------------------------------------------

FA_BUILDS = ("cu12torch2.9cxx11abiTRUE", "cu12torch2.8cxx11abiTRUE", "cu12torch2.9cxx11abiFALSE", "cu11torch2.9cxx11abiTRUE", "cu129torch2.9cxx11abiTRUE")


def _per_torch_world(root: Path) -> World:
    w = World(root / "www")
    # the kept torch's wheel carries its libraries (stubs exporting the C++ symbols the builds import):
    # the ABI judgement confirms a per-torch build against them
    libs = torch_stubs(root / "elf" / "libs")
    torch_files = {"torch/__init__.py": b"", **{f"torch/lib/{lib}": (libs / lib).read_bytes() for lib in ("libtorch_cpu.so", "libc10.so")}}
    w.pytorch("torch", STABLE, tag=f"cp312-cp312-{X86}", channel="stable", variant="cu128", requires=["filelock"], files=torch_files)
    w.pypi("filelock", "3.17.0")
    w.pypi("einops", "0.8.1")
    so = compile_extension(root / "elf", "flash_attn_2_cuda.so", libs, calls=("cxx_check", "cxx_numel"))
    files = {"flash_attn/__init__.py": b"", "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so": so}
    # PyPI: a build for torch 2.8 (its METADATA pins it)
    wheel = build_wheel(w.root / "files", "flash-attn", "2.8.3", f"cp312-cp312-{X86}", ["torch==2.8.0", "einops"], files=files)
    w._add("simple/flash-attn/", "pypi", _Entry(wheel, "files/" + wheel.filename, sidecar=False, upload_time="2026-01-01T00:00:00Z"))
    # the configured index: FlashAttention 2's release-asset naming, one build per torch x CUDA x C++ ABI
    for local in FA_BUILDS:
        built = build_wheel(w.root / "assets", "flash-attn", f"2.8.3+{local}", "cp312-cp312-linux_x86_64", ["torch", "einops"], files=files)
        w._add("builds/flash-attn/", "pypi", _Entry(built, "assets/" + built.filename, sidecar=False))
    return w


@needs_cc
def test_a_per_torch_local_label_build_is_chosen_over_pypis_build_for_another_torch(tmp_path):
    world = _per_torch_world(tmp_path)
    target = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={STABLE}"])
    request = ResolveRequest.build(target=target, torch="installed", flashinfer="none", with_=("flash-attn",))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = DEFS.with_index_urls(world.index_urls(srv.url))
        # PyPI's own build pins torch 2.8; binaries decide, pins do not (issue 28): its C++ imports
        # are all exported by the kept torch, so it is planned, the pin reported as overridden
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            pypi = resolve(request, Finder(fetcher, defs), defs, classifier=FileClassifier(world.root), exports=readers.exports_reader(fetcher.scan_access()))
        own = pypi.package("flash-attn")
        assert own is not None and str(own.version) == "2.8.3" and not own.abi_mismatch
        assert "flash-attn pins torch==2.8.0; kept 2.9.1+cu128: its compiled parts import only symbols 2.9.1+cu128 exports" in own.reason
        assert [(o.package, o.requirement) for o in pypi.overrides] == [("flash-attn", "torch==2.8.0")]
        srv.log.clear()
        # with the index of per-torch builds configured for flash-attn
        builds = defs.with_package_indexes({"flash-attn": f"{srv.url}builds/"})
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            plan = resolve(
                request, Finder(fetcher, builds), builds, classifier=FileClassifier(world.root), exports=readers.exports_reader(fetcher.scan_access())
            )
        asked = [path for method, path, _ in srv.log if method == "GET"]
    fa = plan.package("flash-attn")
    assert str(fa.version) == "2.8.3+cu12torch2.9cxx11abitrue" and fa.index == "package:flash-attn"
    assert fa.url.startswith(srv.url + "assets/") and fa.coupling is Coupling.TORCH_ABI and fa.built_for == "2.9" and not fa.abi_mismatch
    assert fa.abi is not None and fa.abi.kind.value == "locked" and fa.abi.runs and "all exported by torch 2.9.1+cu128" in (fa.abi.note or "")
    assert plan.indexes["package:flash-attn"] == f"{srv.url}builds/"
    assert not any(p.startswith("/simple/flash-attn") for p in asked)  # routing: only the configured index owns it


@needs_cc
def test_package_index_flag_reaches_the_plan_the_lock_and_check(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no project config around
    world = _per_torch_world(tmp_path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        flags = [
            "--python",
            "3.12",
            "--installed",
            f"torch=={STABLE}",
            "--torch",
            "installed",
            "--flashinfer",
            "none",
            "--with",
            "flash-attn",
            "--index",
            f"pytorch={srv.url}whl/",
            "--index",
            f"pypi={srv.url}simple/",
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        lock = tmp_path / "pylock.fa.toml"
        code = main(["lock", *flags, "--package-index", f"flash-attn={srv.url}builds/", "-o", str(lock)])
        out, err = capsys.readouterr()
        assert code == 0, err
        text = lock.read_text()
        assert 'index = "package:flash-attn"' in text and "cu12torch2.9cxx11abitrue" in text
        assert main(["check", str(lock)]) == 0, capsys.readouterr()
        capsys.readouterr()
        assert main(["resolve", *flags, "--package-index", "torch=https://x.example/simple/"]) == 2
        assert "torch keeps its own index" in capsys.readouterr().err
        assert main(["resolve", *flags, "--package-index", "flash-attn"]) == 2
        assert "expected NAME=URL" in capsys.readouterr().err


@needs_cc
def test_config_package_indexes_lock_and_check_fresh(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    world = _per_torch_world(tmp_path)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        config = tmp_path / "gpu-stack.toml"
        head = f'indexes = {{ pytorch = "{srv.url}whl/", pypi = "{srv.url}simple/" }}\n'
        target = (
            f'[[target]]\nname = "fa"\npython = "3.12"\ninstalled = ["torch=={STABLE}"]\ntorch = "installed"\nflashinfer = "none"\n'
            'with = ["flash-attn"]\noutput = ["pylock.fa.toml"]\n'
        )
        config.write_text(head + f'package-indexes = {{ flash-attn = "{srv.url}builds/" }}\n' + target)
        assert main(["lock", "--cache-dir", str(tmp_path / "cache")]) == 0, capsys.readouterr().err
        assert "cu12torch2.9cxx11abitrue" in (tmp_path / "pylock.fa.toml").read_text()
        assert main(["check"]) == 0, capsys.readouterr()
        config.write_text(head + 'package-indexes = { torch = "https://x.example/simple/" }\n' + target)
        capsys.readouterr()
        assert main(["check"]) == 2
        assert "package-indexes: torch: torch keeps its own index" in capsys.readouterr().err
        config.write_text(head + 'package-indexes = { flash-attn = "https://user:secret@x.example/simple/" }\n' + target)
        assert main(["check"]) == 2
        err = capsys.readouterr().err
        assert "package-indexes.flash-attn: the URL carries credentials" in err and "secret" not in err
