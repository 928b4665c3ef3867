"""Project config: finding it, parsing it, clear errors naming file/target/key, and overrides."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from resolve_gpu_stack.cli.config import (
    discover_config,
    effective,
    find_config,
    index_urls,
    load_config,
    lock_inputs,
    with_overrides,
)
from resolve_gpu_stack.cli.settings import parse
from resolve_gpu_stack.errors import UsageError
from resolve_gpu_stack.model.cuda import CudaLabel
from resolve_gpu_stack.model.declared import Platform, PythonVersion
from resolve_gpu_stack.model.inputs import inputs_digest
from resolve_gpu_stack.model.request import FlashInferChoice, TorchChoice

FULL = """
[project]
name = "demo"

[tool.resolve-gpu-stack]
snapshot = "indexes/snapshots/2026-03-07"
indexes = { pytorch = "https://mirror.example/whl" }

[tool.resolve-gpu-stack.defaults]
torch = "nightly"
flashinfer = "latest"
cuda = "cu130"
jit-cache = true
cubin = true
with = []
python = "3.12"

[[tool.resolve-gpu-stack.target]]
name = "x86_64-py312"
platform = "x86_64-manylinux_2_28"
installed = ["torch==2.12.0.dev20260307+cu130"]
output = ["constraints/pylock.x86_64-py312.toml", "constraints/x86_64-py312.txt"]

[[tool.resolve-gpu-stack.target]]
name = "aarch64-py313"
python = "3.13"
platform = "aarch64-manylinux_2_28"
installed = ["torch==2.12.0.dev20260306+cu130"]
with = ["torchvision"]
cubin = false
output = "constraints/pylock.aarch64-py313.toml"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def pyproject_with(tmp_path: Path, body: str) -> Path:
    return write(tmp_path / "pyproject.toml", "[tool.resolve-gpu-stack]\n" + textwrap.dedent(body))


TARGET = """
[[tool.resolve-gpu-stack.target]]
name = "t"
python = "3.12"
output = "pylock.t.toml"
"""


# -- parsing -------------------------------------------------------------------------------------


def test_full_pyproject_table_parses_with_defaults_merged_and_paths_resolved(tmp_path):
    cfg = load_config(write(tmp_path / "pyproject.toml", FULL))
    assert cfg.table == "tool.resolve-gpu-stack"
    assert cfg.snapshot == tmp_path / "indexes/snapshots/2026-03-07"
    assert cfg.indexes == {"pytorch": "https://mirror.example/whl/"}  # normalized base URL
    x86, arm = cfg.targets
    s = x86.settings
    assert (x86.name, str(s["python"]), str(s["platform"]), str(s["cuda"]), s["cubin"], s["with_"]) == (
        "x86_64-py312",
        "3.12",
        "x86_64-manylinux_2_28",
        "cu130",
        True,
        (),
    )
    assert s["installed"] == {"torch": Version("2.12.0.dev20260307+cu130")}
    # parsed once, into the model's values (the declared target's parts too: never re-parsed by declared_target)
    assert s["python"] == PythonVersion("3.12", 12) and s["platform"] == Platform("x86_64-manylinux_2_28", "x86_64", 28)
    assert s["torch"] == TorchChoice.parse("nightly") and s["cuda"] == CudaLabel(13, 0) and s["flashinfer"] == FlashInferChoice.parse("latest")
    assert x86.outputs == (tmp_path / "constraints/pylock.x86_64-py312.toml", tmp_path / "constraints/x86_64-py312.txt")
    # a target's own keys win over [defaults]; a string output is one file
    assert (str(arm.settings["python"]), arm.settings["cubin"], arm.settings["with_"], str(arm.settings["cuda"])) == ("3.13", False, ("torchvision",), "cu130")
    assert arm.outputs == (tmp_path / "constraints/pylock.aarch64-py313.toml",)
    assert cfg.target_for_output(Path(tmp_path / "constraints" / ".." / "constraints/x86_64-py312.txt")) is x86
    assert cfg.target_for_output(tmp_path / "other.txt") is None


def test_gpu_stack_toml_uses_top_level_keys(tmp_path):
    write(tmp_path / "pyproject.toml", "[project]\nname = 'demo'\n")  # no table: does not count
    path = write(
        tmp_path / "gpu-stack.toml",
        """
        [defaults]
        python = "3.11"
        [[target]]
        name = "a"
        output = "locks/pylock.a.toml"
    """,
    )
    cfg = discover_config(None, cwd=tmp_path)
    assert cfg is not None and cfg.path == path and cfg.table is None
    assert str(cfg.targets[0].settings["python"]) == "3.11" and cfg.targets[0].outputs == (tmp_path / "locks/pylock.a.toml",)
    assert cfg.regenerate_command(cfg.targets[0]) == "resolve-gpu-stack lock --target a"


