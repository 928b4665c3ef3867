"""Nothing from outside is an option (issue 48, items 1 and 2): a lock edited as an attacker's
pull request would, a ``--build`` spec on the command line or in a config, never reaches git (or
any program) as an option, and git runs with our configuration only; the range-read child and the
console script never import a stdlib-shadowing file from the current folder.

Real git, the real console script, marker files that must never be created.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomlkit
from support.build_world import NIGHTLY, PYTHON, build_world, extension_repo, git, have_cxx, run_in, torch_wheel
from support.doors import index_flags
from support.install_world import _glibc_ok
from support.paths import SRC
from support.server import IndexServer

from resolve_gpu_stack.errors import BuildError
from resolve_gpu_stack.model import SourceOrigin
from resolve_gpu_stack.model.source import git_source_problem
from resolve_gpu_stack.net import process
from resolve_gpu_stack.net.gitsource import resolve_commit

TOOL = Path(sys.executable).with_name("resolve-gpu-stack")
UV = str(Path(sys.executable).with_name("uv"))


# -- the one module that starts processes ------------------------------------------------------

_STARTERS = {
    ("os", "system"),
    ("os", "popen"),
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("os", "fork"),
    ("os", "forkpty"),
    ("pty", "spawn"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
}


def process_starts(path: Path) -> list[str]:
    """Where a module imports ``subprocess`` or calls something that starts a process, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in ("subprocess", "multiprocessing")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("subprocess", "multiprocessing"):
            found.append(f"{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "asyncio", "pty"):
            names = {a.name for a in node.names}
            bad = [n for n in names if (node.module, n) in _STARTERS or n.startswith(("exec", "spawn"))]
            found += [f"{node.lineno}: from {node.module} import {n}" for n in bad]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, attr = node.value.id, node.attr
            if (owner, attr) in _STARTERS or (owner == "os" and attr.startswith(("exec", "spawn"))):
                found.append(f"{node.lineno}: {owner}.{attr}")
    return found


def test_only_net_process_starts_processes() -> None:
    """A lint: no ``subprocess``, ``os.system``, ``os.exec*``, ``os.spawn*``, ``os.popen``,
    ``os.posix_spawn*``, ``asyncio.create_subprocess*`` anywhere in src but ``net/process.py``."""
    offenders = {str(p.relative_to(SRC)): calls for p in sorted(SRC.rglob("*.py")) if p != SRC / "net" / "process.py" and (calls := process_starts(p))}
    assert offenders == {}


def test_the_lint_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os, asyncio\nimport subprocess as sp\nfrom os import execvp\nos.system('x')\nos.execv('a', [])\n"
        "os.spawnl(0, 'a')\nasyncio.create_subprocess_exec('a')\nos.posix_spawn('a', [], {})\n"
    )
    assert len(process_starts(bad)) == 7
    assert process_starts(SRC / "net" / "process.py")  # the one module does import subprocess


# -- the grammar of a git source ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "rev", "subdirectory", "words"),
    [
        ("--upload-pack=touch M;false", ".", None, "starts with '-'"),
        ("ext::sh -c touch% M", None, None, "not SCHEME://HOST/PATH"),
        ("fd::17", None, None, "not SCHEME://HOST/PATH"),
        ("git@github.example:org/repo.git", None, None, "not SCHEME://HOST/PATH"),
        ("-oProxyCommand=x:repo", None, None, "starts with '-'"),
        ("ssh://-oProxyCommand=touch%20M/x", None, None, "host or user starting with '-'"),
        ("ssh://user@-oProxyCommand=x/x", None, None, "host or user starting with '-'"),
        ("ssh://%2DoProxyCommand=x/x", None, None, "host or user starting with '-'"),
        ("ftp://host/x", None, None, "uses 'ftp'"),
        ("https:///x", None, None, "names no host"),
        ("https://host/x y", None, None, "not SCHEME://HOST/PATH"),
        ("https://host/x", "--output=M", None, "revision '--output=M'"),
        ("https://host/x", "-x", None, "revision '-x'"),
        ("https://host/x", "a..b", None, "revision 'a..b'"),
        ("https://host/x", ".", None, "revision '.'"),
        ("https://host/x", "HEAD@{1}", None, "revision 'HEAD@{1}'"),
        ("https://host/x", "v1 x", None, "revision 'v1 x'"),
        ("https://host/x", "", None, "revision ''"),
        ("https://host/x", "v1", "--output=M", "subdirectory '--output=M'"),
        ("https://host/x", "v1", "a/-x", "subdirectory 'a/-x'"),
        ("https://host/x", "v1", "/etc", "subdirectory '/etc'"),
        ("https://host/x", "v1", "a/../..", "subdirectory 'a/../..'"),
    ],
)
def test_a_git_source_outside_its_grammar_is_refused_naming_the_value(url: str, rev: str | None, subdirectory: str | None, words: str) -> None:
    problem = git_source_problem(url, rev, subdirectory)
    assert problem is not None and words in problem
    with pytest.raises(BuildError, match="git|subdirectory"):
        process.checked_git_source(url, rev, subdirectory)


