"""The pure part of `export uv` (lock/uvproject/) and the uv.lock check (lock/check.py): a plan in
uv's words, written into a pyproject.toml next to the user's own entries, and read back."""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.errors import UsageError
from resolve_gpu_stack.lock.check import uv_project_findings
from resolve_gpu_stack.lock.uvproject import NEVER, ExportTarget, UvTables, apply_tables, read_export, read_uv_lock, uv_tables
from resolve_gpu_stack.model import Action, Coupling, LockedPackage, LockPlan, Override, TargetSummary

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFS = load_definitions()
FI = DEFS.flashinfer
NIGHTLY = "2.12.0.dev20260307+cu130"
WHL = "https://mirror.example/whl/"
TORCH_INDEX = WHL + "nightly/cu130/"
FI_INDEX = "https://fi.example/whl/cu130/"
X86 = "platform_machine == 'x86_64' and sys_platform == 'linux' and python_version == '3.12'"
ARM = "platform_machine == 'aarch64' and sys_platform == 'linux' and python_version == '3.12'"


def pkg(name: str, version: str, *, index: str = "pypi", action: Action = Action.INSTALL, simple_index: str | None = None) -> LockedPackage:
    return LockedPackage(
        name=canonicalize_name(name), version=Version(version), action=action, index=index, coupling=Coupling.AGNOSTIC, simple_index=simple_index
    )


def plan(
    *, torch: str = NIGHTLY, platform: str = "x86_64-manylinux_2_28", numpy: str = "2.2.0", inputs: dict | None = None, overrides=(), extra=()
) -> LockPlan:
    return LockPlan(
        target=TargetSummary(python="3.12", platform=platform, cuda="cu130"),
        packages=(
            pkg("torch", torch, index="pytorch", action=Action.KEEP, simple_index=TORCH_INDEX),
            pkg("flashinfer-python", "0.6.5"),
            pkg("flashinfer-cubin", "0.6.5"),
            pkg("flashinfer-jit-cache", "0.6.5+cu130", index="flashinfer", simple_index=FI_INDEX),
            pkg("numpy", numpy),
            *extra,
        ),
        flashinfer_version=Version("0.6.5"),
        cuda_label="cu130",
        indexes={"pytorch": WHL, "flashinfer": "https://fi.example/whl/", "pypi": "https://pypi.example/simple/"},
        inputs=inputs or {},
        overrides=tuple(overrides),
    )


def tables(*plans: LockPlan, names: tuple[str, ...] = ()) -> UvTables:
    return uv_tables([ExportTarget(name=n, plan=p) for n, p in zip(names or ("",) * len(plans), plans)], FI)


PROJECT = textwrap.dedent("""\
    [project]
    name = "demo"  # mine
    version = "0"
    requires-python = ">=3.10"
    dependencies = ["flashinfer-python"]

    [tool.uv]
    # my own uv settings
    constraint-dependencies = [
        "packaging<30",  # my pin
    ]
    """)


def apply(text: str, t: UvTables) -> str:
    return apply_tables(text, t, command="resolve-gpu-stack export uv").text


def test_a_plan_in_uvs_words():
    t = tables(
        plan(
            inputs={"with": ["sglang[all]>=0.5; python_version >= '3.10'"], "without": ["sgl-kernel"]},
            overrides=[
                Override(package="sglang", requirement="torch==2.9.1", replaced_by=f"torch=={NIGHTLY}", reason="kept"),
                Override(package="sglang", requirement="torchaudio==2.9.1", replaced_by="torchaudio (not in the plan)", reason="x"),
            ],
        )
    )
    assert t.group == ("flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python", "sglang[all] ; python_version >= '3.10'", "torch")
    assert t.environments == (X86,)
    assert t.lists["constraint-dependencies"] == (
        "flashinfer-cubin==0.6.5",
        "flashinfer-jit-cache==0.6.5+cu130",
        "flashinfer-python==0.6.5",
        "numpy==2.2.0",
        f"torch=={NIGHTLY}",
    )
    assert t.lists["override-dependencies"] == (f"sgl-kernel ; {NEVER}", f"torch=={NIGHTLY}")  # what uv cannot say is left out
    assert [(i.name, i.url) for i in t.indexes] == [("flashinfer-cu130", FI_INDEX), ("pytorch-nightly-cu130", TORCH_INDEX)]
    assert t.sources == {"flashinfer-jit-cache": (("flashinfer-cu130", None),), "torch": (("pytorch-nightly-cu130", None),)}
    assert t.targets[0].kept == ("torch",) and t.targets[0].sources == {"flashinfer-jit-cache": FI_INDEX, "torch": TORCH_INDEX}


