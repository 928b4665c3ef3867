"""The command line on the bundled snapshot and on loopback worlds: what users type, what they see."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from support.doors import run_cli
from support.paths import SNAPSHOT
from support.server import IndexServer
from support.stack_world import build_story_world

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT)]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Snapshot replays must not open a single socket to anywhere."""
    real = socket.socket.connect

    def guarded(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"network access to {address} during an offline test")
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def test_readme_main_command_resolves_story_1_offline(capsys):
    code, out, err = run_cli(capsys, *STORY, "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["schema"] == "resolve-gpu-stack/plan/v1"
    assert plan["target"] == {"python": "3.12", "platform": "x86_64-manylinux_2_28", "cuda": "cu130"}
    pkgs = {p["name"]: p for p in plan["packages"]}
    assert pkgs["torch"]["action"] == "keep" and pkgs["torch"]["version"] == "2.12.0.dev20260307+cu130"
    assert (pkgs["flashinfer-python"]["version"], pkgs["flashinfer-cubin"]["version"], pkgs["flashinfer-jit-cache"]["version"]) == (
        "0.6.5",
        "0.6.5",
        "0.6.5+cu130",
    )
    assert pkgs["flashinfer-jit-cache"]["url"].endswith("flashinfer_jit_cache-0.6.5+cu130-cp39-abi3-manylinux_2_28_x86_64.whl")
    assert pkgs["flashinfer-jit-cache"]["sha256"] and pkgs["flashinfer-jit-cache"]["coupling"] == "cuda"
    assert pkgs["triton"]["index"] == "pytorch" and pkgs["triton"]["version"].startswith("3.7.0+git")
    assert all(p["index"] == "pypi" for n, p in pkgs.items() if n not in ("torch", "triton", "flashinfer-jit-cache"))
    assert any("cu130/torch2.12/flashinfer-python/ answered 404" in n for n in plan["notes"])


def test_lock_is_the_same_command(capsys):
    _, out1, _ = run_cli(capsys, *STORY, "--format", "json")
    _, out2, _ = run_cli(capsys, "lock", *STORY, "--format", "json")
    assert json.loads(out1) == json.loads(out2)


def test_table_output_names_actions_and_notes(capsys):
    code, out, _ = run_cli(capsys, *STORY, "--format", "table")
    assert code == 0
    assert "flashinfer-jit-cache" in out and "0.6.5+cu130" in out and "keep" in out and "Notes" in out


def test_upgrade_package_names_only_torch_at_the_command_line(capsys):
    code, out, err = run_cli(capsys, *STORY, "--upgrade-package", "numpy")
    assert code == 2 and out == "" and "Traceback" not in err
    assert "--upgrade-package 'numpy': only torch is kept as installed unless named" in err and "hint:" in err


def test_stable_over_nightly_keeps_it_with_a_note_and_with_the_word_is_a_refused_downgrade(capsys):
    code, out, err = run_cli(capsys, *STORY, "--torch", "stable", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    torch = next(p for p in plan["packages"] if p["name"] == "torch")
    assert torch["action"] == "keep" and torch["version"] == "2.12.0.dev20260307+cu130"
    assert any("(a nightly build) is kept: --torch stable chooses FlashInfer and the rest for it" in n for n in plan["notes"]), plan["notes"]
    code, _, err = run_cli(capsys, *STORY, "--torch", "stable", "--upgrade-package", "torch")
    assert code == 1
    assert "would downgrade torch from 2.12.0.dev20260307+cu130 to 2.10.0+cu130" in err
    assert "hint:" in err and "Traceback" not in err


def test_aarch64_and_torchvision_from_the_snapshot(capsys):
    code, out, err = run_cli(
        capsys,
        "--python",
        "3.12",
        "--platform",
        "aarch64-manylinux_2_28",
        "--installed",
        "torch==2.12.0.dev20260306+cu130",
        "--snapshot",
        str(SNAPSHOT),
        "--format",
        "json",
    )
    assert code == 0, err
    pkgs = {p["name"]: p for p in json.loads(out)["packages"]}
    assert pkgs["flashinfer-jit-cache"]["url"].endswith("aarch64.whl")
    code, out, err = run_cli(capsys, *STORY, "--with", "torchvision", "--format", "json")
    assert code == 0, err
    pkgs = {p["name"]: p for p in json.loads(out)["packages"]}
    assert pkgs["torchvision"]["version"] == "0.26.0.dev20260307+cu130" and pkgs["torchvision"]["coupling"] == "torch-abi"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--torch", "sideways"], "neither a channel nor a version"),
        (["--cuda", "cu128"], "--change-cuda"),
        (["--with", "not a requirement!!"], "--with"),
        (["--index", "nonsense"], "expected NAME=URL"),
        (["--index", "conda=https://x.example/"], "unknown index"),
        (["--flashinfer", "newest-please"], "not a version"),
    ],
)
def test_usage_errors_exit_2_with_a_message(capsys, argv, message):
    code, _, err = run_cli(capsys, *STORY, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_platform_with_an_interpreter_path_is_a_usage_error(capsys):
    import sys

    code, _, err = run_cli(capsys, "--python", sys.executable, "--platform", "aarch64-manylinux_2_28", "--snapshot", str(SNAPSHOT))
    assert code == 2 and "declared target" in err


def test_candidates_lists_jit_cache_builds_with_sha256(capsys):
    code, out, err = run_cli(
        capsys, "candidates", "flashinfer-jit-cache", "--cuda", "cu130", "--python", "3.12", "--snapshot", str(SNAPSHOT), "--format", "json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["schema"] == "resolve-gpu-stack/candidates/v1" and data["package"] == "flashinfer-jit-cache"
    assert any(p["found"] and p["url"].endswith("/cu130/flashinfer-jit-cache/") for p in data["pages"])
    rows = data["files"]
    versions = {r["version"] for r in rows}
    assert "0.6.5+cu130" in versions and max(rows, key=lambda r: r["version"])  # newest first below
    assert all(r["version"].endswith("+cu130") for r in rows)
    assert all(r["sha256"] and len(r["sha256"]) == 64 for r in rows)
    assert rows[0]["version"] == "0.6.5+cu130"
    fits = {r["filename"]: r["fits_target"] for r in rows if r["version"] == "0.6.5+cu130"}
    assert fits == {
        "flashinfer_jit_cache-0.6.5+cu130-cp39-abi3-manylinux_2_28_x86_64.whl": True,
        "flashinfer_jit_cache-0.6.5+cu130-cp39-abi3-manylinux_2_28_aarch64.whl": False,
    }


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [("--cuda", "cuda13", "is not a CUDA label"), ("--torch", "weekly", "neither a channel nor a version"), ("--flashinfer", "newest", "is not a version")],
)
def test_candidates_reads_its_flags_through_the_settings_table(capsys, flag, value, says):
    code, _, err = run_cli(capsys, "candidates", "flashinfer-jit-cache", flag, value, "--python", "3.12", "--snapshot", str(SNAPSHOT))
    assert code == 2 and says in err


def test_inspect_reads_cuda_through_the_settings_table(capsys):
    code, _, err = run_cli(capsys, "inspect", "flashinfer-jit-cache==0.6.5+cu130", "--cuda", "bogus", *STORY)
    assert code == 2 and "--cuda 'bogus' is not a CUDA label" in err


def test_candidates_lists_torch_nightlies_with_no_hash_but_metadata_digests(capsys):
    code, out, _ = run_cli(
        capsys, "candidates", "torch", "--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT), "--format", "table"
    )
    assert code == 0
    assert "no hash (metadata sha256 " in out and "2.12.0.dev20260307+cu130" in out
    code, out, _ = run_cli(
        capsys, "candidates", "torch", "--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT), "--format", "json"
    )
    rows = json.loads(out)["files"]
    linux = [r for r in rows if "manylinux" in r["tags"]]
    assert linux and all(r["sha256"] is None for r in rows)
    assert all(r["metadata_sha256"] for r in linux if r["version"] >= "2.12.0.dev20260301")


def test_unreachable_index_exits_3(capsys, tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/"
    code, _, err = run_cli(
        capsys,
        "--python",
        "3.12",
        "--cuda",
        "cu130",
        "--timeout",
        "1",
        "--cache-dir",
        str(tmp_path / "c"),
        "--index",
        f"pytorch={base}whl/",
        "--index",
        f"flashinfer={base}fi/",
        "--index",
        f"pypi={base}simple/",
    )
    assert code == 3
    assert f"127.0.0.1:{port}" in err and "Traceback" not in err


def test_snapshot_miss_names_the_url(capsys):
    code, _, err = run_cli(capsys, "--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--cuda", "cu128", "--snapshot", str(SNAPSHOT))
    assert code == 3
    assert "https://download.pytorch.org/whl/nightly/cu128/torch/" in err and "not in snapshot" in err


def test_snapshot_record_then_replay_with_the_network_closed(capsys, tmp_path):
    world = build_story_world(tmp_path / "www")
    out_dir = tmp_path / "snap"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        urls = world.index_urls(srv.url)
        index_flags = [f for name, url in urls.items() for f in ("--index", f"{name}={url}")]
        target = ["--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130"]
        code, live, err = run_cli(capsys, "snapshot", "--output", str(out_dir), *target, *index_flags, "--cache-dir", str(tmp_path / "c"), "--format", "json")
        assert code == 0, err
        assert "recorded" in err
    # the server is gone: replay must not need it
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["indexes"]["pypi"] is None  # the PyPI URL is never written into a snapshot
    assert any(entry.get("status") == 404 for entry in manifest["pages"].values())
    code, replayed, err = run_cli(
        capsys, *target, "--snapshot", str(out_dir), "--index", f"pytorch={urls['pytorch']}", "--index", f"flashinfer={urls['flashinfer']}", "--format", "json"
    )
    assert code == 0, err
    strip = lambda plan: {(p["name"], p["version"], p["action"]) for p in json.loads(plan)["packages"]}  # noqa: E731
    assert strip(replayed) == strip(live)
    for path in out_dir.rglob("*"):
        if path.is_file():
            assert srv.url.split("//")[1].split("/")[0].split(":")[0] + "/simple" not in path.read_text(errors="ignore")


def test_help_explains_commands(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    for word in ("resolve", "lock", "candidates", "snapshot", "Exit codes"):
        assert word in out


# -- the settings table: one definition of each setting --------------------------------------------


def _parsed(argv):
    from resolve_gpu_stack.cli.app import build_parser

    return build_parser().parse_args(argv)


# a value each setting's parser takes (a row added to the table needs one here)
SAMPLES = {
    "python": "3.12",
    "platform": "aarch64-manylinux_2_28",
    "installed": ("torch==2.12.0+cu130", "numpy==2.1.0"),
    "cuda": "cu129",
    "change_cuda": True,
    "torch": "stable",
    "upgrade_package": ("torch",),
    "allow_downgrade": True,
    "flashinfer": "0.6.5",
    "jit_cache": False,
    "cubin": False,
    "with_": ("torchvision", "numpy<3"),
    "overrides": ("numpy<3", "triton==3.5.0"),
    "auto_torch_override": False,
    "without": ("sgl-kernel", "triton"),
    "build_packages": ("flash-attn", "causal-conv1d"),
    "build_timeout": "7200",
    "abi_mismatch": "warn",
    "keep_broken": ("flashinfer-cubin", "vllm"),
    "exclude_newer": "2026-12-01",
    "wheel_variants": True,
    "gpus": ("sm120", "sm_90"),
    "require_api": ("bmm_mxfp8",),
    "scan_records": "none",
    "all_gpu_archs": True,
}


@pytest.mark.parametrize("command", ["resolve", "lock", "install", "snapshot"])
def test_every_setting_is_a_flag_of_the_resolving_commands(command, tmp_path):
    """Each row is a flag of every resolving command, parsed once at the edge into its model value
    (never kept raw), and said again by the words that gave it."""
    from resolve_gpu_stack.cli import settings

    overrides = tmp_path / "overrides.txt"
    overrides.write_text("torch==2.12.0\n")
    samples = {**SAMPLES, "overrides_file": str(overrides)}
    assert set(samples) == set(settings.BY_NAME)
    extra = ["--output", "x"] if command == "snapshot" else []
    nothing = settings.typed(_parsed([command, *extra]))
    assert nothing.values == {} and nothing.words == ()  # nothing typed: nothing overrides a config
    for s in settings.SETTINGS:
        words = s.words(samples[s.name])
        typed = settings.typed(_parsed([command, *extra, *words]))
        assert set(typed.values) == {s.name} and typed.words == tuple(words), s.flag
        value = typed.values[s.name]
        assert value == s.parse(samples[s.name]), s.flag


def test_each_parser_belongs_to_a_row_and_help_needs_none():
    """The rows (``cli/flags.py``) and their parsers (``cli/settings.py``) are one table: every
    parser is a row's, the settings are the rows in their order, and ``--help`` builds every flag
    from the rows alone, without the parsers' module (nor the model it imports)."""
    from resolve_gpu_stack.cli import flags, settings

    assert set(settings.PARSERS) | set(settings.CONFIGURED) <= set(settings.BY_NAME)  # no parser for a misspelt row
    assert [s.name for s in settings.SETTINGS] == [f.name for f in flags.FLAGS]
    assert all(s.parse is settings.PARSERS[s.name] for s in settings.SETTINGS if s.name in settings.PARSERS)
    code = (
        "import sys\n"
        "from resolve_gpu_stack.cli import main\n"
        "for argv in (['--help'], ['resolve', '--help'], ['lock', '--help']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in sys.modules if m in ('resolve_gpu_stack.cli.settings', 'resolve_gpu_stack.model', 'packaging')), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "--flashinfer" in done.stdout and "--exclude-newer" in done.stdout  # the rows' flags were shown
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr[-2000:]


def test_each_rows_model_value_is_its_request_fields(tmp_path):
    """The one builder takes the parsed values as they are: each request field holds exactly the
    model value its row's parser made (of its own type: a TorchChoice, a CudaLabel, Requested, ...)."""
    import dataclasses

    from resolve_gpu_stack.cli import settings
    from resolve_gpu_stack.model.request import ResolveRequest

    overrides = tmp_path / "overrides.txt"
    overrides.write_text("torch==2.12.0\n")
    values = {**settings.defaults(), **settings.parse({**SAMPLES, "overrides_file": str(overrides)})}
    request = settings.build_request(values, target=settings.declared(values))
    hints = {f.name: f.type for f in dataclasses.fields(ResolveRequest)}
    for s in settings.SETTINGS:
        if not s.on_request or s.joins is not None or s.name == "overrides":
            continue
        assert getattr(request, s.name) == values[s.name], s.flag
        expected = hints[s.name]
        if values[s.name] not in ((), None):
            assert type(values[s.name] if not isinstance(values[s.name], tuple) else values[s.name][0]).__name__ in expected, (s.flag, expected)
    assert request.overrides == (*values["overrides"], *values["overrides_file"])  # --overrides FILE joins --override


def test_the_target_settings_are_parsed_into_their_models_once():
    """--python, --platform, --installed: the edge's models (a version or an interpreter named; a
    platform; the pins), which the declared target is made from without parsing the texts again."""
    from packaging.version import Version

    from resolve_gpu_stack.cli import settings
    from resolve_gpu_stack.model.declared import NamedInterpreter, Platform, PythonVersion

    argv = ["resolve", "--python", "3.13t", "--platform", "aarch64-manylinux_2_28", "--installed", "Torch==2.12.0+cu130"]
    typed = settings.typed(_parsed(argv))
    assert typed.python == PythonVersion("3.13t", 13, None, True) and typed.declares
    assert typed.platform == Platform("aarch64-manylinux_2_28", "aarch64", 28)
    assert typed.installed == {"torch": Version("2.12.0+cu130")}
    target = settings.declared({**settings.defaults(), **typed.values})
    assert (target.python_version, target.platform, dict(target.installed)) == ("3.13", "aarch64-manylinux_2_28", {"torch": Version("2.12.0+cu130")})
    assert "cp313t" in {t.abi for t in target.tags}
    interpreter = settings.typed(_parsed(["resolve", "--python", "python3.12"]))
    assert interpreter.python == NamedInterpreter("python3.12") and not interpreter.declares


def test_typed_settings_round_trip_through_their_words():
    from resolve_gpu_stack.cli import settings

    argv = ["lock", "--torch", "stable", "--no-jit-cache", "--with", "torchvision", "--with", "numpy<3", "--cuda", "cu129", "--change-cuda", "--python", "3.13"]
    typed = settings.typed(_parsed(argv))
    assert set(typed.values) == {"python", "cuda", "change_cuda", "torch", "jit_cache", "with_"}
    assert settings.typed(_parsed(["lock", *typed.words])) == typed
    assert list(typed.words) == [
        "--python",
        "3.13",
        "--cuda",
        "cu129",
        "--change-cuda",
        "--torch",
        "stable",
        "--no-jit-cache",
        "--with",
        "torchvision",
        "--with",
        "numpy<3",
    ]


def test_one_builder_makes_the_same_request_from_flags_and_from_a_config(tmp_path):
    from resolve_gpu_stack.cli import cmd_resolve
    from resolve_gpu_stack.cli.assemble import Session
    from resolve_gpu_stack.cli.common import request_of
    from resolve_gpu_stack.cli.config import load_config, resolve_request

    path = tmp_path / "gpu-stack.toml"
    path.write_text(
        '[[target]]\nname = "t"\npython = "3.12"\ninstalled = ["torch==2.12.0.dev20260307+cu130"]\ncuda = "cu130"\njit-cache = false\nwith = ["torchvision"]\noutput = "t.txt"\n'
    )
    from_config = resolve_request(load_config(path).targets[0])
    args = _parsed(
        ["resolve", "--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130", "--cuda", "cu130", "--no-jit-cache", "--with", "torchvision"]
    )
    options = cmd_resolve.read(args, {})
    with Session(options.network) as session:
        assert request_of(options, {}, session) == from_config
        assert from_config.inputs({}) == request_of(options, {}, session).inputs({})


def test_a_bad_config_value_is_a_usage_error_naming_file_target_and_key(capsys, tmp_path):
    path = tmp_path / "gpu-stack.toml"
    path.write_text('[[target]]\nname = "t"\npython = "3.12"\ntorch = "sideways"\noutput = "t.txt"\n')
    code, _, err = run_cli(capsys, "lock", "--config", str(path))
    assert code == 2
    assert f"{path}: [target] 't': torch: 'sideways' is neither a channel nor a version" in err
    assert "--torch" not in err.splitlines()[0]


def test_a_typed_flag_overrides_the_config_and_an_untyped_one_does_not(capsys, tmp_path):
    path = tmp_path / "gpu-stack.toml"
    path.write_text(
        f'snapshot = "{SNAPSHOT}"\n[[target]]\nname = "t"\npython = "3.12"\ntorch = "stable"\nupgrade-package = ["torch"]\n'
        'installed = ["torch==2.12.0.dev20260307+cu130"]\noutput = "t.txt"\n'
    )
    code, _, err = run_cli(capsys, "lock", "--config", str(path))
    assert code == 1 and "would downgrade torch" in err  # the config's torch = "stable", and its word to move torch
    assert not (tmp_path / "t.txt").exists()
    code, _, err = run_cli(capsys, "lock", "--config", str(path), "--torch", "nightly")
    assert code == 0, err
    text = (tmp_path / "t.txt").read_text()
    assert "torch==2.12.0.dev20260307+cu130" in text and "--target t --torch nightly" in text


def test_candidates_torch_installed_reads_the_installed_torch_channel(capsys):
    argv = ["candidates", "torch", "--python", "3.12", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT), "--format", "json"]
    code, nightly, _ = run_cli(capsys, *argv)
    assert code == 0
    code, installed, err = run_cli(capsys, *argv, "--torch", "installed")
    assert code == 0, err
    assert json.loads(installed) == json.loads(nightly)


_ONE_LINE_OF_EACH = {
    "resolve": ["resolve", "--python", "3.12", "--no-cubin", "--snapshot", "snap"],
    "candidates": ["candidates", "torch", "--torch", "stable"],
    "inspect": ["inspect", "x.whl", "--python", "3.12"],
    "snapshot": ["snapshot", "--output", "snap"],
    "lock": ["lock", "-o", "pylock.x.toml", "--target", "t"],
    "export": ["export", "uv", "--dry-run"],
    "install": ["install", "--uv", "uv", "-o", "pylock.x.toml"],
    "wheelhouse": ["wheelhouse", "pylock.x.toml", "-o", "house", "--offline"],
    "doctor": ["doctor", "--timeout", "5"],
    "check": ["check", "--online", "--format", "json"],
    "cache": ["cache", "prune", "--older-than", "3"],
}


@pytest.mark.parametrize("command", sorted(_ONE_LINE_OF_EACH))
def test_each_command_reads_its_flags_once_into_one_frozen_settings_value(command, tmp_path):
    import argparse
    import dataclasses

    from resolve_gpu_stack.cli.app import COMMANDS
    from resolve_gpu_stack.cli.options import CommandOptions

    assert set(_ONE_LINE_OF_EACH) == set(COMMANDS)
    settings = COMMANDS[command].read(_parsed(_ONE_LINE_OF_EACH[command]), {"HOME": str(tmp_path)})
    assert isinstance(settings, CommandOptions) and dataclasses.is_dataclass(settings)
    assert settings.network.cache_dir == tmp_path / ".cache" / "resolve-gpu-stack"
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.output = settings.output
    values = [getattr(settings, f.name) for f in dataclasses.fields(settings)]
    assert not any(isinstance(v, argparse.Namespace) for v in values)  # nothing after the edge reads the parsed command line


def test_no_command_module_imports_the_app_back():
    import ast
    from pathlib import Path

    import resolve_gpu_stack.cli as cli_package
    from resolve_gpu_stack.cli.app import COMMANDS

    folder = Path(cli_package.__file__).parent
    for path in folder.glob("*.py"):
        if path.name in ("app.py", "__init__.py", "reference.py"):  # reference.py: the docs generator reads the whole CLI, as a user's --help does
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names}
                assert node.module != "app" and not (node.module is None and "app" in names), f"{path.name} imports cli.app"
    assert "importlib" not in (folder / "app.py").read_text()
    assert all(callable(m.register) and callable(m.read) and callable(m.run) for m in COMMANDS.values())


def _pylock(tmp_path, capsys, *extra: str) -> dict:
    from resolve_gpu_stack.data.toml import load_toml

    path = tmp_path / "pylock.x.toml"
    code, _, err = run_cli(capsys, "lock", *STORY, *extra, "-o", str(path))
    assert code == 0, err
    return load_toml(path, error=AssertionError)


def test_pylock_index_is_the_simple_base_the_file_was_found_under(tmp_path, capsys):
    """PEP 751 tools fall back to packages.index when a URL dies: it must be a simple-API base that
    lists the file, not the logical index (issue 13, item 4)."""
    doc = _pylock(tmp_path, capsys, "--installed", "triton==3.7.0+git9c288bc5")
    index = {p["name"]: p.get("index") for p in doc["packages"]}
    assert index["flashinfer-jit-cache"] == "https://flashinfer.ai/whl/cu130/"
    assert index["numpy"].endswith("/simple/") and index["flashinfer-python"] == index["numpy"]
    assert doc["tool"]["resolve-gpu-stack"]["indexes"]["flashinfer"] == "https://flashinfer.ai/whl/"


def test_readme_story_1_lock_works_offline_as_written(tmp_path, capsys):
    """The kept nightly torch's exact pin (triton) came with it: kept, nothing to download, said in a
    note, so the README's lock command needs no network and no extra --installed (issue 13, item 1)."""
    doc = _pylock(tmp_path, capsys)
    tool = doc["tool"]["resolve-gpu-stack"]
    triton = next(p for p in tool["packages"] if p["name"] == "triton")
    assert triton["action"] == "keep" and triton["version"] == "3.7.0+git9c288bc5"
    note = next(n for n in tool["notes"] if n.startswith("taken as installed (kept) with torch 2.12.0.dev20260307+cu130, which pins them exactly: "))
    assert "triton 3.7.0+git9c288bc5" in note and "nvidia-nccl-cu13 2.29.7" in note
    # the pin is the installed torch's: naming triton installed at another version keeps the user's
    code, out, err = run_cli(capsys, *STORY, "--installed", "triton==3.6.0", "--format", "json")
    assert code == 0, err
    pkgs = {p["name"]: p for p in json.loads(out)["packages"]}
    assert pkgs["triton"]["action"] == "upgrade" and pkgs["triton"]["version"] == "3.7.0+git9c288bc5"


def test_exact_pins_read_only_exact_pins_for_the_target():
    from resolve_gpu_stack.model.declared import declared_target
    from resolve_gpu_stack.resolver.torch_pins import exact_pins

    target = declared_target("3.12", "x86_64-manylinux_2_28")
    pins = exact_pins(
        (
            "triton==3.7.0+git9c288bc5; platform_system == 'Linux'",
            "filelock",
            "sympy>=1.13.3",
            "nvidia-nccl==2.1.*",
            "a==1.0; platform_machine == 'aarch64'",
            "b==2.0; extra == 'opt'",
            "c==3,<4",
        ),
        target,
    )
    assert {str(k): str(v) for k, v in pins.items()} == {"triton": "3.7.0+git9c288bc5"}


def test_offline_lock_names_the_kept_packages_it_cannot_list(tmp_path, capsys):
    """With --snapshot nothing is downloaded: a kept nightly whose row has no sha256 (and is not in
    the wheel cache) cannot be listed; the tool table says so, and `check` warns (issue 13, item 3)."""
    doc = _pylock(tmp_path, capsys, "--cache-dir", str(tmp_path / "cache"))
    listed = {p["name"] for p in doc["packages"]}
    unlisted = doc["tool"]["resolve-gpu-stack"]["kept-unlisted"]
    assert unlisted["packages"] == ["torch", "triton"] and "uv pip sync" in unlisted["why"]
    assert not listed & {"torch", "triton"}
    assert {"nvidia-nccl-cu13", "cuda-toolkit"} <= listed  # kept too, but their PyPI rows carry a sha256
    code, _, err = run_cli(capsys, "check", str(tmp_path / "pylock.x.toml"), "--today", "2026-03-08")
    assert code == 0, err
    assert "torch: kept but not listed in [[packages]]" in err and "triton: kept but not listed" in err


MIRROR = "https://mirror.example/simple/"


def test_snapshot_pypi_files_get_the_users_pypi(tmp_path, capsys, monkeypatch):
    """Replaying the bundled snapshot, PyPI files are on the PyPI the user's configuration names,
    so the lock installs; not on the snapshot's placeholder host (issue 13, item 2)."""
    monkeypatch.setenv("PIP_INDEX_URL", MIRROR)
    doc = _pylock(tmp_path, capsys)
    numpy = next(p for p in doc["packages"] if p["name"] == "numpy")
    assert numpy["index"] == MIRROR and numpy["wheels"][0]["url"].startswith("https://mirror.example/")
    assert doc["tool"]["resolve-gpu-stack"]["indexes"]["pypi"] == MIRROR
    assert "snapshot.invalid" not in (tmp_path / "pylock.x.toml").read_text()


def test_snapshot_placeholder_only_when_asked_for_or_no_pypi_at_all(tmp_path, capsys, monkeypatch):
    from resolve_gpu_stack.cli import userconfig
    from resolve_gpu_stack.errors import UsageError

    monkeypatch.setenv("PIP_INDEX_URL", MIRROR)
    placeholder = "https://pypi.snapshot.invalid/simple/"
    doc = _pylock(tmp_path, capsys, "--index", f"pypi={placeholder}")
    assert next(p for p in doc["packages"] if p["name"] == "numpy")["index"] == placeholder

    def nothing(env, **kw):
        raise UsageError("cannot tell which PyPI index to use")

    monkeypatch.setattr(userconfig, "discover_pypi_url", nothing)
    path = tmp_path / "pylock.y.toml"
    code, _, err = run_cli(capsys, "lock", *STORY, "-o", str(path))
    assert code == 0, err
    assert f"warning: no PyPI index is configured (uv/pip): PyPI files from the snapshot get the placeholder base {placeholder}" in err
    assert f'index = "{placeholder}"' in path.read_text()