def test_search_walks_up_from_a_subdirectory_and_stops_at_the_nearest(tmp_path):
    outer = pyproject_with(tmp_path, TARGET)
    inner = tmp_path / "pkg" / "src"
    inner.mkdir(parents=True)
    write(tmp_path / "pkg" / "pyproject.toml", "[project]\nname = 'inner'\n")
    assert find_config(inner) == outer
    nearer = write(tmp_path / "pkg" / "gpu-stack.toml", '[[target]]\nname = "n"\npython = "3.12"\noutput = "n.txt"\n')
    assert find_config(inner) == nearer


def test_no_config_anywhere_is_none(tmp_path):
    assert discover_config(None, cwd=tmp_path) is None


def test_both_files_in_one_folder_is_an_error(tmp_path):
    pyproject_with(tmp_path, TARGET)
    write(tmp_path / "gpu-stack.toml", '[[target]]\nname = "x"\npython = "3.12"\noutput = "x.txt"\n')
    with pytest.raises(UsageError, match="both pyproject.toml .* and gpu-stack.toml"):
        find_config(tmp_path)


def test_explicit_config_file_with_another_name_is_recorded_in_the_command(tmp_path):
    path = write(tmp_path / "ci" / "gpu.toml", '[[target]]\nname = "ci"\npython = "3.12"\noutput = "out/ci.txt"\n')
    cfg = discover_config(path)
    assert cfg.targets[0].outputs == (tmp_path / "ci/out/ci.txt",)
    assert cfg.regenerate_command(cfg.targets[0]) == "resolve-gpu-stack lock --config gpu.toml --target ci"
    with pytest.raises(UsageError, match="no such file"):
        discover_config(tmp_path / "missing.toml")


def test_explicit_pyproject_without_the_table_is_an_error(tmp_path):
    path = write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    with pytest.raises(UsageError, match=r"no \[tool.resolve-gpu-stack\] table"):
        load_config(path)


def test_select_targets(tmp_path):
    cfg = load_config(write(tmp_path / "pyproject.toml", FULL))
    assert [t.name for t in cfg.select([])] == ["x86_64-py312", "aarch64-py313"]
    assert [t.name for t in cfg.select(["aarch64-py313"])] == ["aarch64-py313"]
    with pytest.raises(UsageError, match="no target named 'nope'") as err:
        cfg.select(["nope"])
    assert "x86_64-py312" in err.value.hint


# -- validation errors name the file, the target and the key -------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("snapshot = 3\n" + TARGET, r"\[tool.resolve-gpu-stack\]: 'snapshot' must be a string, not an integer"),
        ('snapshots = "x"\n' + TARGET, r"unknown key 'snapshots'"),
        ('[tool.resolve-gpu-stack.defaults]\ntorhc = "nightly"\n' + TARGET, r"\[tool.resolve-gpu-stack.defaults\]: unknown key 'torhc'"),
        ('[tool.resolve-gpu-stack.defaults]\nname = "x"\n' + TARGET, r"defaults\]: unknown key 'name'"),
        (TARGET + 'pyhton = "3.12"\n', r"target\] 't': unknown key 'pyhton'"),
        (TARGET + 'jit-cache = "yes"\n', r"target\] 't': 'jit-cache' must be a boolean, not a string"),
        (TARGET + 'with = "torchvision"\n', r"'with' must be an array of strings, not a string"),
        (TARGET + "installed = [1]\n", r"'installed' must be an array of strings"),
        (TARGET + 'cuda = "13.0"\n', r"target\] 't': cuda: '13.0' is not a CUDA label"),
        (TARGET + 'with = ["torch vision >"]\n', r"target\] 't': with: 'torch vision >': "),
        (TARGET + 'with = ["demo @ https://x.example/demo.whl"]\n', r"target\] 't': with: 'demo @ https://x.example/demo.whl': direct URLs are not supported"),
        (TARGET + 'installed = ["torch>=2"]\n', r"target\] 't': installed: bad 'torch>=2'"),
        (TARGET + 'torch = "sideways"\n', r"target\] 't': torch: 'sideways' is neither a channel nor a version"),
        (TARGET + 'flashinfer = "newest-please"\n', r"target\] 't': flashinfer: 'newest-please' is not a version"),
        ('[tool.resolve-gpu-stack.defaults]\ntorch = ">=nope"\n' + TARGET, r"defaults\]: torch: '>=nope' is neither a channel nor a version"),
        (TARGET + "torch = 2.11\n", r"target\] 't': 'torch' must be a string, not a number"),
        (TARGET + 'platform = "win_amd64"\n', r"target\] 't': platform: unknown platform 'win_amd64'"),
        (
            '[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "/usr/bin/python3"\noutput = "pylock.t.toml"\n',
            r"target\] 't': python: '/usr/bin/python3' is not a Python version",
        ),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "2.7"\noutput = "pylock.t.toml"\n', r"target\] 't': python:"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\noutput = "pylock.t.toml"\n', r"target\] 't': missing 'python'"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "3.12"\n', r"target\] 't': missing 'output'"),
        ('[[tool.resolve-gpu-stack.target]]\npython = "3.12"\noutput = "a.txt"\n', r"target\] #1: missing 'name'"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "a.b"\npython = "3.12"\noutput = "a.txt"\n', r"target\] #1: name 'a.b'"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "3.12"\noutput = "lock.json"\n', r"target\] 't': output 'lock.json': .*not a lock file name"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "3.12"\noutput = "pylock.a.b.toml"\n', r"output 'pylock.a.b.toml'"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "3.12"\noutput = ["a.txt", "./a.txt"]\n', r"output './a.txt' is listed twice"),
        ('[[tool.resolve-gpu-stack.target]]\nname = "t"\npython = "3.12"\noutput = []\n', r"'output' names no file"),
        (TARGET + TARGET, r"two targets are named 't'"),
        (TARGET + TARGET.replace('name = "t"', 'name = "u"'), r"targets 't' and 'u' both write .*pylock.t.toml"),
        ("indexes = { pypi = 'https://user:secret@mirror.example/simple' }\n" + TARGET, r"indexes.pypi: the URL carries credentials"),
        ("indexes = { conda = 'https://mirror.example/' }\n" + TARGET, r"unknown index 'conda'"),
        ("indexes = { pytorch = 'ftp://mirror.example/' }\n" + TARGET, r"indexes.pytorch: not an index URL"),
        ('snapshot = "s"\n', r"no \[\[target\]\] tables"),
        ('target = "x"\n', r"'target' must be an array of tables"),
    ],
)
def test_validation_errors(tmp_path, body, expected):
    path = pyproject_with(tmp_path, body)
    with pytest.raises(UsageError, match=expected) as err:
        load_config(path)
    assert str(path) in str(err.value)
    assert "secret" not in str(err.value)
    assert " --" not in str(err.value)  # a config error names the key, never a flag the user did not type


