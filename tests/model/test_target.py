from __future__ import annotations

import os
import stat
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.tags import Tag, parse_tag, sys_tags
from packaging.utils import parse_wheel_filename
from packaging.version import Version
from support.wheels import build_wheel

from resolve_gpu_stack.env.probe import (
    default_interpreter,
    inspect_environment,
    inspect_interpreter,
    locate_interpreter,
)
from resolve_gpu_stack.errors import UsageError
from resolve_gpu_stack.model.cuda import cuda_label_text
from resolve_gpu_stack.model.declared import NamedInterpreter, PythonVersion, declared_target, linux_platform_tags, parse_installed, parse_python


def _tag(text: str) -> Tag:
    (tag,) = parse_tag(text)
    return tag


# ------------------------------------------------------------------------------------------ tags

DECLARED_TAGS = [
    (
        "3.12",
        "x86_64-manylinux_2_28",
        [
            "cp312-cp312-manylinux_2_28_x86_64",
            "cp39-abi3-manylinux_2_28_x86_64",
            "py3-none-any",
            "cp312-cp312-manylinux_2_17_x86_64",
            "cp312-cp312-manylinux2014_x86_64",
            "cp312-none-linux_x86_64",
            "py312-none-manylinux_2_28_x86_64",
        ],
        [
            "cp312-cp312-manylinux_2_28_aarch64",
            "cp313-cp313-manylinux_2_28_x86_64",
            "cp312-cp312-manylinux_2_34_x86_64",
            "cp312-cp312t-manylinux_2_28_x86_64",
            "cp313-abi3-manylinux_2_28_x86_64",
            "cp312-cp312-win_amd64",
            "cp312-cp312-musllinux_1_2_x86_64",
        ],
    ),
    (
        "3.12",
        "aarch64-manylinux_2_28",
        [
            "cp312-cp312-manylinux_2_28_aarch64",
            "cp39-abi3-manylinux_2_28_aarch64",
            "cp312-cp312-manylinux2014_aarch64",
            "py3-none-any",
        ],
        [
            "cp312-cp312-manylinux_2_28_x86_64",
            "cp313-cp313-manylinux_2_28_aarch64",
            "cp312-cp312-manylinux_2_34_aarch64",
            # aarch64 manylinux starts at glibc 2.17: there is no manylinux2010/manylinux1 for it
            "cp312-cp312-manylinux2010_aarch64",
        ],
    ),
    (
        "3.13t",
        "x86_64-manylinux_2_28",
        ["cp313-cp313t-manylinux_2_28_x86_64", "cp313-none-manylinux_2_28_x86_64", "py3-none-any"],
        ["cp313-cp313-manylinux_2_28_x86_64", "cp39-abi3-manylinux_2_28_x86_64", "cp312-cp312-manylinux_2_28_x86_64"],
    ),
    (
        "3.12.4",
        "x86_64-manylinux_2_34",
        ["cp312-cp312-manylinux_2_34_x86_64", "cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux1_x86_64"],
        ["cp312-cp312-manylinux_2_35_x86_64"],
    ),
    (
        "3.12",
        "x86_64-linux",
        ["cp312-cp312-linux_x86_64", "py3-none-any", "cp39-abi3-linux_x86_64"],
        ["cp312-cp312-manylinux_2_17_x86_64", "cp312-cp312-manylinux2014_x86_64"],
    ),
]


@pytest.mark.parametrize(("python", "platform", "included", "excluded"), DECLARED_TAGS)
def test_declared_target_tags(python: str, platform: str, included: list[str], excluded: list[str]) -> None:
    target = declared_target(python, platform)
    tags = set(target.tags)
    assert len(tags) == len(target.tags), "tags must not repeat"
    for text in included:
        assert _tag(text) in tags, text
    for text in excluded:
        assert _tag(text) not in tags, text
    assert target.platform == platform
    assert target.interpreter is None


def test_declared_tags_are_ordered_most_specific_first() -> None:
    tags = declared_target("3.12", "x86_64-manylinux_2_28").tags
    position = {tag: i for i, tag in enumerate(tags)}
    assert tags[0] == _tag("cp312-cp312-manylinux_2_28_x86_64")
    assert position[_tag("cp312-cp312-manylinux_2_28_x86_64")] < position[_tag("cp312-cp312-manylinux_2_17_x86_64")]
    assert position[_tag("cp312-cp312-manylinux_2_17_x86_64")] < position[_tag("cp312-abi3-manylinux_2_28_x86_64")]
    assert position[_tag("cp312-abi3-manylinux_2_28_x86_64")] < position[_tag("cp39-abi3-manylinux_2_28_x86_64")]
    assert position[_tag("cp39-abi3-manylinux_2_28_x86_64")] < position[_tag("py3-none-any")]