@pytest.mark.parametrize(
    ("url", "rev", "subdirectory"),
    [
        ("https://host/org/repo.git", "v1.0", "python/sgl-kernel"),
        ("ssh://git@host/org/repo", "release/2.1", None),
        ("git://host/repo", "main", None),
        ("http://127.0.0.1:8080/repo", "a" * 40, None),
        ("file:///src/repo", None, "kernel"),
        ("file:///src/repo", "HEAD", None),
    ],
)
def test_a_sound_git_source_passes(url: str, rev: str | None, subdirectory: str | None) -> None:
    assert git_source_problem(url, rev, subdirectory) is None


# -- git's configuration and environment -------------------------------------------------------


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    git(repo, "tag", "v1")
    return repo


def test_git_holds_its_rules_even_when_the_grammar_is_bypassed(tmp_path: Path) -> None:
    """The config layer on its own: with the user's environment and global config allowing ``ext::``
    (and a GIT_DIR pointing elsewhere), git run by ``net/process.py`` still refuses the ext transport
    and an option-shaped URL after ``--``; no marker."""
    marker = tmp_path / "MARKER"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[protocol "ext"]\n\tallow = always\n[core]\n\thooksPath = /tmp\n')
    env = {
        **os.environ,
        "HOME": str(home),
        "GIT_ALLOW_PROTOCOL": "ext:file",
        "GIT_CONFIG_PARAMETERS": "'protocol.ext.allow'='always'",
        "GIT_DIR": str(tmp_path / "nowhere"),
    }
    # first: that environment really would run it without our rules
    plain = subprocess.run(["git", "ls-remote", f"ext::sh -c touch% {marker}"], env=env, capture_output=True, check=False, cwd=tmp_path)
    assert plain.returncode != 0 and marker.exists()
    marker.unlink()
    for url in (f"ext::sh -c touch% {marker}", f"--upload-pack=touch {marker};false"):
        with pytest.raises(BuildError):
            process.git(["ls-remote", "--", url, "HEAD"], env, "test")
        assert not marker.exists()
    # and a sound repository still resolves, GIT_DIR and all
    repo = _repo(tmp_path)
    assert resolve_commit(SourceOrigin(kind="git", url=f"file://{repo}", rev="v1"), env) == git(repo, "rev-parse", "HEAD")


def test_git_environment_keeps_only_what_git_needs() -> None:
    env = {
        "PATH": "/bin",
        "HOME": "/h",
        "SSH_AUTH_SOCK": "/s",
        "GIT_SSH_COMMAND": "ssh -i key",
        "https_proxy": "http://p:3128",
        "GIT_DIR": "/x",
        "GIT_WORK_TREE": "/x",
        "GIT_INDEX_FILE": "/x",
        "GIT_CONFIG_PARAMETERS": "'a'='b'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_EXEC_PATH": "/evil",
        "GIT_TEMPLATE_DIR": "/evil",
        "LD_PRELOAD": "/evil.so",
        "PYTHONPATH": "/evil",
    }
    got = process.git_environment(env)
    assert {k: got[k] for k in ("PATH", "HOME", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "https_proxy")} == {
        k: env[k] for k in ("PATH", "HOME", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "https_proxy")
    }
    assert (
        not {
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_COUNT",
            "GIT_EXEC_PATH",
            "GIT_TEMPLATE_DIR",
            "LD_PRELOAD",
            "PYTHONPATH",
        }
        & got.keys()
    )
    assert got["GIT_CONFIG_NOSYSTEM"] == "1" and got["GIT_CONFIG_GLOBAL"] == "/dev/null" and got["GIT_TERMINAL_PROMPT"] == "0"
    assert process.git_environment({"PATH": "/bin"})["GIT_SSH_COMMAND"] == "ssh -o BatchMode=yes"  # never a prompt on the terminal
    assert "GIT_SSH_COMMAND" not in process.git_environment({"PATH": "/bin", "GIT_SSH": "/usr/local/bin/myssh"})
    argv = process.git_argv(["ls-remote"])
    assert argv[-1] == "ls-remote" and "protocol.allow=never" in argv and "core.hooksPath=/dev/null" in argv and "core.fsmonitor=false" in argv