def test_two_targets_share_what_they_agree_on_and_mark_what_differs():
    t = tables(plan(), plan(torch="2.12.0.dev20260306+cu130", platform="aarch64-manylinux_2_28"), names=("x86", "arm"))
    assert t.environments == (X86, ARM)
    assert "numpy==2.2.0" in t.lists["constraint-dependencies"]  # the same on both: once, bare
    assert f"torch=={NIGHTLY} ; {X86}" in t.lists["constraint-dependencies"]
    assert f"torch==2.12.0.dev20260306+cu130 ; {ARM}" in t.lists["constraint-dependencies"]
    assert t.sources["torch"] == (("pytorch-nightly-cu130", None),)  # the same folder serves both


def test_a_kept_package_no_index_lists_is_named():
    gone = replace(plan(), packages=(pkg("torch", NIGHTLY, index="installed", action=Action.KEEP),))
    assert tables(gone).warnings == (f"torch {NIGHTLY} is kept, but no index lists it any more: `uv lock` cannot find it",)


def test_written_next_to_the_users_entries_and_idempotent():
    first = apply(PROJECT, tables(plan()))
    assert first.startswith(PROJECT.split("[tool.uv]")[0])
    assert "# my own uv settings" in first and '"packaging<30",  # my pin' in first
    doc = tomllib.loads(first)
    assert doc["tool"]["uv"]["constraint-dependencies"][0] == "packaging<30"
    assert f"torch=={NIGHTLY}" in doc["tool"]["uv"]["constraint-dependencies"]
    assert doc["dependency-groups"]["gpu-stack"] == ["flashinfer-cubin", "flashinfer-jit-cache", "flashinfer-python", "torch"]
    assert doc["tool"]["uv"]["default-groups"] == ["gpu-stack"]
    assert doc["tool"]["uv"]["index"] == [
        {"name": "flashinfer-cu130", "url": FI_INDEX, "explicit": True},
        {"name": "pytorch-nightly-cu130", "url": TORCH_INDEX, "explicit": True},
    ]
    assert apply(first, tables(plan())) == first


def test_the_next_export_replaces_exactly_what_the_last_one_wrote():
    first = apply(PROJECT, tables(plan(extra=(pkg("triton", "3.7.0", index="pytorch", simple_index=TORCH_INDEX),))))
    second = apply(first, tables(plan(numpy="2.3.0")))
    uv = tomllib.loads(second)["tool"]["uv"]
    assert "numpy==2.3.0" in uv["constraint-dependencies"] and "numpy==2.2.0" not in uv["constraint-dependencies"]
    assert "packaging<30" in uv["constraint-dependencies"]
    assert "triton" not in uv["sources"] and not any(c.startswith("triton") for c in uv["constraint-dependencies"])
    assert second == apply(PROJECT, tables(plan(numpy="2.3.0")))