def test_wheel_filenames_fit_the_declared_target() -> None:
    """What a user relies on: real index filenames are (in)compatible with the declared target."""
    target = set(declared_target("3.12", "x86_64-manylinux_2_28").tags)

    def fits(filename: str) -> bool:
        return bool(parse_wheel_filename(filename)[3] & target)

    assert fits("torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert fits("flashinfer_python-0.5.3-py3-none-any.whl")
    assert fits("flashinfer_jit_cache-0.5.3+cu130-cp39-abi3-manylinux_2_28_x86_64.whl")
    assert fits("numpy-2.3.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl")
    assert not fits("torch-2.9.1+cu130-cp312-cp312-manylinux_2_28_aarch64.whl")
    assert not fits("torch-2.9.1+cu130-cp313-cp313-manylinux_2_28_x86_64.whl")
    assert not fits("nvidia_foo-1.0-py3-none-manylinux_2_34_x86_64.whl")


def test_linux_platform_tags_put_legacy_aliases_after_their_glibc() -> None:
    tags = linux_platform_tags("aarch64", (2, 18))
    assert tags == ["manylinux_2_18_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64", "linux_aarch64"]
    assert linux_platform_tags("x86_64", None) == ["linux_x86_64"]


# --------------------------------------------------------------------------------------- markers

MARKER_CASES = [
    ('platform_machine == "aarch64"', {"x86_64-manylinux_2_28": False, "aarch64-manylinux_2_28": True}),
    ('platform_machine == "x86_64"', {"x86_64-manylinux_2_28": True, "aarch64-manylinux_2_28": False}),
    ('sys_platform == "linux" and platform_system == "Linux" and os_name == "posix"', {"x86_64-manylinux_2_28": True}),
    ('sys_platform == "win32" or sys_platform == "darwin"', {"x86_64-manylinux_2_28": False}),
    ('implementation_name == "cpython" and platform_python_implementation == "CPython"', {"aarch64-linux": True}),
]


@pytest.mark.parametrize(("marker", "expected"), MARKER_CASES)
def test_declared_markers_evaluate_as_the_target(marker: str, expected: dict[str, bool]) -> None:
    for platform, result in expected.items():
        env = dict(declared_target("3.12", platform).markers)
        assert Marker(marker).evaluate(env) is result, (marker, platform)


@pytest.mark.parametrize(
    ("python", "marker", "result"),
    [
        ("3.12", 'python_version < "3.15"', True),
        ("3.12", 'python_version >= "3.13"', False),
        ("3.13t", 'python_version >= "3.13"', True),
        ("3.12", 'python_full_version >= "3.12.0"', True),
        ("3.12.4", 'python_full_version >= "3.12.4" and python_full_version < "3.12.5"', True),
        ("3.12", 'python_full_version >= "3.12.1"', False),
    ],
)
def test_declared_python_markers(python: str, marker: str, result: bool) -> None:
    assert Marker(marker).evaluate(dict(declared_target(python, "x86_64-manylinux_2_28").markers)) is result


def test_declared_markers_are_a_full_pep508_environment() -> None:
    target = declared_target("3.12", "aarch64-manylinux_2_28")
    assert set(target.markers) == set(default_environment())
    assert target.python_version == "3.12"
    assert target.python_full_version == target.markers["python_full_version"] == "3.12.0"
    assert target.markers["implementation_version"] == "3.12.0"
    assert target.machine == "aarch64"
    # a dependency the resolver must skip on this target, and one it must keep
    assert not Requirement('nvidia-nccl-cu13; platform_machine == "x86_64"').marker.evaluate(dict(target.markers))
    assert Requirement('triton; platform_system == "Linux"').marker.evaluate(dict(target.markers))


# ------------------------------------------------------------------------------------ bad flags


@pytest.mark.parametrize("python", ["3", "3.x", "2.7", "3.7", "py3.12", "3.12tt", "3.12t", "", "cp312", "4.0"])
def test_bad_python_versions(python: str) -> None:
    with pytest.raises(UsageError) as err:
        declared_target(python, "x86_64-manylinux_2_28")
    assert (python or "''") in str(err.value)


@pytest.mark.parametrize(
    "platform",
    [
        "x86_64",
        "manylinux_2_28",
        "x86_64-manylinux_2_16",
        "x86_64-manylinux2014",
        "sparc-manylinux_2_28",
        "x86_64-musllinux_1_2",
        "win_amd64",
        "x86_64-manylinux_2_x",
        "",
    ],
)
def test_bad_platforms_list_the_accepted_forms(platform: str) -> None:
    with pytest.raises(UsageError) as err:
        declared_target("3.12", platform)
    assert f"{platform!r}" in str(err.value)
    assert "x86_64-manylinux_2_28" in str(err.value) and "<machine>-linux" in str(err.value)


def test_installed_versions_keep_local_labels() -> None:
    target = declared_target("3.12", "x86_64-manylinux_2_28", ["torch==2.12.0.dev20260307+cu130", "Flashinfer_Python==0.5.3"])
    assert target.installed == {"torch": Version("2.12.0.dev20260307+cu130"), "flashinfer-python": Version("0.5.3")}
    assert str(target.installed["torch"]) == "2.12.0.dev20260307+cu130"


@pytest.mark.parametrize("spec", ["torch", "torch>=2.9", "torch==", "==2.9", "torch===2.9", "torch==not a version", "tor ch==2.9"])
def test_bad_installed_names_the_string(spec: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_installed([spec])
    assert repr(spec) in str(err.value)


def test_installed_twice_with_different_versions_is_refused() -> None:
    with pytest.raises(UsageError, match="torch"):
        parse_installed(["torch==2.9.1", "Torch==2.9.0"])
    assert parse_installed(["torch==2.9.1", "torch==2.9.1"]) == {"torch": Version("2.9.1")}


@pytest.mark.parametrize(
    ("version", "label"),
    [("2.12.0.dev20260307+cu130", "cu130"), ("2.9.1+cu128", "cu128"), ("2.9.1+cpu", None), ("2.9.1", None), ("2.9.1+rocm6.4", None)],
)
def test_cuda_from_torch(version: str, label: str | None) -> None:
    assert cuda_label_text(Version(version)) == label


# ------------------------------------------------------------------------- choosing interpreters


def _executable(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _python_flag(text: str, search_path: str | None = None) -> tuple[str, str]:
    """--python as the CLI takes it: parsed at the edge (a version, or an interpreter named), an interpreter then found."""
    flag = parse_python(text)
    return ("version", flag.text) if isinstance(flag, PythonVersion) else ("interpreter", locate_interpreter(flag, search_path=search_path))


def test_python_flag_is_a_version_or_an_interpreter_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    python312 = _executable(bindir / "python3.12")
    assert parse_python("3.13t") == PythonVersion("3.13t", 13, None, True) and parse_python("python3.12") == NamedInterpreter("python3.12")
    assert _python_flag("3.12") == ("version", "3.12")
    assert _python_flag("3.13t") == ("version", "3.13t")
    assert _python_flag("3.12.4") == ("version", "3.12.4")
    assert _python_flag("/usr/bin/python3") == ("interpreter", "/usr/bin/python3")
    assert _python_flag(".venv/bin/python") == ("interpreter", ".venv/bin/python")
    assert _python_flag("python3.12", search_path=str(bindir)) == ("interpreter", str(python312))
    monkeypatch.chdir(tmp_path)
    _executable(tmp_path / "mypython")
    assert _python_flag("mypython", search_path="") == ("interpreter", "mypython")
    _executable(tmp_path / "3.12")  # a version wins over a file of the same name
    assert _python_flag("3.12") == ("version", "3.12")
    for bad in ("python9.9", "3.7", "3.99", ""):
        with pytest.raises(UsageError):
            _python_flag(bad, search_path=str(bindir))


def test_default_interpreter(tmp_path: Path) -> None:
    venv_python = _executable(tmp_path / "venv" / "bin" / "python")
    path_python = _executable(tmp_path / "path" / "python3")
    assert default_interpreter({"VIRTUAL_ENV": str(tmp_path / "venv"), "PATH": str(path_python.parent)}) == str(venv_python)
    assert default_interpreter({"VIRTUAL_ENV": str(tmp_path / "gone"), "PATH": str(path_python.parent)}) == str(path_python)
    assert default_interpreter({"PATH": str(path_python.parent)}) == str(path_python)
    with pytest.raises(UsageError, match="python3"):
        default_interpreter({"PATH": str(tmp_path / "empty")})
    with pytest.raises(UsageError):
        default_interpreter({})


# ---------------------------------------------------------------------- a real interpreter (venv)


@pytest.fixture(scope="module")
def venv_with_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv (no pip) into which uv installed two tiny wheels, offline."""
    from uv import find_uv_bin

    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(root / "env")
    python = root / "env" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    app = build_wheel(root / "wheels", "Tiny_App", "1.2.3+local.1", requires=["tiny-dep>=1.0", 'tiny-extra; extra == "more"'], extras=("more",))
    dep = build_wheel(root / "wheels", "tiny-dep", "1.0")
    subprocess.run(
        [find_uv_bin(), "pip", "install", "--python", str(python), "--offline", "--no-index", "--cache-dir", str(root / "cache"), str(app.path), str(dep.path)],
        check=True,
        capture_output=True,
        env={**os.environ, "UV_NO_CONFIG": "1"},
    )
    return python


def test_inspect_environment_finds_installed_distributions(venv_with_wheels: Path) -> None:
    env = inspect_environment(venv_with_wheels)
    assert env.is_venv
    assert Path(env.prefix) == venv_with_wheels.parent.parent
    app = env.distributions["tiny-app"]
    assert app.display_name == "Tiny_App"
    assert app.version == Version("1.2.3+local.1")
    assert app.requires_dist == ("tiny-dep>=1.0", 'tiny-extra; extra == "more"')
    assert app.installer == "uv"
    assert app.dist_info is not None and app.dist_info.is_dir() and app.dist_info.name.endswith(".dist-info")
    assert app.record is not None and "tiny_app/__init__.py" in app.record.read_text()
    assert app.location == Path(env.purelib)
    assert env.distributions["tiny-dep"].version == Version("1.0")
    # the venv has no pip, and the host's packages (pytest, packaging) do not leak in
    assert set(env.distributions) == {"tiny-app", "tiny-dep"}
    assert env.target.installed == {"tiny-app": Version("1.2.3+local.1"), "tiny-dep": Version("1.0")}
    assert env.target.interpreter == str(venv_with_wheels)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="host tag comparison written for Linux")
def test_inspect_interpreter_matches_the_host(venv_with_wheels: Path) -> None:
    """The venv runs this very Python on this very machine: its tags and markers are the host's."""
    target = inspect_interpreter(venv_with_wheels)
    host = list(sys_tags())
    assert set(target.tags) == set(host)
    # packaging >= 26 ranks plain linux_<arch> first, uv ranks it last; the rest is in the same order
    assert [t for t in target.tags if not t.platform.startswith("linux_")] == [t for t in host if not t.platform.startswith("linux_")]
    assert dict(target.markers) == default_environment()
    assert target.python_version == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert target.machine == target.markers["platform_machine"] == os.uname().machine
    assert target.platform.startswith(f"{target.machine}-")
    libc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if libc and libc.startswith("glibc "):
        major, minor = libc.split()[1].split(".")[:2]
        assert target.platform == f"{target.machine}-manylinux_{major}_{minor}"
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    assert (target.tags[0].abi.endswith("t")) is free_threaded


def test_inspect_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "python"
    with pytest.raises(UsageError) as err:
        inspect_interpreter(missing)
    assert str(missing) in str(err.value) and "no such file" in str(err.value)


@pytest.mark.skipif(not Path("/bin/true").exists(), reason="needs /bin/true")
def test_inspect_non_python_executable() -> None:
    with pytest.raises(UsageError) as err:
        inspect_interpreter("/bin/true")
    assert "/bin/true" in str(err.value) and "not a working Python interpreter" in str(err.value)


def test_inspect_failing_and_hanging_and_unexecutable(tmp_path: Path) -> None:
    failing = _executable(tmp_path / "failing", "#!/bin/sh\necho 'boom: broken install' >&2\nexit 3\n")
    with pytest.raises(UsageError, match="boom: broken install") as err:
        inspect_interpreter(failing)
    assert str(failing) in str(err.value)
    hanging = _executable(tmp_path / "hanging", "#!/bin/sh\nexec sleep 30\n")
    with pytest.raises(UsageError, match="did not answer within 0.5s"):
        inspect_interpreter(hanging, timeout=0.5)
    plain = tmp_path / "plain"
    plain.write_text("not a program")
    with pytest.raises(UsageError, match="not an executable"):
        inspect_interpreter(plain)
    with pytest.raises(UsageError, match="not an executable"):
        inspect_interpreter(tmp_path)
    garbage = _executable(tmp_path / "garbage", "#!/bin/sh\necho 'RESOLVE-GPU-STACK-PROBE:{not json'\n")
    with pytest.raises(UsageError, match="unreadable probe output"):
        inspect_interpreter(garbage)
