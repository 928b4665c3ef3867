"""The console script keeps its bytecode where an install has none and PYTHONDONTWRITEBYTECODE=1
forbids writing it beside the sources (issue 23 item 2): under $XDG_CACHE_HOME/resolve-gpu-stack/
bytecode, written by the first run and read by the next; never beside the sources, and not at all
when the user chose a PYTHONPYCACHEPREFIX or the install compiled its bytecode. Real processes
over a copy of the package laid out as an installer without --compile-bytecode leaves it."""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import SRC

TAG = sys.implementation.cache_tag


@pytest.fixture
def install(tmp_path: Path) -> Path:
    """The package copied without any bytecode (as ``uv pip install`` leaves it)."""
    site = tmp_path / "site"
    shutil.copytree(SRC, site / "resolve_gpu_stack", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(SRC.parents[1] / "indexes", site / "resolve_gpu_stack" / "_indexes", ignore=shutil.ignore_patterns("snapshots"))
    return site


def run_program(site: Path, tmp_path: Path, *args: str, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "xdg"), **env_extra)
    code = "import sys; from resolve_gpu_stack.__main__ import run; sys.exit(run())"
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)


def kept(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "xdg" / "resolve-gpu-stack" / "bytecode").rglob("*.pyc"))


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
def test_an_install_without_bytecode_compiles_once_into_the_cache(install: Path, tmp_path: Path) -> None:
    first = run_program(install, tmp_path, "--help")
    assert first.returncode == 0, first.stderr
    written = kept(tmp_path)
    ours = [p for p in written if "resolve_gpu_stack" in p.parts]
    assert any(p.name == f"app.{TAG}.pyc" for p in ours) and any(p.name == f"commands.{TAG}.pyc" for p in ours)  # every command's flags
    assert any(p.name == f"argparse.{TAG}.pyc" for p in written)  # what loads after it, the standard library's too
    assert not list(install.rglob("__pycache__")), "nothing is written beside the sources"
    stamps = {p: p.stat().st_mtime_ns for p in written}
    second = run_program(install, tmp_path, "--help")
    assert second.returncode == 0 and second.stdout == first.stdout
    assert {p: p.stat().st_mtime_ns for p in kept(tmp_path)} == stamps, "the second run reads what the first kept"


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
def test_left_alone_with_a_prefix_of_the_users_or_an_install_that_compiled(install: Path, tmp_path: Path) -> None:
    mine = tmp_path / "my-prefix"
    done = run_program(install, tmp_path, "--version", PYTHONPYCACHEPREFIX=str(mine))
    assert done.returncode == 0, done.stderr
    assert kept(tmp_path) == [] and not list(mine.rglob("*.pyc"))  # PYTHONDONTWRITEBYTECODE is theirs to set
    assert compileall.compile_dir(str(install), quiet=1)
    done = run_program(install, tmp_path, "--version")
    assert done.returncode == 0 and kept(tmp_path) == []


