"""``install`` hands a plan's overrides to uv as an ``--override`` file (issue 11, item 5): each
overridden package it installs at the plan's version and hash, the kept torch pinned by the
constraints and untouched (real uv, a real venv)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from packaging.utils import canonicalize_name
from packaging.version import Version
from support.install_world import OLDER, PLAT, PY, installed, make_venv
from support.wheels import build_wheel

from resolve_gpu_stack.env.install import _uv_args, constraints_text, overrides_text
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, Override, TargetSummary


def _plan(foo_sha256: str, bar_sha256: str) -> LockPlan:
    torch = LockedPackage(name=canonicalize_name("torch"), version=Version(OLDER), action=Action.KEEP, index="installed", coupling=Coupling.TORCH)
    foo = LockedPackage(
        name=canonicalize_name("foo"), version=Version("1.0"), action=Action.INSTALL, index="pypi", coupling=Coupling.AGNOSTIC, sha256=foo_sha256
    )
    bar = LockedPackage(
        name=canonicalize_name("bar"), version=Version("2.0"), action=Action.INSTALL, index="pypi", coupling=Coupling.AGNOSTIC, sha256=bar_sha256
    )
    return LockPlan(
        target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"),
        packages=(torch, foo, bar),
        overrides=(
            Override(package="foo", requirement="torch==2.9.1", replaced_by=f"torch=={OLDER}", reason="the installed torch is kept"),
            Override(package="foo", requirement="bar==1", replaced_by="bar==2.0", reason="--override"),
            Override(package="foo", requirement="gone==1", replaced_by="gone==2", reason="--override"),
        ),
    )


def test_overrides_text_pins_each_overridden_package_it_installs_with_its_hash():
    # torch is kept (the constraints pin it); 'gone' is not in the plan (left out)
    assert overrides_text(_plan("0" * 64, "1" * 64)) == f"bar==2.0 --hash=sha256:{'1' * 64}\n"
    assert overrides_text(LockPlan(target=_plan("0" * 64, "1" * 64).target, packages=())) == ""


def test_uv_installs_with_the_override_file_and_leaves_torch_alone(tmp_path, uv_env):  # noqa: F811
    wheels = tmp_path / "w"
    torch = build_wheel(wheels, "torch", OLDER, f"{PY}-{PY}-{PLAT}")
    foo = build_wheel(wheels, "foo", "1.0", requires=["torch==2.9.1", "bar==1"])
    bar = build_wheel(wheels, "bar", "2.0")
    python = make_venv(tmp_path / "venv", uv_env, torch.path)
    plan = _plan(foo.sha256, bar.sha256)
    work = tmp_path / "tmp"
    work.mkdir()
    args = _uv_args(
        work,
        uv=str(Path(sys.executable).with_name("uv")),
        python=python,
        todo=plan.packages[1:],
        fetched={"foo": SimpleNamespace(path=foo.path), "bar": SimpleNamespace(path=bar.path)},
        constraints=constraints_text(plan, {canonicalize_name("torch"): Version(OLDER)}),
        overrides=overrides_text(plan),
    )
    assert args[-2:] == ["--override", str(work / "overrides.txt")]
    assert (work / "overrides.txt").read_text() == f"bar==2.0 --hash=sha256:{bar.sha256}\n"
    done = subprocess.run(args, check=False, env=uv_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert installed(python) == {"torch": OLDER, "foo": "1.0", "bar": "2.0"}