def test_misspelled_key_suggests_the_right_one(tmp_path):
    with pytest.raises(UsageError) as err:
        load_config(pyproject_with(tmp_path, TARGET + "jitcache = false\n"))
    assert err.value.hint == "did you mean 'jit-cache'?"


def test_invalid_toml_names_the_file(tmp_path):
    path = write(tmp_path / "gpu-stack.toml", "[[target]\n")
    with pytest.raises(UsageError, match=f"{path}: not valid TOML"):
        load_config(path)


# -- overrides and the inputs a lock records -----------------------------------------------------


def test_command_line_overrides_win_and_change_the_inputs_digest(tmp_path):
    cfg = load_config(write(tmp_path / "pyproject.toml", FULL))
    x86 = cfg.targets[0]
    base = lock_inputs(cfg, x86)
    assert base["torch"] == "nightly" and base["installed-torch"] == "2.12.0.dev20260307+cu130"
    assert base["snapshot"] == "indexes/snapshots/2026-03-07"
    assert base["components"] == ["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"]

    # the command line's values, parsed at the edge (``settings.typed``), win over the config's
    stable = with_overrides(x86, parse({"torch": "stable", "cubin": False, "with_": ("torchvision",)}))
    assert (stable.settings["torch"].text, stable.settings["cubin"], stable.settings["with_"], stable.name, stable.outputs) == (
        "stable",
        False,
        ("torchvision",),
        x86.name,
        x86.outputs,
    )
    changed = lock_inputs(cfg, stable)
    assert changed["torch"] == "stable" and changed["components"] == ["flashinfer-python", "flashinfer-jit-cache"]
    assert inputs_digest(changed) != inputs_digest(base)
    with pytest.raises(ValueError):
        with_overrides(x86, {"outputs": ()})


def test_snapshot_and_index_overrides(tmp_path):
    cfg = load_config(write(tmp_path / "pyproject.toml", FULL))
    moved = effective(cfg, snapshot=tmp_path / "snap2", indexes={"flashinfer": "https://fi.example/whl/"})
    assert moved.snapshot == tmp_path / "snap2"
    assert moved.indexes == {"pytorch": "https://mirror.example/whl/", "flashinfer": "https://fi.example/whl/"}
    # the snapshot replays PyPI under a placeholder base, so the digest never depends on this machine
    assert index_urls(moved)["pypi"].endswith(".invalid/simple/")
    assert lock_inputs(moved, moved.targets[0])["snapshot"] == "snap2"
    assert lock_inputs(moved, moved.targets[0])["indexes"]["flashinfer"] == "https://fi.example/whl/"


def test_inputs_do_not_depend_on_the_machine_pypi_configuration(tmp_path, monkeypatch):
    path = pyproject_with(tmp_path, TARGET)
    cfg = load_config(path)
    monkeypatch.setenv("PIP_INDEX_URL", "https://one.example/simple/")
    first = inputs_digest(lock_inputs(cfg, cfg.targets[0]))
    monkeypatch.setenv("PIP_INDEX_URL", "https://two.example/simple/")
    assert inputs_digest(lock_inputs(cfg, cfg.targets[0])) == first
    assert "pypi" not in lock_inputs(cfg, cfg.targets[0])["indexes"] or lock_inputs(cfg, cfg.targets[0])["indexes"]["pypi"] is None
