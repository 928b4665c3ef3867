"""What a lock installs on a target (``lock.select``, PEP 751's installation steps) and what
``install --lock`` refuses for what a target has installed (``check.installed_findings``): pure
logic, on declared targets."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from packaging.utils import NormalizedName
from packaging.version import Version

from resolve_gpu_stack.lock.check import INSTALLED, installed_findings, torch_move_findings
from resolve_gpu_stack.lock.locked import LockedEntry, LockedFile, LockedWheel
from resolve_gpu_stack.lock.select import select
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, TargetSummary
from resolve_gpu_stack.model.declared import declared_target

NIGHTLY, OLDER = "2.12.0.dev20260307+cu130", "2.12.0.dev20260306+cu130"
HOST = declared_target("3.12", "x86_64-manylinux_2_36", [f"torch=={NIGHTLY}"])  # a glibc 2.36 node


def entry(name: str, *filenames: str, marker: str | None = None, requires_python: str | None = None) -> LockedEntry:
    wheels = tuple(LockedWheel(filename=f, url=f"https://files.example/{f}", sha256="0" * 64) for f in filenames)
    return LockedEntry(name=NormalizedName(name), version=None, wheels=wheels, markers=(marker,) if marker else (), requires_python=requires_python)


def lock(*entries: LockedEntry, requires_python: str | None = "==3.12.*", environments: tuple[str, ...] = ()) -> LockedFile:
    return LockedFile(path=Path("pylock.x.toml"), format="pylock", entries=entries, requires_python=requires_python, environments=environments)


def test_a_manylinux_2_28_wheel_fits_a_glibc_2_36_host_and_an_aarch64_one_does_not():
    chosen = select(
        lock(
            entry("a", "a-1-cp312-cp312-manylinux_2_28_x86_64.whl"),
            entry("b", "b-1-cp312-cp312-manylinux_2_28_aarch64.whl"),
            entry("c", "c-1-py3-none-any.whl"),
            entry("d", "d-1-cp312-cp312-manylinux_2_39_x86_64.whl"),
        ),
        HOST,
    )
    assert set(chosen.wheels) == {"a", "c"}
    assert [(p.package, "no wheel of it fits Python 3.12 on x86_64-manylinux_2_36" in p.message) for p in chosen.misfits] == [("b", True), ("d", True)]
    assert chosen.errors == () and chosen.skipped == ()


def test_the_wheel_with_the_targets_most_preferred_tag_is_chosen():
    chosen = select(lock(entry("a", "a-1-py3-none-any.whl", "a-1-cp312-cp312-manylinux_2_17_x86_64.whl", "a-1-cp312-cp312-win_amd64.whl")), HOST)
    assert chosen.wheels["a"].filename == "a-1-cp312-cp312-manylinux_2_17_x86_64.whl"


def test_markers_are_evaluated_for_the_target_with_no_extras():
    chosen = select(
        lock(
            entry("a", "a-1-py3-none-any.whl", marker="sys_platform == 'win32'"),
            entry("b", "b-1-py3-none-any.whl", marker="platform_machine == 'x86_64' and python_full_version >= '3.12'"),
            entry("c", "c-1-py3-none-any.whl", marker="'gpu' in extras"),
            entry("d", "d-1-py3-none-any.whl", marker="'dev' in dependency_groups"),
        ),
        HOST,
    )
    assert set(chosen.wheels) == {"b"} and chosen.skipped == ("a", "c", "d")


def test_an_entry_with_several_markers_applies_where_any_holds():
    def of(name: str, *markers: str) -> LockedEntry:
        return replace(entry(name, f"{name}-1-py3-none-any.whl"), markers=markers)

    chosen = select(lock(of("a", "sys_platform == 'win32'", "sys_platform == 'linux'"), of("b", "sys_platform == 'win32'", "os_name == 'nt'")), HOST)
    assert set(chosen.wheels) == {"a"} and chosen.skipped == ("b",)
    broken = select(lock(of("c", "sys_platform == 'win32'", "python_version ~= '1'")), HOST)
    assert [p.message for p in broken.errors] == [
        "its marker ((sys_platform == 'win32') or (python_version ~= '1')) cannot be evaluated for Python 3.12 on x86_64-manylinux_2_36"
    ]


def test_python_and_environments_must_admit_the_target():
    other = declared_target("3.11", "x86_64-manylinux_2_36")
    chosen = select(
        lock(
            entry("a", "a-1-py3-none-any.whl", requires_python=">=3.12"),
            requires_python="==3.12.*",
            environments=("platform_machine == 'x86_64' and python_version == '3.12'",),
        ),
        other,
    )
    said = [p.message for p in chosen.misfits]
    assert "the lock requires Python ==3.12.*; Python 3.11 on x86_64-manylinux_2_36 is Python 3.11.0" in said[0]
    assert "the lock's environments (platform_machine == 'x86_64' and python_version == '3.12') exclude Python 3.11" in said[1]
    assert said[2] == "it requires Python >=3.12; Python 3.11 on x86_64-manylinux_2_36 is Python 3.11.0"
    assert select(lock(entry("a", "a-1-py3-none-any.whl"), environments=("python_version == '3.11'", "python_version == '3.12'")), HOST).misfits == ()


def test_two_entries_of_one_name_that_both_apply_are_an_error():
    chosen = select(lock(entry("a", "a-1-py3-none-any.whl"), entry("a", "a-2-py3-none-any.whl", marker="os_name == 'posix'")), HOST)
    assert [p.package for p in chosen.errors] == ["a"]
    one = select(lock(entry("a", "a-1-py3-none-any.whl", marker="os_name == 'nt'"), entry("a", "a-2-py3-none-any.whl", marker="os_name == 'posix'")), HOST)
    assert one.errors == () and one.wheels["a"].filename == "a-2-py3-none-any.whl"


def _plan(torch: LockedPackage) -> LockPlan:
    triton = LockedPackage(name=NormalizedName("triton"), version=Version("3.7.0"), action=Action.KEEP, index="installed", coupling=Coupling.TORCH_ABI)
    return LockPlan(target=TargetSummary(python="3.12", platform="x86_64-manylinux_2_28", cuda="cu130"), packages=(torch, triton))


def _torch(version: str, action: Action, installed: str | None = None) -> LockedPackage:
    return LockedPackage(
        name=NormalizedName("torch"),
        version=Version(version),
        action=action,
        index="pytorch" if action is not Action.KEEP else "installed",
        coupling=Coupling.TORCH,
        installed_version=Version(installed) if installed else None,
    )


def test_kept_packages_must_be_installed_exactly_and_a_moved_torch_must_be_the_one_it_was_made_for():
    path = Path("pylock.x.toml")
    node = declared_target("3.12", "x86_64-manylinux_2_36", [f"torch=={OLDER}", "triton==3.7.0"])
    [kept] = installed_findings(path, _plan(_torch(NIGHTLY, Action.KEEP)), node)
    assert kept.rule == INSTALLED and kept.message == f"the lock keeps the installed torch {NIGHTLY}; here torch is {OLDER}"
    assert installed_findings(path, _plan(_torch(NIGHTLY, Action.UPGRADE, OLDER)), node) == []
    bare = declared_target("3.12", "x86_64-manylinux_2_36", ["triton==3.7.0"])
    [moved] = installed_findings(path, _plan(_torch(NIGHTLY, Action.UPGRADE, OLDER)), bare)
    assert moved.message == f"the lock moves torch from {OLDER} to {NIGHTLY}; here torch is not installed"
    assert (
        installed_findings(
            path, _plan(_torch(NIGHTLY, Action.UPGRADE, OLDER)), declared_target("3.12", "x86_64-manylinux_2_36", [f"torch=={NIGHTLY}", "triton==3.7.0"])
        )
        == []
    )


@pytest.mark.parametrize(
    ("action", "version", "inputs", "said"),
    [
        (Action.DOWNGRADE, OLDER, {"installed-torch": NIGHTLY}, "its inputs do not allow a downgrade"),
        (Action.DOWNGRADE, OLDER, {"installed-torch": NIGHTLY, "allow-downgrade": True, "torch": OLDER}, None),
        (Action.DOWNGRADE, OLDER, {"installed-torch": NIGHTLY, "allow-downgrade": True, "torch": "nightly"}, "its inputs do not name that move"),
        (Action.UPGRADE, NIGHTLY, {"installed-torch": OLDER, "torch": "nightly"}, "its inputs do not name that move"),
        (Action.UPGRADE, NIGHTLY, {"installed-torch": OLDER, "torch": "nightly", "upgrade-package": ["torch"]}, None),
        (Action.UPGRADE, NIGHTLY, {"installed-torch": OLDER, "torch": NIGHTLY}, None),
        (Action.CHANGE, "2.12.0.dev20260307+cu128", {"installed-torch": NIGHTLY, "cuda": "cu130"}, "its inputs ask for no such CUDA label"),
        (Action.CHANGE, "2.12.0.dev20260307+cu128", {"installed-torch": NIGHTLY, "cuda": "cu128"}, None),
        (
            Action.UPGRADE,
            NIGHTLY,
            {"installed-torch": "2.11.0+cu130"},
            f"the lock moves torch from {OLDER}, but the installed torch it was made for is 2.11.0+cu130",
        ),
    ],
)
def test_torch_moves_only_as_far_as_the_locks_inputs_say(action, version, inputs, said):
    found = [
        f.message
        for f in torch_move_findings(Path("pylock.x.toml"), _plan(_torch(version, action, OLDER if action is Action.UPGRADE else NIGHTLY)), inputs, None)
    ]
    assert found == [] if said is None else any(said in m for m in found), found