def test_the_users_conflicting_entries_are_named():
    theirs = PROJECT.replace('"packaging<30",  # my pin', '"numpy<2",') + textwrap.dedent(f"""\
        environments = ["sys_platform == 'darwin'"]

        [[tool.uv.index]]
        name = "pytorch-nightly-cu130"
        url = "https://other.example/simple/"

        [[tool.uv.index]]
        name = "my-fi"
        url = "{FI_INDEX}"
        explicit = true

        [tool.uv.sources]
        torch = {{ index = "pytorch-nightly-cu130" }}
        """)
    applied = apply_tables(theirs, tables(plan()), command="x")
    assert "your [tool.uv] constraint 'numpy<2' excludes the planned numpy 2.2.0: `uv lock` will find no solution" in applied.notes
    assert any(n.startswith("replaced [tool.uv] environments") and "darwin" in n for n in applied.notes)
    assert any(n.startswith("replaced your [tool.uv.sources] entry for torch") for n in applied.notes)
    uv = tomllib.loads(applied.text)["tool"]["uv"]
    names = [i["name"] for i in uv["index"]]
    assert names == ["pytorch-nightly-cu130", "my-fi", "pytorch-nightly-cu130-2"]  # theirs kept; ours renamed; FlashInfer's URL reused
    assert uv["sources"]["torch"] == {"index": "pytorch-nightly-cu130-2"}
    assert uv["sources"]["flashinfer-jit-cache"] == {"index": "my-fi"}
    again = apply_tables(applied.text, tables(plan()), command="x")
    assert again.text == applied.text and not any("replaced" in n for n in again.notes)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", ["gpu-stack"]),
        ('default-groups = ["docs"]\n', ["docs", "gpu-stack"]),
        ('default-groups = "all"\n', "all"),
        ('[dependency-groups]\ndev = ["pytest"]\n', ["dev", "gpu-stack"]),
    ],
)
def test_default_groups_gain_the_stacks_group(before, after):
    text = PROJECT.replace("[tool.uv]\n", "[tool.uv]\n" + before) if before.startswith("default") else PROJECT + before
    assert tomllib.loads(apply(text, tables(plan())))["tool"]["uv"]["default-groups"] == after


