"""The abi world at every door: the declared target, a venv holding the kept torch (by uv), and
the same world with the forged ``evilkern`` beside it (the ``forged`` fixture)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from resolve_gpu_stack.scan.wheelscan import scan_wheel
from support.abi_world import NIGHTLY, build_abi_world
from support.forgery import MISSING, compile_forged, forged_wheel
from support.server import IndexServer
from support.wheels import BuiltWheel, metadata_text
from support.world import _Entry

GOOD = ("stable-ext", "locked-ok", "builds-ext", "pinned-ok")


DECLARED = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--flashinfer", "none"]


def withs(*names: str) -> list[str]:
    return [w for n in names for w in ("--with", n)]


def uv(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    from resolve_gpu_stack.env.install import find_uv

    return subprocess.run([find_uv(env), *args], capture_output=True, text=True, env=env, check=True)


def venv_with_the_kept_torch(world, srv, venv: Path, uv_env: dict[str, str]) -> tuple[str, dict[Path, bytes]]:  # type: ignore[no-untyped-def]
    """A real venv holding the world's torch nightly (its stub libraries); its python and those
    libraries' bytes, to show they are never touched."""
    uv("venv", "-q", "--python", sys.executable, str(venv), env=uv_env)
    python = str(venv / "bin" / "python")
    uv("pip", "install", "-q", "--python", python, "--no-deps", "--index-url", f"{srv.url}whl/nightly/cu130/", f"torch=={NIGHTLY}", env=uv_env)
    torch_files = sorted((venv / "lib").glob("python*/site-packages/torch/lib/*.so"))
    assert [p.name for p in torch_files] == ["libc10.so", "libtorch_cpu.so"]
    return python, {p: p.read_bytes() for p in torch_files}


def installed_names(python: str, env: dict[str, str]) -> set[str]:
    return {row["name"] for row in json.loads(uv("pip", "list", "--python", python, "--format", "json", env=env).stdout)}


WHY = "c10::stand_in_missing()"


@pytest.fixture(scope="module")
def forged(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The abi world with ``evilkern`` 1.0 (the forged wheel) on its PyPI, served."""
    root = tmp_path_factory.mktemp("forged")
    world, _ = build_abi_world(root)
    lib = compile_forged(root / "objects")
    path, member = forged_wheel(world.root / "files", lib)
    # the same object in a wheel nothing ties to torch (no Requires-Dist: torch): see the last test
    untied, _ = forged_wheel(world.root / "files", lib, name="evilguess", requires=())
    # two fake block starts in each real stored block: a witness agrees with the fake entry
    pair, _ = forged_wheel(world.root / "files", lib, name="evilpair", fakes_per_real=2)
    for name, wheel_path in (("evilkern", path), ("evilguess", untied), ("evilpair", pair)):
        data = wheel_path.read_bytes()
        meta = metadata_text(name, "1.0", () if name == "evilguess" else ("torch",))
        wheel = BuiltWheel(path=wheel_path, filename=wheel_path.name, sha256=hashlib.sha256(data).hexdigest(), size=len(data), metadata=meta)
        world._add(f"simple/{name}/", "pypi", _Entry(wheel, "files/" + wheel_path.name, sidecar=False, upload_time="2026-01-01T00:00:00Z"))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        yield world, srv, path, member


def _assert_refused(code: int, err: str) -> None:
    assert code == 1 and "Traceback" not in err, err
    assert "evilkern 1.0" in err and WHY in err and "does not export" in err, err


def _end_first_abi(path: Path):  # type: ignore[no-untyped-def]
    """evilkern's scan as a lying reader records it: "runs" on the kept torch. The end-first reader
    of a tool before 2026-12-07 made exactly this of the forged member (it entered the fake chain
    and gave its bytes as the member's); today that reading needs a second block start inflating
    to the same bytes, which the fake chain does not give, so it reads the truth: the lie is made
    here from the honest scan, ``MISSING`` dropped from what the member imports."""
    from dataclasses import replace

    from resolve_gpu_stack.data.definitions import load_definitions
    from resolve_gpu_stack.scan.wheelscan import scanner as scanner_module

    data = path.read_bytes()
    defs = load_definitions().abi
    real = scanner_module.ElfStream

    def end_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["seek"] = True
        return real(*args, **kwargs)

    scanner_module.ElfStream = end_first  # type: ignore[assignment,misc]
    try:
        entered = scan_wheel(lambda a, b: data[a:b], len(data)).abi(defs)
    finally:
        scanner_module.ElfStream = real  # type: ignore[misc]
    assert MISSING.decode() in entered.cxx  # the end-first reading is no longer fooled
    honest = scan_wheel(lambda a, b: data[a:b], len(data)).abi(defs)
    members = tuple(replace(m, cxx=tuple(s for s in m.cxx if s != MISSING.decode())) for m in honest.members)
    abi = replace(honest, members=members)
    assert abi.kind == "torch" and MISSING.decode() not in abi.cxx  # the forged reading
    return abi
