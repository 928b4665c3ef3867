"""Issue 49 item 1 for an sdist from an index (``--build NAME``): a PKG-INFO that is not static
(core metadata older than 2.2, or Requires-Dist listed as Dynamic) is not what the resolve plans
from; the sdist's build backend is asked ``prepare_metadata_for_build_wheel`` in a build
environment with the kept torch, once per sdist, torch, Python and platform. A static 2.2+ PKG-INFO
needs no build environment."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomllib
from support.build_world import NIGHTLY, PYTHON, build_world, extension_sdist, run_in, torch_wheel
from support.building import HERE, common, needs_builds
from support.doors import run_cli
from support.install_world import make_venv
from support.server import IndexServer

from resolve_gpu_stack.data.toml import load_toml
from resolve_gpu_stack.errors import LockFileError
from resolve_gpu_stack.index.parse import parse_metadata
from resolve_gpu_stack.index.sdist import pkg_info_is_static

ASKED = "its metadata is dynamic: asking its build backend"
DECLARED = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={NIGHTLY}"]


def _metadata_records(cache: Path) -> list[Path]:
    return sorted((cache / "wheels" / "builds" / "metadata").glob("*.json"))


@pytest.mark.parametrize(
    ("pkg_info", "static"),
    [
        ("Metadata-Version: 2.2\nName: x\nVersion: 1\nRequires-Dist: a\n", True),
        ("Metadata-Version: 2.4\nName: x\nVersion: 1\nDynamic: License\n", True),
        ("Metadata-Version: 2.1\nName: x\nVersion: 1\nRequires-Dist: a\n", False),
        ("Name: x\nVersion: 1\n", False),
        ("Metadata-Version: 2.2\nName: x\nVersion: 1\nDynamic: Requires-Dist\n", False),
        ("Metadata-Version: 2.3\nName: x\nVersion: 1\nDynamic: requires-python\n", False),
        ("Metadata-Version: 2.2\nName: x\nVersion: 1\nDynamic: Provides-Extra\n", False),
        ("Metadata-Version: two\nName: x\nVersion: 1\n", False),
        ("Metadata-Version: 3.0\nName: x\nVersion: 1\nRequires-Dist: a\n", False),
    ],
)
def test_which_pkg_info_is_static(pkg_info, static):
    assert pkg_info_is_static(parse_metadata(pkg_info.encode(), source="PKG-INFO")) is static


def _planned(out: str) -> dict[str, str]:
    return {p["name"]: p.get("after", p.get("version")) for p in json.loads(out)["packages"]}


@pytest.mark.slow
@needs_builds
def test_an_sdist_whose_pkg_info_is_not_static_is_resolved_from_its_build_backend_once(tmp_path, uv_env, capsys):
    old = extension_sdist(
        tmp_path / "old",
        "old-kernel",
        install_requires=("dep-old>=1",),
        files={"PKG-INFO": "Metadata-Version: 2.1\nName: old-kernel\nVersion: 1.0\n\n"},  # says nothing of setup.py's install_requires
    )
    dynamic = extension_sdist(
        tmp_path / "dyn",
        "dyn-kernel",
        install_requires=("dep-dyn>=1",),
        files={"PKG-INFO": "Metadata-Version: 2.2\nName: dyn-kernel\nVersion: 1.0\nDynamic: Requires-Dist\n\n"},
    )
    # static 2.2 PKG-INFO: trusted; its setup.py would fail if a backend were asked
    static = extension_sdist(tmp_path / "static", "static-kernel", install_requires=("dep-static>=1",), prelude="raise SystemExit('never run')")
    world = build_world(tmp_path, sdists=(old, dynamic, static))
    for dep in ("dep-old", "dep-dyn", "dep-static"):
        world.pypi(dep, "1.0")
    cache = tmp_path / "cache"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        flags = [*DECLARED, *common(srv, cache), "--format", "json"]

        # resolve: PKG-INFO 2.1 says no dependency; the backend's metadata plans setup.py's
        rc, out, err = run_cli(capsys, "resolve", "--with", "old-kernel", "--build", "old-kernel", *flags)
        assert rc == 0, err
        assert ASKED in err and _planned(out).get("dep-old") == "1.0" and _planned(out)["old-kernel"] == "1.0"
        records = _metadata_records(cache)
        assert len(records) == 1 and "dep-old>=1" in json.loads(records[0].read_text())["requires-dist"]

        # lock -o: the same plan, the backend asked nothing (cached by the sdist's sha256, torch, Python, platform)
        lock = tmp_path / "locks" / "pylock.node.toml"
        rc, _, err = run_cli(capsys, "lock", "--with", "old-kernel", "--build", "old-kernel", *DECLARED, *common(srv, cache), "-o", str(lock))
        assert rc == 0, err
        assert ASKED not in err and _metadata_records(cache) == records
        names = {p["name"] for p in load_toml(lock, error=LockFileError)["packages"]}
        assert {"old-kernel", "dep-old"} <= names

        # 2.2 with Dynamic: Requires-Dist: asked too
        rc, out, err = run_cli(capsys, "resolve", "--with", "dyn-kernel", "--build", "dyn-kernel", *flags)
        assert rc == 0, err
        assert ASKED in err and _planned(out).get("dep-dyn") == "1.0"
        assert len(_metadata_records(cache)) == 2

        # a static 2.2 PKG-INFO: no build environment, its own Requires-Dist
        rc, out, err = run_cli(capsys, "resolve", "--with", "static-kernel", "--build", "static-kernel", *flags)
        assert rc == 0, err
        assert "its metadata is dynamic" not in err and _planned(out).get("dep-static") == "1.0"
        assert len(_metadata_records(cache)) == 2

        # install --dry-run into a venv with the kept torch: the same dependencies planned, nothing asked again
        venv = make_venv(tmp_path / "venv", uv_env, torch_wheel(world))
        rc, out, err = run_cli(
            capsys, "install", "--python", venv, "--with", "old-kernel", "--build", "old-kernel", *common(srv, cache), "--dry-run", "--format", "json"
        )
        assert rc == 0, err
        assert "dep-old" in _planned(out)
        assert ASKED not in err and len(_metadata_records(cache)) == 2

        # install: built against the venv's torch, setup.py's dependency installed beside it
        rc, out, err = run_cli(capsys, "install", "--python", venv, "--with", "old-kernel", "--build", "old-kernel", *common(srv, cache))
        assert rc == 0, err
        assert ASKED not in err
        assert run_in(venv, "import importlib.metadata as m; print(m.version('dep-old'), m.version('old-kernel'))") == "1.0 1.0"


def _old_kernel(tmp_path: Path):
    return extension_sdist(
        tmp_path / "old", "old-kernel", install_requires=("dep-old>=1",), files={"PKG-INFO": "Metadata-Version: 2.1\nName: old-kernel\nVersion: 1.0\n\n"}
    )


@pytest.mark.slow
@needs_builds
def test_a_config_lock_asks_the_backend_and_check_online_sees_no_drift(tmp_path, uv_env, capsys, monkeypatch):
    """The config's ``build = ["NAME"]`` of an sdist whose PKG-INFO is not static: ``lock`` plans
    setup.py's dependencies; ``check --online`` re-resolves as the lock did (the backend's
    metadata, from the cache): no drift."""
    world = build_world(tmp_path, sdists=(_old_kernel(tmp_path),))
    world.pypi("dep-old", "1.0")
    project = tmp_path / "project"
    project.mkdir()
    cache = tmp_path / "cache"
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        (project / "gpu-stack.toml").write_text(
            f'indexes = {{ pytorch = "{srv.url}whl/", flashinfer = "{srv.url}fi/", pypi = "{srv.url}simple/" }}\n\n'
            "[defaults]\n"
            f'python = "{PYTHON}"\nplatform = "{HERE}"\nflashinfer = "none"\nwith = ["old-kernel"]\nbuild = ["old-kernel"]\n\n'
            "[[target]]\n"
            f'name = "node"\ninstalled = ["torch=={NIGHTLY}"]\noutput = ["pylock.node.toml"]\n'
        )
        monkeypatch.chdir(project)
        rc, _, err = run_cli(capsys, "lock", "--cache-dir", str(cache))
        assert rc == 0, err
        assert ASKED in err and len(_metadata_records(cache)) == 1
        names = {p["name"] for p in load_toml(project / "pylock.node.toml", error=LockFileError)["packages"]}
        assert {"old-kernel", "dep-old"} <= names
        shutil.rmtree(cache / "results-v1")  # the stored plans: check re-resolves for real
        rc, out, err = run_cli(capsys, "check", "--online", "--cache-dir", str(cache))
        assert rc == 0 and "drift" not in out + err, out + err
        assert ASKED not in err and len(_metadata_records(cache)) == 1

        # export uv of the config's target: setup.py's dependency among the exported constraints, nothing asked
        shutil.rmtree(cache / "results-v1")
        exported = tmp_path / "exported"
        exported.mkdir()
        (exported / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.10"\n')
        rc, out, err = run_cli(capsys, "export", "uv", "--project", str(exported), "--cache-dir", str(cache))
        assert rc == 0, out + err
        assert "dep-old==1.0" in tomllib.loads((exported / "pyproject.toml").read_text())["tool"]["uv"]["constraint-dependencies"]
        assert ASKED not in err and len(_metadata_records(cache)) == 1


@needs_builds
def test_an_sdist_whose_pkg_info_is_not_static_with_no_kept_torch_is_a_clear_error(tmp_path, uv_env, capsys):
    world = build_world(tmp_path, sdists=(_old_kernel(tmp_path),))
    world.pypi("dep-old", "1.0")
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, out, err = run_cli(
            capsys,
            "resolve",
            "--python",
            PYTHON,
            "--platform",
            HERE,
            "--cuda",
            "cu130",
            "--with",
            "old-kernel",
            "--build",
            "old-kernel",
            *common(srv, tmp_path / "cache"),
        )
    assert rc != 0 and out == "" and "its metadata is dynamic" in err and "--installed torch==VERSION" in err and "Traceback" not in err


@needs_builds
def test_a_backend_that_says_another_version_than_the_sdists_is_a_clear_error(tmp_path, uv_env, capsys):
    liar = extension_sdist(
        tmp_path / "liar",
        "liar-kernel",
        files={"PKG-INFO": "Metadata-Version: 2.1\nName: liar-kernel\nVersion: 1.0\n\n"},
        prelude='import setuptools\n_setup = setuptools.setup\nsetuptools.setup = lambda **kw: _setup(**{**kw, "version": "2.0"})',
    )
    world = build_world(tmp_path, sdists=(liar,))
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        rc, out, err = run_cli(capsys, "resolve", "--with", "liar-kernel", "--build", "liar-kernel", *DECLARED, *common(srv, tmp_path / "cache"))
    assert rc != 0 and out == "" and "says it is version 2.0, not 1.0" in err and "Traceback" not in err