def test_build_settings_for_packages_built_against_torch_come_and_go():
    """The seam for packages the plan builds against its torch (action ``build``): in uv's isolated
    build environment with the environment's torch as a build dependency (match-runtime), its arch
    list as a build variable, its source tree as its source; gone when the plan has none (and a
    previous export's no-build-isolation-package with them)."""
    built = replace(
        tables(plan()),
        built=("flash-attn",),
        build_variables={"flash-attn": {"TORCH_CUDA_ARCH_LIST": "9.0;12.0"}},
        trees={"flash-attn": (({"git": "https://example.org/fa.git", "rev": "a" * 40, "subdirectory": "hopper"}, None),)},
    )
    old = PROJECT.replace("[tool.uv]\n", '[tool.uv]\nno-build-isolation-package = ["flash-attn"]\n')
    old = old + '\n[tool.resolve-gpu-stack.uv-export]\nno-build-isolation-package = ["flash-attn"]\n'
    uv = tomllib.loads(first := apply(old, built))["tool"]["uv"]
    assert "no-build-isolation-package" not in uv
    assert uv["extra-build-dependencies"] == {"flash-attn": [{"requirement": "torch", "match-runtime": True}]}
    assert uv["extra-build-variables"] == {"flash-attn": {"TORCH_CUDA_ARCH_LIST": "9.0;12.0"}}
    assert uv["sources"]["flash-attn"] == {"git": "https://example.org/fa.git", "rev": "a" * 40, "subdirectory": "hopper"}
    uv = tomllib.loads(apply(first, tables(plan())))["tool"]["uv"]
    assert not {"no-build-isolation-package", "extra-build-dependencies", "extra-build-variables"} & set(uv)
    assert "flash-attn" not in uv.get("sources", {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[project\nname = 'x'\n", "not valid TOML"),
        ("[tool.uv]\nenvironments = []\n", "no [project] table"),
    ],
)
def test_a_project_that_is_not_one_is_refused(text, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        apply(text, tables(plan()))


def test_a_python_outside_requires_python_is_named():
    applied = apply_tables(PROJECT.replace(">=3.10", ">=3.13"), tables(plan()), command="x")
    assert "the plan is for Python 3.12, outside the project's requires-python '>=3.13': uv will refuse the environments" in applied.notes


# -- check: uv.lock against the record ------------------------------------------------------------

UV_LOCK = textwrap.dedent(f"""\
    version = 1
    [[package]]
    name = "torch"
    version = "{NIGHTLY}"
    source = {{ registry = "{TORCH_INDEX}" }}
    [[package]]
    name = "flashinfer-python"
    version = "0.6.5"
    source = {{ registry = "https://pypi.example/simple/" }}
    [[package]]
    name = "flashinfer-cubin"
    version = "0.6.5"
    source = {{ registry = "https://pypi.example/simple/" }}
    [[package]]
    name = "flashinfer-jit-cache"
    version = "0.6.5+cu130"
    source = {{ registry = "{FI_INDEX}" }}
    [[package]]
    name = "numpy"
    version = "2.2.0"
    source = {{ registry = "https://pypi.example/simple/" }}
    [[package]]
    name = "demo"
    version = "0"
    source = {{ virtual = "." }}
    """)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(apply(PROJECT, tables(plan())))
    (tmp_path / "uv.lock").write_text(UV_LOCK)
    return tmp_path


def findings(project: Path) -> list[str]:
    return [f.render("uv.lock") for f in uv_project_findings(project / "pyproject.toml", project / "uv.lock", DEFS)]


def test_a_uv_lock_that_holds_the_plan_passes(project):
    assert findings(project) == []
    assert read_export((project / "pyproject.toml").read_text(), "p").targets[0].kept == ("torch",)
    assert [p.name for p in read_uv_lock(UV_LOCK, "uv.lock")][:2] == ["torch", "flashinfer-python"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            f'version = "{NIGHTLY}"',
            'version = "2.10.0+cu130"',
            f"torch: uv.lock has 2.10.0+cu130, but the plan keeps the installed {NIGHTLY}: `uv sync` would replace it",
        ),
        (
            f'registry = "{FI_INDEX}"',
            'registry = "https://pypi.example/simple/"',
            f"flashinfer-jit-cache: uv.lock takes it from https://pypi.example/simple/, the plan from {FI_INDEX}",
        ),
        ('version = "0.6.5+cu130"', 'version = "0.6.4+cu130"', "flashinfer-jit-cache: in uv.lock: version 0.6.4+cu130 is not 0.6.5+<cuda label>"),
        ('name = "numpy"\nversion = "2.2.0"', 'name = "numpy"\nversion = "2.1.0"', "numpy: uv.lock has 2.1.0, the exported plan pins 2.2.0"),
        ('name = "numpy"', 'name = "numpy-other"', "numpy: not in uv.lock; the exported plan installs 2.2.0"),
        ("[[package]]", "[[package]", "not valid TOML"),
    ],
)
def test_each_drift_in_uv_lock_is_named(project, old, new, expected):
    lock = project / "uv.lock"
    lock.write_text(lock.read_text().replace(old, new, 1))
    assert any(expected in f for f in findings(project)), findings(project)


def test_a_hand_edit_of_the_exported_tables_is_drift_too(project):
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('    "numpy==2.2.0",\n', "", 1).replace('torch = {index = "pytorch-nightly-cu130"}\n', ""))
    got = findings(project)
    assert any("[tool.uv] constraint-dependencies no longer has 'numpy==2.2.0', which `export uv` wrote" in f for f in got), got
    assert any("torch: [tool.uv.sources] has no entry for torch any more" in f for f in got), got


def test_a_missing_uv_lock_or_record_is_said(project):
    (project / "uv.lock").unlink()
    assert any("missing: pyproject.toml holds an exported plan but there is no uv.lock" in f for f in findings(project))
    (project / "pyproject.toml").write_text(PROJECT)
    assert any("has no [tool.resolve-gpu-stack.uv-export] table" in f for f in findings(project))