# -- attacks through the real CLI ----------------------------------------------------------------

needs_builds = pytest.mark.skipif(not (have_cxx() and _glibc_ok() and Path(UV).exists()), reason="needs Linux, g++ and uv")


def cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run([str(TOOL), *argv], cwd=cwd, capture_output=True, text=True, timeout=300, env=env, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@dataclass(frozen=True)
class Locked:
    root: Path
    lock: Path
    repo: Path
    marker: Path
    srv_url: str
    name: str
    torch: Path
    reference: str


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory):
    """A real lock of a package built from a git commit (``--build 'src-kernel @ git+file://...'``),
    its index served on 127.0.0.1 for the test's life."""
    if not (have_cxx() and _glibc_ok() and Path(UV).exists()):
        pytest.skip("needs Linux, g++ and uv")
    from support.building import HERE

    root = tmp_path_factory.mktemp("trust-process")
    src = extension_repo(root / "src")
    world = build_world(root)
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        lock = root / "pylock.node.toml"
        declared = ["--python", PYTHON, "--platform", HERE, "--installed", f"torch=={NIGHTLY}"]
        rc, out = cli(
            "lock",
            *declared,
            "--build",
            src.reference(),
            *index_flags(srv.url),
            "--flashinfer",
            "none",
            "--cache-dir",
            str(root / "cache"),
            "-o",
            str(lock),
            cwd=root,
        )
        assert rc == 0, out
        yield Locked(
            root=root, lock=lock, repo=src.repo, marker=root / "MARKER", srv_url=srv.url, name=src.name, torch=torch_wheel(world), reference=src.reference()
        )


def _hostile_lock(locked: Locked, tmp: Path, url: str, rev: str | None, subdirectory: str | None) -> Path:
    """The lock edited as an attacker would: the build row's origin, its sdist URL and the inputs'
    build source all consistent with the hostile values."""
    doc = tomlkit.parse(locked.lock.read_text())
    tool = doc["tool"]["resolve-gpu-stack"]
    row = next(p for p in tool["packages"] if p["name"] == locked.name)
    origin = row["sdist"]["origin"]
    origin["url"] = url
    for key, value in (("rev", rev), ("subdirectory", subdirectory)):
        if value is None:
            origin.pop(key, None)
        else:
            origin[key] = value
    reference = f"git+{url}@{origin['commit']}" + (f"#subdirectory={subdirectory}" if subdirectory else "")
    row["sdist"]["url"] = reference
    tool["inputs"]["build-sources"][locked.name]["source"] = reference
    out = tmp / locked.lock.name
    out.write_text(tomlkit.dumps(doc))
    return out


def _attacks(locked: Locked) -> list[tuple[str, str | None, str | None, str]]:
    """(url, rev, subdirectory, the value the error must name)."""
    m = locked.marker
    repo = f"file://{locked.repo}"
    return [
        (f"--upload-pack=touch {m};false", ".", None, "--upload-pack=touch"),
        (f"ext::sh -c touch% {m}", None, None, "ext::sh"),
        (repo, f"--upload-pack=touch {m}", None, "--upload-pack=touch"),
        (repo, "v1.0", f"--output={m}", f"--output={m}"),
        ("ssh://-oProxyCommand=touch%20" + str(m).replace("/", "%2F") + "/x", "v1.0", None, "-oProxyCommand"),
    ]


