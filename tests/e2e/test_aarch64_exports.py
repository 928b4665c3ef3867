"""A declared aarch64 target (Grace Hopper / Grace Blackwell: GH200, GB200) judges its
version-locked wheels against the kept torch's exports, read from a ``libtorch_cpu.so`` laid out
as torch 2.15.0's aarch64 builds are: its program headers moved past the middle of the library,
behind data, in a segment of their own, the section headers and the string table at its end.
The reader once looked for the program headers in the first 4 KB only and refused every
version-locked wheel on such a target as "exports unknown"."""

from __future__ import annotations

import json
import logging
import struct

import pytest
from support.abi_doors import withs
from support.abi_world import NIGHTLY, build_abi_world, have_cxx
from support.doors import index_flags, run_cli
from support.elfbuild import patchelf_layout
from support.server import IndexServer

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

ARM_TAG = "cp310-abi3-manylinux_2_28_aarch64"
DECLARED = ["--python", "3.12", "--platform", "aarch64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--flashinfer", "none"]
BEFORE = 8 * 2**20  # incompressible bytes before the moved program headers: a read from the start would take them


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("aarch64")
    world, objects = build_abi_world(root, tag=ARM_TAG, torch_lib=lambda data: patchelf_layout(data, before=BEFORE, gap=2 * 2**20, seed=23, headers_at=2**20))
    lib = objects["libtorch_cpu.so"]
    assert struct.unpack_from("<Q", lib, 32)[0] > len(lib) // 2  # e_phoff: the first 4 KB hold no program header
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield srv


def test_resolve_on_a_declared_aarch64_target_judges_a_locked_wheel_against_the_moved_headers_torch(served, capsys, caplog, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = ["resolve", *DECLARED, *index_flags(served.url), "--cache-dir", str(tmp_path / "c"), "--format", "json"]
    with caplog.at_level(logging.INFO, logger="resolve_gpu_stack.net.scan.exports"):
        code, out, err = run_cli(capsys, *base, *withs("locked-ok"))
    assert code == 0, err
    row = next(p for p in json.loads(out)["packages"] if p["name"] == "locked-ok")
    assert (row["abi"]["kind"], row["abi"]["refusal"]) == ("locked", None), row
    assert "aarch64" in json.dumps(row), row
    read = next(int(r.args[2]) for r in caplog.records if r.name == "resolve_gpu_stack.net.scan.exports" and "bytes read" in r.msg)
    assert read < BEFORE * 3 // 4, read  # the library's end (3 MB here, read in two growing steps), not the 9 MB before its headers

    # the exports were read, not guessed: a symbol the torch lacks is named as missing
    code, out, err = run_cli(capsys, *base, *withs("locked-bad"))
    assert code == 1 and out == "", err
    line = next((ln for ln in err.splitlines() if ln.startswith("  - locked-bad 1.0 ")), "")
    assert "does not export" in line and "c10::detail::torchInternalAssertFail(" in line, err


def test_lock_o_on_a_declared_aarch64_target_records_the_locked_wheel_as_runs(served, capsys, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import tomllib

    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "lock", *DECLARED, *index_flags(served.url), "--cache-dir", str(tmp_path / "c"), *withs("locked-ok"), "-o", "pylock.toml")
    assert code == 0, err
    packages = tomllib.loads((tmp_path / "pylock.toml").read_text())["tool"]["resolve-gpu-stack"]["packages"]
    row = next(p for p in packages if p["name"] == "locked-ok")
    assert row.get("abi") == "locked" and "abi-refusal" not in row, row
