"""``--build NAME`` before anything is built (issue 21): the pure parts (which packages the plan
builds, the ways to a build for the kept torch, the build machine's settings, a build's key, the
one seam that judges a built wheel, an sdist's PKG-INFO and [build-system]), the plan and the lock
rows, ``check``'s provenance findings, and the serving story planned on a loopback world and on
the bundled snapshot."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
import zipfile
from dataclasses import replace

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version
from support.build_world import extension_sdist, serve_sdist
from support.elfbuild import compile_extension, have_cc, have_cxx, torch_stubs
from support.framework_world import FileClassifier, build_framework_world
from support.paths import SNAPSHOT
from support.stack_world import serve
from support.wheels import build_wheel

from resolve_gpu_stack.cli.app import main
from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.env.build import BuildInputs, CudaToolkit, arch_list, check_toolkit, find_cuda_toolkit, max_jobs, parse_nvcc_version, verify_built_wheel
from resolve_gpu_stack.errors import BuildError, NoPlanError, UsageError
from resolve_gpu_stack.index.sdist import LEGACY_REQUIRES, SdistError, read_build_system, read_pkg_info
from resolve_gpu_stack.lock.check import build_findings
from resolve_gpu_stack.lock.locked import LockedFile
from resolve_gpu_stack.lock.pylock import plan_from_lock, read_pylock, render_pylock
from resolve_gpu_stack.model import Action, BuildProvenance, Coupling, IndexFile, LockedPackage, LockPlan, SourceDist, TargetSummary
from resolve_gpu_stack.model.codec import package_from_dict, package_to_dict
from resolve_gpu_stack.model.cuda import CudaLabel
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.scan import readers
from resolve_gpu_stack.resolver.builds import WayFacts, plan_builds, ways_for
from resolve_gpu_stack.resolver.coupling import Found
from resolve_gpu_stack.resolver.requirement import Cand
from resolve_gpu_stack.resolver.resolve import resolve

NIGHTLY = "2.12.0.dev20260307+cu130"
SDIST_SHA = "ab" * 32


def name(text: str):
    return canonicalize_name(text)


# -- which packages the plan builds -----------------------------------------------------------------


def _file(filename: str, version: str, *, wheel: bool) -> IndexFile:
    return IndexFile(
        filename=filename,
        url=f"https://pypi.example/files/{filename}",
        name=name(filename.split("-")[0]),
        version=Version(version),
        is_wheel=wheel,
        index="pypi",
        sha256=SDIST_SHA,
    )


def test_plan_builds_the_sdist_picked_or_the_sdist_of_a_mismatched_wheel_and_nothing_else():
    sdist_only = Cand(name=name("ext"), version=Version("1.0"), file=_file("ext-1.0.tar.gz", "1.0", wheel=False))
    mismatched = Cand(name=name("kern"), version=Version("0.3"), file=_file("kern-0.3-cp312-abi3-linux_x86_64.whl", "0.3", wheel=True))
    no_sdist = Cand(name=name("nosrc"), version=Version("2.0"), file=_file("nosrc-2.0-cp312-abi3-linux_x86_64.whl", "2.0", wheel=True))
    fine = Cand(name=name("fine"), version=Version("1.0"), file=_file("fine-1.0-cp312-abi3-linux_x86_64.whl", "1.0", wheel=True))
    other = Cand(name=name("numpy"), version=Version("2.0"), file=_file("numpy-2.0-py3-none-any.whl", "2.0", wheel=True))
    bad = Found(coupling=Coupling.TORCH_ABI, evidence="x.so needs libtorch.so", mismatch="nothing says which torch")
    found = {
        (c.name, c.version): (bad if c in (mismatched, no_sdist) else Found(coupling=Coupling.AGNOSTIC, evidence="pure"))
        for c in (sdist_only, mismatched, no_sdist, fine, other)
    }
    kern_sdist = _file("kern-0.3.tar.gz", "0.3", wheel=False)
    got = plan_builds(
        [sdist_only, mismatched, no_sdist, fine, other],
        found,
        {name(n) for n in ("ext", "kern", "nosrc", "fine", "absent")},
        lambda n, v: kern_sdist if n == "kern" else None,
        Version(NIGHTLY),
    )
    assert set(got.sdists) == {(name("ext"), Version("1.0")), (name("kern"), Version("0.3"))}
    assert got.sdists[(name("kern"), Version("0.3"))] is kern_sdist
    built = got.found[(name("kern"), Version("0.3"))]
    assert built.mismatch is None and built.coupling is Coupling.TORCH_ABI and built.built_for == "2.12.0.dev20260307"
    # still refused, saying why the --build asked for did not happen
    assert got.found[(name("nosrc"), Version("2.0"))].mismatch == "nothing says which torch; --build nosrc: its index has no sdist of 2.0"
    assert got.found[(name("numpy"), Version("2.0"))] == found[(name("numpy"), Version("2.0"))]
    notes = "\n".join(got.notes)
    assert "nosrc 2.0: --build asks to build it, but its index has no sdist of that version" in notes
    assert "fine 1.0: a wheel of it runs on the kept torch; nothing to build" in notes
    assert "--build absent: absent is not in the plan" in notes


def test_ways_for_names_the_family_build_then_the_sdist_then_an_index_and_drops_last():
    ways = ways_for("torchao", WayFacts(family_build=Version("0.17.0.dev20260307+cu130"), sdist="torchao-0.9.0.tar.gz"))
    assert [w.split(":")[0].split(" (")[0] for w in ways][0].startswith("the PyTorch index has torchao 0.17.0.dev20260307+cu130")
    assert "--build torchao" in ways[1] and "--package-index torchao=URL" in ways[2] and ways[3].startswith("leave it out with --without torchao")
    asked = ways_for("vllm", WayFacts(sdist="vllm-0.11.2.tar.gz", requested=True))
    assert asked[0] == "build it from its sdist (vllm-0.11.2.tar.gz) against this torch: --build vllm"
    assert asked[-1] == "leave it out with --without vllm (it drops what you asked for)"
    bare = ways_for("sgl-kernel", WayFacts())
    assert [w.split(":")[0] for w in bare] == [
        "build it from its source against this torch",
        "serve per-torch builds of it (+cuNNNtorchA.B) from an index of your own",
        "leave it out with --without sgl-kernel (and what only it needs)",
    ]


# -- the build machine -----------------------------------------------------------------------------


def test_nvcc_version_arch_list_and_jobs():
    assert parse_nvcc_version("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n") == "13.0"
    assert parse_nvcc_version("command not found") is None
    assert arch_list(["12.0", "9.0", "10.0", "9.0"]) == "9.0;10.0;12.0" and arch_list([]) == ""
    assert max_jobs(16, 64 * 2**30) == 16 and max_jobs(16, 9 * 2**30) == 2 and max_jobs(16, 2**30) == 1 and max_jobs(4, None) == 4 and max_jobs(0, None) == 1


def test_the_toolkit_found_first_is_cuda_home_and_its_major_must_be_torchs(tmp_path):
    bin_dir = tmp_path / "cuda-12.4" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    (bin_dir / "nvcc").chmod(0o755)
    toolkit = find_cuda_toolkit({"CUDA_HOME": str(bin_dir.parent), "PATH": ""})
    assert toolkit is not None and (toolkit.version, toolkit.major, toolkit.home) == ("12.4", 12, bin_dir.parent)
    cu128, cu130 = CudaLabel(12, 8), CudaLabel(13, 0)
    assert check_toolkit(Version("2.9.1+cu128"), cu128, toolkit) is None
    assert check_toolkit(Version("2.9.1"), None, None) is None  # a CPU torch needs no toolkit
    assert "no CUDA toolkit found" in (check_toolkit(Version(NIGHTLY), cu130, None) or "")
    with pytest.raises(BuildError, match=r"toolkit found is 12.4 .* torch 2.12.0.dev20260307\+cu130 is built for CUDA 13.0"):
        check_toolkit(Version(NIGHTLY), cu130, CudaToolkit(home=bin_dir.parent, nvcc=bin_dir / "nvcc", version="12.4"))
    # PyPI's torch has no label: its CUDA is its plan's (its runtime pin), and the toolkit must match it too
    with pytest.raises(BuildError, match=r"torch 2.15.0 is built for CUDA 13.2"):
        check_toolkit(Version("2.15.0"), CudaLabel(13, 2), CudaToolkit(home=bin_dir.parent, nvcc=bin_dir / "nvcc", version="12.4"))


def test_a_builds_key_changes_with_each_input_it_depends_on():
    base = BuildInputs(
        sdist_sha256=SDIST_SHA,
        torch=NIGHTLY,
        torch_sha256=None,
        cuda="cu130",
        nvcc="13.0",
        arch_list="9.0;12.0",
        python="3.12",
        platform="x86_64-manylinux_2_28",
    )
    assert base.key() == replace(base).key()
    changed = [
        replace(base, sdist_sha256="cd" * 32),
        replace(base, torch="2.12.0.dev20260308+cu130"),
        replace(base, torch_sha256="ef" * 32),
        replace(base, cuda="cu129"),
        replace(base, nvcc="13.1"),
        replace(base, arch_list="9.0"),
        replace(base, python="3.13"),
        replace(base, platform="aarch64-manylinux_2_28"),
    ]
    assert len({c.key() for c in changed} | {base.key()}) == len(changed) + 1


@pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler")
def test_verify_built_wheel_is_the_one_seam_tags_and_the_abi_judgement(tmp_path):
    libs = torch_stubs(tmp_path / "libs")
    site = tmp_path / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    for lib in ("libtorch_cpu.so", "libc10.so"):
        shutil.copy(libs / lib, site / "torch" / "lib" / lib)
    so = compile_extension(tmp_path, "_C.so", libs, calls=("cxx_check", "shim_device"))
    tags = declared_target("3.12", "x86_64-manylinux_2_28").tags
    abi = load_definitions().abi

    def verify(path, **kw):  # type: ignore[no-untyped-def]
        return verify_built_wheel(
            path,
            name=name("ext-kernel"),
            version=Version("1.0"),
            torch=Version(NIGHTLY),
            target_tags=tags,
            abi=abi,
            **{"torch_site": site, "cuda_major": 13, **kw},
        )

    good = build_wheel(tmp_path / "good", "ext-kernel", "1.0", "cp312-cp312-linux_x86_64", files={"ext_kernel/_C.so": so})
    check = verify(good.path)
    assert check.problems == () and check.links_torch and check.abi is not None and check.abi.kind.value == "locked"
    assert "layouts are not checked" in check.notes[0]
    # the torch it was built against lacks an import: refused, naming it
    (site / "torch" / "lib" / "libtorch_cpu.so").unlink()
    (site / "torch" / "lib" / "libc10.so").write_bytes((libs / "libcudart.so.13").read_bytes())
    refused = verify(good.path)
    assert any("torchCheckFail" in p and "does not export" in p for p in refused.problems)
    # no torch to read: refused, never guessed
    assert any("could not be read" in p for p in verify(good.path, torch_site=None).problems)
    other = build_wheel(tmp_path / "arm", "ext-kernel", "1.0", "cp312-cp312-linux_aarch64", files={"ext_kernel/_C.so": so})
    assert "fit no tag of the target" in " ".join(verify(other.path).problems)
    renamed = build_wheel(tmp_path / "renamed", "other-kernel", "1.0", "cp312-cp312-linux_x86_64", files={"ext_kernel/_C.so": so})
    assert "not ext-kernel 1.0" in " ".join(verify(renamed.path).problems)
    pure = build_wheel(tmp_path / "pure", "ext-kernel", "1.0", "py3-none-any")
    check = verify(pure.path)
    assert check.problems == () and not check.links_torch and "none of its shared objects links torch" in check.notes[0]


# -- an sdist's PKG-INFO and [build-system] -----------------------------------------------------------


def _tar(members: dict[str, bytes], *, symlink: str | None = None) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo(symlink)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    buf.seek(0)
    return buf


def test_an_sdists_pkg_info_and_build_system_are_read_from_its_top_folder(tmp_path):
    sdist = extension_sdist(tmp_path, install_requires=("numpy>=2",))
    with sdist.path.open("rb") as fh:
        assert b"Name: ext-kernel" in read_pkg_info(fh, sdist.filename) and b"Requires-Dist: numpy>=2" in read_pkg_info(open(sdist.path, "rb"), sdist.filename)
    with sdist.path.open("rb") as fh:
        system = read_build_system(fh, sdist.filename)
    assert system.requires == ("setuptools>=70.1", "torch") and system.backend == "setuptools.build_meta"
    legacy = _tar({"x-1.0/PKG-INFO": b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\n\n", "x-1.0/setup.py": b""})
    assert read_build_system(legacy, "x-1.0.tar.gz").requires == LEGACY_REQUIRES
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x-1.0/PKG-INFO", "Metadata-Version: 2.1\nName: x\nVersion: 1.0\n\n")
        zf.writestr("x-1.0/sub/PKG-INFO", "not this one")
    buf.seek(0)
    assert read_pkg_info(buf, "x-1.0.zip").startswith(b"Metadata-Version")


@pytest.mark.parametrize(
    ("archive", "filename", "message"),
    [
        (lambda: _tar({"x-1.0/setup.py": b""}), "x-1.0.tar.gz", "no PKG-INFO"),
        (lambda: _tar({}, symlink="x-1.0/PKG-INFO"), "x-1.0.tar.gz", "not a regular file"),
        (lambda: _tar({"x-1.0/PKG-INFO": b"x" * (5 * 2**20 + 1)}), "x-1.0.tar.gz", "over the 5242880-byte cap"),
        (lambda: io.BytesIO(b"not gzip at all"), "x-1.0.tar.gz", "not a readable sdist"),
        (lambda: io.BytesIO(b""), "x-1.0.exe", "is not an sdist"),
    ],
)
def test_a_bad_sdist_is_a_clear_error(archive, filename, message):
    with pytest.raises(SdistError, match=message):
        read_pkg_info(archive(), filename)


def test_a_bad_build_system_table_is_a_clear_error():
    bad = _tar({"x-1.0/pyproject.toml": b"[build-system]\nrequires = 'setuptools'\n"})
    with pytest.raises(SdistError, match="'requires' must be a list"):
        read_build_system(bad, "x-1.0.tar.gz")
    with pytest.raises(SdistError, match="not valid TOML"):
        read_build_system(_tar({"x-1.0/pyproject.toml": b"[build-system\n"}), "x-1.0.tar.gz")


# -- plan, lock and check rows -----------------------------------------------------------------------


def _built_plan(**provenance: str) -> LockPlan:
    target = TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130")
    torch = LockedPackage(name=name("torch"), version=Version(NIGHTLY), action=Action.KEEP, index="pytorch", coupling=Coupling.TORCH)
    built = BuildProvenance(
        **{
            "torch": NIGHTLY,
            "cuda": "cu130",
            "nvcc": "13.0",
            "arch_list": "9.0",
            "python": "3.12",
            "platform": "x86_64-manylinux_2_28",
            "command": "TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=2 uv build --wheel --no-build-isolation ext_kernel-1.0.tar.gz",
            **provenance,
        }
    )
    row = LockedPackage(
        name=name("ext-kernel"),
        version=Version("1.0"),
        action=Action.BUILD,
        index="pypi",
        coupling=Coupling.TORCH_ABI,
        built_for="2.12.0.dev20260307",
        url="/cache/wheels/sha256/12/1234/ext_kernel-1.0-cp312-cp312-linux_x86_64.whl",
        filename="ext_kernel-1.0-cp312-cp312-linux_x86_64.whl",
        sha256="12" * 32,
        size=4096,
        sdist=SourceDist(url="https://pypi.example/files/ext_kernel-1.0.tar.gz", filename="ext_kernel-1.0.tar.gz", sha256=SDIST_SHA, size=882),
        provenance=built,
    )
    return LockPlan(
        target=target,
        packages=(torch, row),
        indexes={"pypi": "https://pypi.example/simple/", "pytorch": "https://download.pytorch.org/whl/"},
        inputs={"python": "3.12"},
    )


def test_a_built_row_round_trips_through_the_codec_and_the_pylock(tmp_path):
    plan = _built_plan()
    row = plan.packages[1]
    assert package_from_dict(package_to_dict(row), "p") == row
    text = render_pylock(plan, name="node", command="resolve-gpu-stack lock --build ext-kernel")
    assert 'path = "/cache/wheels/sha256/12/1234/ext_kernel-1.0-cp312-cp312-linux_x86_64.whl"' in text
    doc_entry = text.split('name = "ext-kernel"', 1)[1].split("[[packages.wheels]]", 1)[0]
    assert "index" not in doc_entry  # no index to fall back to: it holds the wheel built for another torch
    again = plan_from_lock(read_pylock(tmp_path / "pylock.node.toml", text))
    assert again.package("ext-kernel") == replace(row, upload_time=None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({}, None),
        ({"torch": "2.12.0.dev20260306+cu130"}, "built against torch 2.12.0.dev20260306+cu130, but the lock's torch is 2.12.0.dev20260307+cu130"),
        ({"python": "3.11"}, "built for Python 3.11, the lock's target has 3.12"),
        ({"platform": "aarch64-manylinux_2_28"}, "built for platform aarch64-manylinux_2_28"),
        ({"cuda": "cu129"}, "built for CUDA cu129, the lock's target has cu130"),
        ({"command": ""}, "records no build command"),
    ],
)
def test_check_verifies_a_built_rows_provenance(tmp_path, change, message):
    plan = _built_plan(**change)
    locked = LockedFile(path=tmp_path / "pylock.x.toml", format="pylock", indexes=plan.indexes)
    got = [f.message for f in build_findings(tmp_path / "pylock.x.toml", plan.packages[1], plan, locked, load_definitions())]
    assert got == ([] if message is None else [m for m in got if message in m]) and (message is None or got)


def test_check_refuses_a_build_whose_sdist_came_from_elsewhere_or_has_no_hash(tmp_path):
    plan = _built_plan()
    row = plan.packages[1]
    locked = LockedFile(path=tmp_path / "x", format="pylock", indexes=plan.indexes)
    foreign = replace(row, sdist=replace(row.sdist, url="http://evil.example/ext_kernel-1.0.tar.gz", sha256=None))
    got = " | ".join(f.message for f in build_findings(tmp_path / "x", foreign, plan, locked, load_definitions()))
    assert "its sdist URL is plain http to a host that is not loopback" in got and "has no sha256" in got
    armwheel = replace(row, filename="ext_kernel-1.0-cp312-cp312-linux_aarch64.whl")
    assert "fits no tag of Python 3.12 on x86_64-manylinux_2_28" in " ".join(
        f.message for f in build_findings(tmp_path / "x", armwheel, plan, locked, load_definitions())
    )
    bare = replace(row, provenance=None)
    assert "without its sdist and provenance" in build_findings(tmp_path / "x", bare, plan, locked, load_definitions())[0].message


def test_build_is_a_setting_recorded_in_the_inputs_only_when_given():
    target = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"])
    assert "build" not in ResolveRequest.build(target=target).inputs({})
    assert ResolveRequest.build(target=target, build_packages=("SGL_Kernel", "ext-kernel")).inputs({})["build"] == ["ext-kernel", "sgl-kernel"]
    with pytest.raises(UsageError, match="--build 'sgl-kernel==0.3' is not a package name"):
        ResolveRequest.build(target=target, build_packages=("sgl-kernel==0.3",))


# -- the serving story, planned ------------------------------------------------------------------------


@pytest.mark.skipif(not have_cc(), reason="needs a C compiler to build the ELF objects")
def test_with_sglang_build_sgl_kernel_plans_sglang_with_sgl_kernel_to_build(tmp_path):
    world = build_framework_world(tmp_path / "fw")
    serve_sdist(world, extension_sdist(tmp_path / "sdists", "sgl-kernel", "0.3.21"))
    target = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"])
    with serve(world) as (_, defs, finder):
        with pytest.raises(NoPlanError) as refused:
            resolve(
                ResolveRequest.build(target=target, with_=("sglang",)),
                finder,
                defs,
                classifier=FileClassifier(world.root),
                exports=readers.exports_reader(finder.fetcher.scan_access()),
            )
        plan = resolve(
            ResolveRequest.build(target=target, with_=("sglang",), build_packages=("sgl-kernel",)),
            finder,
            defs,
            classifier=FileClassifier(world.root),
            exports=readers.exports_reader(finder.fetcher.scan_access()),
        )
    assert "sgl-kernel 0.3.21" in str(refused.value)
    got = {p.name: p for p in plan.packages}
    kernel = got["sgl-kernel"]
    assert kernel.action is Action.BUILD and kernel.url is None and kernel.sdist.filename == "sgl_kernel-0.3.21.tar.gz"
    assert kernel.coupling is Coupling.TORCH_ABI and not kernel.abi_mismatch and kernel.built_for == "2.12.0.dev20260307"
    assert "built from its sdist sgl_kernel-0.3.21.tar.gz against the kept torch (--build)" in kernel.reason
    assert str(got["sglang"].version) == "0.5.9" and got["torch"].action is Action.KEEP
    assert str(got["torchaudio"].version) == "2.11.0.dev20260307+cu130"
    assert any(o.requirement == "torch==2.9.1" for o in plan.overrides)


def test_on_the_bundled_snapshot_build_plans_the_sdist_pypi_has_and_refuses_the_one_it_lacks(capsys):
    # torch-memory-saver 0.0.9's only wheel needs CUDA 12 (libcudart.so.12): refused on the cu130 nightly,
    # but PyPI has its sdist, so --build plans a build for the kept torch and CUDA
    story = [
        "resolve",
        "--snapshot",
        str(SNAPSHOT),
        "--python",
        "3.12",
        "--installed",
        f"torch=={NIGHTLY}",
        "--with",
        "sglang",
        "--override",
        "cuda-python>=13",
        "--build",
        "torch-memory-saver",
        "--format",
        "json",
    ]
    assert main([*story, "--without", "sgl-kernel"]) == 0
    plan = json.loads(capsys.readouterr().out)
    row = next(p for p in plan["packages"] if p["name"] == "torch-memory-saver")
    assert row["action"] == "build" and row["sdist"]["filename"] == "torch_memory_saver-0.0.9.tar.gz" and len(row["sdist"]["sha256"]) == 64
    assert row["built"] is None and row["url"] is None
    dlpack = next(p for p in plan["packages"] if p["name"] == "torch-c-dlpack-ext")  # builds for torch 2.4-2.9: a note, not a refusal
    assert dlpack["action"] == "install" and dlpack["abi"]["kind"] == "builds" and "none for 2.12" in dlpack["abi"]["note"]
    assert main([*story, "--build", "sgl-kernel"]) == 1
    err = capsys.readouterr().err
    assert "  - sgl-kernel 0.3.21" in err and "torch-memory-saver" not in err.split("hint:")[0]  # PyPI has no sgl-kernel sdist: still refused


def test_build_is_a_config_key_of_a_target_and_of_the_defaults(tmp_path):
    from resolve_gpu_stack.cli.config import load_config, resolve_request

    config = tmp_path / "gpu-stack.toml"
    config.write_text(
        '[defaults]\nbuild = ["sgl-kernel"]\n\n[[target]]\nname = "a"\npython = "3.12"\noutput = ["pylock.a.toml"]\n\n'
        '[[target]]\nname = "b"\npython = "3.12"\nbuild = ["vllm", "sgl-kernel"]\noutput = ["pylock.b.toml"]\n'
    )
    a, b = load_config(config).targets
    assert resolve_request(a).build_names == {"sgl-kernel"} and resolve_request(b).build_names == {"vllm", "sgl-kernel"}
    config.write_text('[[target]]\nname = "a"\npython = "3.12"\nbuild = "sgl-kernel"\noutput = ["pylock.a.toml"]\n')
    with pytest.raises(UsageError, match="'build' must be an array of strings"):
        load_config(config)