def test_writing_allowed_is_left_alone(install: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")}
    env.update(PYTHONPATH=str(install), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    code = "import sys; from resolve_gpu_stack.__main__ import run; sys.exit(run())"
    done = subprocess.run([sys.executable, "-c", code, "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert kept(tmp_path) == []


# -- the folder is the user's alone (issue 32, N17) ----------------------------------------------
PLANTED = "import pathlib, os; pathlib.Path(os.environ['PLANT_MARK']).write_text('ran')\n"


def plant(install: Path, tmp_path: Path) -> Path:
    """Write a ``.pyc`` for ``resolve_gpu_stack/cli/__init__.py`` into the bytecode folder: an
    unchecked-hash pyc, which Python runs without looking at the source. The marker it writes."""
    import py_compile

    source = install / "resolve_gpu_stack" / "cli" / "__init__.py"
    folder = tmp_path / "xdg" / "resolve-gpu-stack" / "bytecode"
    target = folder / source.parent.relative_to(source.anchor) / f"__init__.{TAG}.pyc"
    evil = tmp_path / "evil.py"
    evil.write_text(PLANTED)
    target.parent.mkdir(parents=True, exist_ok=True)
    py_compile.compile(str(evil), cfile=str(target), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return tmp_path / "mark"


def test_the_bytecode_folder_is_made_0700_whatever_the_umask(install: Path, tmp_path: Path) -> None:
    code = "import os, sys; os.umask(0o002); from resolve_gpu_stack.__main__ import run; sys.exit(run())"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPYCACHEPREFIX",)}
    env.update(PYTHONPATH=str(install), PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "xdg"))
    done = subprocess.run([sys.executable, "-c", code, "--version"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for folder in (tmp_path / "xdg", tmp_path / "xdg" / "resolve-gpu-stack", tmp_path / "xdg" / "resolve-gpu-stack" / "bytecode"):
        assert folder.stat().st_mode & 0o777 == 0o700, folder
    assert kept(tmp_path)  # and it is used


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
def test_a_planted_pyc_runs_only_from_a_folder_of_the_users_own(install: Path, tmp_path: Path) -> None:
    """The control: a pyc in the user's own 0700 folder is what Python runs (so the cases below show the guard)."""
    mark = plant(install, tmp_path)
    for folder in [tmp_path / "xdg", *(tmp_path / "xdg").rglob("*")]:
        if folder.is_dir():
            folder.chmod(0o700)
    done = run_program(install, tmp_path, "--version", PLANT_MARK=str(mark))
    assert mark.exists(), done.stderr


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="planting as another owner needs root")
@pytest.mark.parametrize("which", ["bytecode", "resolve-gpu-stack"])
def test_a_pyc_planted_by_another_owner_is_never_run(install: Path, tmp_path: Path, which: str) -> None:
    import pwd

    mark = plant(install, tmp_path)
    nobody = pwd.getpwnam("nobody").pw_uid
    root = tmp_path / "xdg" / "resolve-gpu-stack"
    owned = root if which == "resolve-gpu-stack" else root / "bytecode"
    for path in [owned, *owned.rglob("*")]:
        os.chown(path, nobody, -1)
        if path.is_dir():
            path.chmod(0o700)
    done = run_program(install, tmp_path, "--version", "-v", PLANT_MARK=str(mark))
    assert not mark.exists(), "the planted pyc ran"
    assert done.returncode == 0, done.stderr
    assert f"{owned} belongs to uid {nobody}" in done.stderr  # -v says why


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
@pytest.mark.parametrize("mode", [0o775, 0o777, 0o720], ids=oct)
def test_a_pyc_in_a_folder_others_may_write_is_never_run(install: Path, tmp_path: Path, mode: int) -> None:
    mark = plant(install, tmp_path)
    folder = tmp_path / "xdg" / "resolve-gpu-stack" / "bytecode"
    folder.chmod(mode)
    done = run_program(install, tmp_path, "--version", PLANT_MARK=str(mark))
    assert not mark.exists(), "the planted pyc ran"
    assert done.returncode == 0 and done.stderr == ""  # without -v: quiet, from source
    assert folder.stat().st_mode & 0o777 == mode  # the user's folder is not changed behind their back
    loud = run_program(install, tmp_path, "--version", "--verbose", PLANT_MARK=str(mark))
    assert not mark.exists() and f"is writable by others (mode {mode:o})" in loud.stderr


# -- the methods @dataclass writes, compiled once (issue 53, second CPU pass) --------------------
def methods_file(tmp_path: Path) -> Path:
    found = sorted((tmp_path / "xdg" / "resolve-gpu-stack" / "bytecode").rglob(f"dataclass-methods.{TAG}.marshal"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
def test_the_dataclass_methods_are_kept_by_the_first_run_and_read_by_the_next(install: Path, tmp_path: Path) -> None:
    first = run_program(install, tmp_path, "resolve", "--help")
    assert first.returncode == 0, first.stderr
    kept_file = methods_file(tmp_path)
    assert "resolve_gpu_stack" in kept_file.parts and kept_file.stat().st_mode & 0o077 == 0  # beside the package's own bytecode, the user's alone
    stamp = kept_file.stat().st_mtime_ns
    second = run_program(install, tmp_path, "resolve", "--help")
    assert second.returncode == 0 and second.stdout == first.stdout
    assert kept_file.stat().st_mtime_ns == stamp, "every text the second run needed was kept: nothing written"
    assert not list(install.rglob("*.marshal")), "nothing beside the sources"


@pytest.mark.skipif(TAG is None, reason="this interpreter writes no bytecode")
@pytest.mark.parametrize("content", [b"", b"not a table at all", b"\x00" * 64, "magic, then not a table"])
def test_a_methods_file_that_is_not_this_interpreters_table_is_not_read_and_is_written_again(install: Path, tmp_path: Path, content: bytes | str) -> None:
    import importlib.util
    import marshal

    first = run_program(install, tmp_path, "--help")
    assert first.returncode == 0, first.stderr
    kept_file = methods_file(tmp_path)
    kept_file.write_bytes(importlib.util.MAGIC_NUMBER + marshal.dumps([1, 2]) if isinstance(content, str) else content)
    again = run_program(install, tmp_path, "--help")
    assert again.returncode == 0 and again.stdout == first.stdout and again.stderr == first.stderr
    table = marshal.loads(kept_file.read_bytes()[len(importlib.util.MAGIC_NUMBER) :])
    assert isinstance(table, dict) and table, "the run wrote a good table in its place"


def test_a_class_made_from_kept_code_behaves_as_one_compiled_from_its_text(tmp_path: Path) -> None:
    """Two processes each make the same frozen, slotted, ordered dataclass: the second from the
    code the first kept. Everything the generated methods do is the same."""
    script = r"""
import dataclasses, json, sys
from resolve_gpu_stack.__main__ import MethodCode
memo = MethodCode.attach(sys.argv[1])

@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Row:
    name: str
    version: tuple[int, ...] = (1, 0)
    notes: list[str] = dataclasses.field(default_factory=list, compare=False, repr=False)

a, b = Row(name="torch"), Row(name="torch", version=(2, 1), notes=["x"])
try:
    a.name = "other"
    frozen = "no error"
except dataclasses.FrozenInstanceError as exc:
    frozen = type(exc).__name__
try:
    Row("positional")
    kw = "no error"
except TypeError as exc:
    kw = str(exc)
facts = [repr(a), repr(b), a == Row(name="torch", notes=["y"]), a < b, hash(a) == hash(Row(name="torch")), frozen, kw, Row.__init__.__code__.co_filename, a.notes]

import collections, typing
class Pin(typing.NamedTuple):
    name: str
    version: str = "1.0"
Pair = collections.namedtuple("Pair", "left right", defaults=[None])
try:
    Pin()
    missing = "no error"
except TypeError as exc:
    missing = str(exc)
p = Pin("torch")
facts += [repr(p), p._replace(version="2.0"), tuple(Pin._make(["a", "b"])), Pin.__new__.__code__.co_filename, Pin.__new__.__name__, missing]
facts += [repr(Pair(1)), Pair(1, 2) == (1, 2), Pair._field_defaults, Pair.__new__.__doc__]
memo.detach()
print(json.dumps({"facts": facts, "compiled": memo.compiled, "saved": memo.save()}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(SRC.parent)
    init = tmp_path / "pkg" / "__init__.py"
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    init.write_text("")

    def make() -> dict:
        done = subprocess.run([sys.executable, "-c", script, str(init)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        import json

        return json.loads(done.stdout)

    first, second = make(), make()
    assert first["compiled"] > 0 and first["saved"] is True  # compiled here, and kept
    assert second["compiled"] == 0 and second["saved"] is False  # every method from the kept code
    assert second["facts"] == first["facts"]
    assert first["facts"][:5] == ["Row(name='torch', version=(1, 0))", "Row(name='torch', version=(2, 1))", True, True, True]
    assert first["facts"][5] == "FrozenInstanceError" and "takes 1 positional argument" in first["facts"][6]
    assert first["facts"][9:13] == ["Pin(name='torch', version='1.0')", ["torch", "2.0"], ["a", "b"], "<string>"]  # namedtuple's __new__ too
    assert first["facts"][13] == "__new__" and "missing 1 required positional argument: 'name'" in first["facts"][14]
    assert first["facts"][15:] == ["Pair(left=1, right=None)", True, {"right": None}, "Create new instance of Pair(left, right)"]


PATTERNS_SCRIPT = r"""
import json, re, sys
from resolve_gpu_stack.__main__ import MethodCode
memo = MethodCode.attach(sys.argv[1])
if sys.argv[2] == "tamper":  # every kept pattern's engine code made invalid
    for key, parts in list(memo.kept.items()):
        if isinstance(parts, tuple):
            memo.kept[key] = (parts[0], [999999] * len(parts[1]), *parts[2:])
if sys.argv[2] == "unlike" and memo.patterns is not None:  # an interpreter whose re internals are shaped otherwise
    memo.kept = {k: v for k, v in memo.kept.items() if not isinstance(v, tuple)}
    def unlike(*args):
        raise AttributeError("'SubPattern' object has no attribute 'state'")
    memo.patterns.parts = unlike
made = [
    (r"(?P<name>[A-Za-z][A-Za-z0-9._-]*)(?:\[(?P<extras>[^\]]*)\])?", 0, "torch[cuda]>=2"),
    (r"(?i)^Requires-Dist:\s*(\S+)", re.MULTILINE, "x\nrequires-dist: numpy\n"),
    (rb"\x00(lib[A-Za-z0-9_.+\-]{0,255}?\.so(?:\.[0-9]+)*)(?=\x00)", 0, b"\x00libtorch.so.2\x00"),
    (r"(?<=v)\d+ # a version after v", re.VERBOSE, "v12"),
    (r"straße", re.IGNORECASE, "STRASSE Straße"),
]
original = memo.patterns.original if memo.patterns is not None else None
facts = []
for text, flags, subject in made:
    p = re.compile(text, flags)
    m = p.search(subject)
    facts.append([p.pattern if isinstance(p.pattern, str) else p.pattern.decode("latin-1"), int(p.flags), p.groups, dict(p.groupindex),
                  None if m is None else [str(g) for g in m.groups()], m and str(m.group(0)), original is not None and p == original(text, flags)])
memo.detach()
print(json.dumps({"facts": facts, "compiled": memo.compiled, "saved": memo.save(), "hooked": original is not None}))
"""


def test_a_pattern_made_from_kept_parts_is_the_pattern_re_compiles(tmp_path: Path) -> None:
    """Two processes compile the same patterns (text and bytes, named groups, inline and given
    flags, a lookbehind, verbose, case folding): the second from the parts the first kept, without
    parsing. Each is equal (``==``: flags and engine code) to what ``re`` compiles, and matches the
    same. Kept parts the engine refuses (a tampered table) are compiled again, never used; where
    ``re``'s internals are not shaped as expected, its own patterns are used and nothing is kept."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(SRC.parent)
    init = tmp_path / "pkg" / "__init__.py"
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    init.write_text("")

    def make(how: str = "") -> dict:
        done = subprocess.run([sys.executable, "-c", PATTERNS_SCRIPT, str(init), how], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        import json

        return json.loads(done.stdout)

    first = make()
    if not first["hooked"]:
        pytest.skip("this interpreter's re has no re._compiler (Python 3.10): patterns are left alone")
    second, tampered, unlike = make(), make("tamper"), make("unlike")
    assert unlike["facts"] == first["facts"] and unlike["compiled"] == 0  # re's own patterns, nothing kept
    assert first["compiled"] >= len(first["facts"]) and first["saved"] is True
    assert second["compiled"] == 0 and second["saved"] is False  # every pattern from its kept parts
    assert second["facts"] == first["facts"] == tampered["facts"]
    assert tampered["compiled"] >= len(first["facts"])  # refused by the engine, compiled by re again
    assert all(fact[-1] is True for fact in first["facts"])  # equal to re's own
    assert first["facts"][0][3:5] == [{"name": 1, "extras": 2}, ["torch", "cuda"]]
    assert first["facts"][4][5] == "Straße"


def test_a_pattern_whose_text_changes_from_run_to_run_only_in_order_is_not_kept_again(tmp_path: Path) -> None:
    """``email``'s header parser joins character classes from sets, so their order (and the text)
    follows each process's string hashing. Such a text makes the same code as the one kept: it is
    compiled (and matches), but not kept again, so the file is not written at every start."""
    script = r"""
import json, re, sys
from resolve_gpu_stack.__main__ import MethodCode
memo = MethodCode.attach(sys.argv[1])
chars = sys.argv[2]
p = re.compile("[^" + re.escape(chars) + "]+")
print(json.dumps({"match": p.match("abc" + chars).group(), "compiled": memo.compiled, "saved": memo.save(), "hooked": memo.patterns is not None}))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(SRC.parent)
    init = tmp_path / "pkg" / "__init__.py"
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    init.write_text("")

    def make(chars: str) -> dict:
        done = subprocess.run([sys.executable, "-c", script, str(init), chars], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        import json

        return json.loads(done.stdout)

    first = make('(,:"?<@)=/];>')
    if not first["hooked"]:
        pytest.skip("this interpreter's re has no re._compiler (Python 3.10): patterns are left alone")
    assert first["saved"] is True and first["match"] == "abc"
    again = make('>;]/=)@<?":,(')  # the same class, another order
    assert again == {"match": "abc", "compiled": 0, "saved": False, "hooked": True}
    other = make('(,:"?<@)=/];>!')  # another class: kept
    assert other["compiled"] == 1 and other["saved"] is True