@pytest.mark.slow
@needs_builds
def test_a_hostile_lock_is_refused_at_every_door_and_runs_nothing(locked: Locked, tmp_path: Path) -> None:
    """check (the pre-commit gate), install --lock, wheelhouse: each refuses the edited lock with a
    clear error naming the value (exit 1: a lock that does not read), no traceback, no marker."""
    venv = tmp_path / "venv"
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(venv)], check=True, capture_output=True)
    for i, (url, rev, subdirectory, named) in enumerate(_attacks(locked)):
        folder = tmp_path / f"attack{i}"
        folder.mkdir()
        lock = _hostile_lock(locked, folder, url, rev, subdirectory)
        doors = {
            "check": ["check", str(lock)],
            "install --lock": ["install", "--lock", str(lock), "--python", str(venv / "bin" / "python"), "--cache-dir", str(folder / "cache")],
            "wheelhouse": ["wheelhouse", str(lock), "-o", str(folder / "house"), "--cache-dir", str(folder / "cache")],
        }
        for door, argv in doors.items():
            rc, out = cli(*argv, cwd=folder)
            assert rc == 1, (door, url, out)
            assert named in out, (door, out)
            assert "Traceback" not in out, out
            assert not locked.marker.exists(), (door, url)
        assert not (folder / "house").exists()


@pytest.mark.slow
@needs_builds
def test_a_hostile_build_spec_is_refused_on_the_command_line_and_in_a_config(locked: Locked, tmp_path: Path) -> None:
    """``--build 'NAME @ git+...'`` with a hostile URL, revision or subdirectory: resolve, lock and
    install refuse it before anything runs (exit 2, naming the value); a config's ``build`` too."""
    m = locked.marker
    repo = f"file://{locked.repo}"
    specs = [
        (f"src-kernel @ git+ext::sh%20-c%20touch%20{m}", "ext"),
        (f"src-kernel @ git+{repo}@--upload-pack=touch%20MARKER;false", "--upload-pack=touch"),
        (f"src-kernel @ git+{repo}@v1.0#subdirectory=--output={m}", f"--output={m}"),
        ("src-kernel @ git+ssh://-oProxyCommand=touch/x", "-oProxyCommand"),
    ]
    declared = ["--python", PYTHON, "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", *index_flags(locked.srv_url)]
    for i, (spec, named) in enumerate(specs):
        folder = tmp_path / f"spec{i}"
        folder.mkdir()
        cache = ["--cache-dir", str(folder / "cache")]
        for door, argv in {
            "resolve": ["resolve", *declared, "--build", spec, *cache],
            "lock": ["lock", *declared, "--build", spec, *cache, "-o", str(folder / "pylock.toml")],
            "install": ["install", "--python", sys.executable, "--build", spec, *cache, "--dry-run"],
        }.items():
            rc, out = cli(*argv, cwd=folder)
            assert rc == 2, (door, spec, out)
            assert named in out and "Traceback" not in out, (door, out)
            assert not m.exists() and not (folder / "MARKER").exists(), (door, spec)
        config = folder / "gpu-stack.toml"
        config.write_text(
            f'indexes = {{ pytorch = "{locked.srv_url}whl/", flashinfer = "{locked.srv_url}fi/", pypi = "{locked.srv_url}simple/" }}\n\n'
            f'[defaults]\npython = "{PYTHON}"\nplatform = "x86_64-manylinux_2_28"\nflashinfer = "none"\nbuild = [{tomlkit.string(spec).as_string()}]\n\n'
            f'[[target]]\nname = "node"\ninstalled = ["torch=={NIGHTLY}"]\noutput = ["pylock.node.toml"]\n'
        )
        rc, out = cli("lock", *cache, cwd=folder)
        assert rc == 2, (spec, out)
        assert named in out and "Traceback" not in out, out
        assert not m.exists() and not (folder / "pylock.node.toml").exists()


@pytest.mark.slow
@needs_builds
def test_a_tree_naming_a_filter_and_a_user_config_defining_it_run_nothing(locked: Locked, tmp_path: Path) -> None:
    """A repository whose ``.gitattributes`` names a filter that the user's own ``~/.gitconfig``
    defines as a command (plain ``git archive`` runs it), plus a hook path and an fsmonitor there:
    ``--build`` from it fetches the tree with none of them run, and the tree is as committed."""
    marker = tmp_path / "MARKER"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        f'[filter "evil"]\n\tsmudge = "touch {marker}; cat"\n\tclean = cat\n\trequired = true\n'
        f'[core]\n\tfsmonitor = "touch {marker}"\n\thooksPath = {tmp_path / "hooks"}\n'
    )
    (tmp_path / "hooks").mkdir()
    for hook in ("post-checkout", "post-merge", "reference-transaction"):
        (tmp_path / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (tmp_path / "hooks" / hook).chmod(0o755)
    src = extension_repo(tmp_path / "src")
    (src.repo / ".gitattributes").write_text("* filter=evil\n")
    git(src.repo, "add", "-A")
    git(src.repo, "commit", "-q", "-m", "attributes")
    git(src.repo, "tag", "-f", src.tag)
    # that configuration really runs the filter for plain git
    plain = subprocess.run(
        ["git", "-C", str(src.repo), "archive", "--format=tar", "HEAD"], env={**os.environ, "HOME": str(home)}, capture_output=True, check=False
    )
    assert plain.returncode == 0 and marker.exists()
    marker.unlink()
    declared = ["--python", PYTHON, "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={NIGHTLY}", "--flashinfer", "none"]
    rc, out = cli(
        "resolve",
        *declared,
        *index_flags(locked.srv_url),
        "--build",
        src.reference(),
        "--cache-dir",
        str(tmp_path / "cache"),
        cwd=tmp_path,
        env={**os.environ, "HOME": str(home)},
    )
    assert "Traceback" not in out, out
    assert not marker.exists(), out
    assert rc == 0 and f"{src.name} {src.version}: source" in out, out


@pytest.mark.slow
@needs_builds
def test_a_build_from_a_folder_with_stdlib_shadowing_files_runs_none_of_them(locked: Locked, tmp_path: Path, uv_env: dict[str, str]) -> None:
    """``install --build`` run in a cloned repository holding ``sysconfig.py``, ``queue.py`` and
    the like: the build environment's probes (its site folder, its torch) and the range child start
    isolated; the package is built and imports; none of those files ran."""
    from support.hostile_inputs import hostile_folder
    from support.install_world import make_venv

    clone = tmp_path / "clone"
    ran = hostile_folder(clone)
    for name in ("sysconfig", "json", "tempfile"):
        (clone / f"{name}.py").write_text(f"open({str(ran / name)!r}, 'w').close()\nraise ImportError('shadowed {name} ran')\n")
    python = make_venv(tmp_path / "venv", uv_env, locked.torch)
    argv = ["install", "--python", python, "--build", locked.reference, *index_flags(locked.srv_url), "--flashinfer", "none"]
    rc, out = cli(*argv, "--cache-dir", str(tmp_path / "cache"), cwd=clone)
    assert sorted(p.name for p in ran.iterdir()) == [], out
    assert rc == 0 and "Traceback" not in out, out
    assert run_in(python, "import src_kernel; print(src_kernel.add(2, 3))")


HOSTILE_UV_TOML = """\
required-version = ">=99"
python-preference = "only-managed"
python-downloads = "never"
index-url = "http://127.0.0.1:9/simple"
link-mode = "symlink"
"""


@pytest.mark.slow
@needs_builds
def test_a_build_from_a_folder_with_a_hostile_uv_toml_is_not_shaped_by_it(locked: Locked, tmp_path: Path, uv_env: dict[str, str]) -> None:
    """``install --build`` run in a project whose ``uv.toml`` asks for another uv, managed Pythons
    only and an index on a closed port: every uv run of the build (its venv, its requirements, the
    build, the install into the target) passes ``--no-config``; the package is built and imports."""
    from support.install_world import make_venv

    project = tmp_path / "project"
    project.mkdir()
    (project / "uv.toml").write_text(HOSTILE_UV_TOML)
    python = make_venv(tmp_path / "venv", uv_env, locked.torch)
    # that configuration really stops a uv run from this folder that reads it
    plain = subprocess.run(
        [UV, "venv", "-q", "--python", python, str(tmp_path / "plain")], cwd=project, env=uv_env, capture_output=True, text=True, check=False
    )
    assert plain.returncode != 0 and "required uv version" in plain.stderr.lower(), plain.stderr
    argv = ["install", "--python", python, "--build", locked.reference, *index_flags(locked.srv_url), "--flashinfer", "none"]
    rc, out = cli(*argv, "--cache-dir", str(tmp_path / "cache"), cwd=project)
    assert rc == 0 and "Traceback" not in out, out
    assert run_in(python, "import src_kernel; print(src_kernel.add(2, 3))")
    assert (project / "uv.toml").read_text() == HOSTILE_UV_TOML and sorted(p.name for p in project.iterdir()) == ["uv.toml"]
