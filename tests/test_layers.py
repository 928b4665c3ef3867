"""The floor plan holds: every subpackage imports only from the floors below it, no floor has an
import circle inside it, the pure floors import no I/O library and touch no file, ``lock/`` and
``env/`` need nothing of the resolver, and ``--help`` stays light."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import SRC, TESTS

# Bottom to top. A module may import from its own floor and from any floor below it.
FLOORS = ["errors", "urls", "atomic", "pycache", "model", "data", "index", "scan", "rules", "resolver", "net", "lock", "env", "cli"]
PURE = ["errors", "urls", "model", "data", "index", "scan", "rules", "resolver"]
IO_MODULES = {"httpx", "urllib3", "subprocess", "socket", "requests", "urllib.request", "http.client", "shutil", "tempfile", "glob", "fcntl", "mmap"}
# The one pure module that reads files: the knowledge files this package ships (indexes/*.toml).
READS_BUNDLED_DATA = {"data/toml.py"}
# Calls that touch the file system: builtin open(), the os and os.path file functions, and pathlib's
# methods (names no other object we use has; ``.open`` and ``.resolve`` are left out: a zip member and a resolver have them too).
OS_FILE_CALLS = {
    "open",
    "remove",
    "unlink",
    "replace",
    "rename",
    "mkdir",
    "makedirs",
    "rmdir",
    "removedirs",
    "listdir",
    "scandir",
    "walk",
    "stat",
    "lstat",
    "fsync",
    "write",
    "read",
    "chmod",
    "chown",
    "link",
    "symlink",
    "utime",
    "truncate",
    "access",
}
OS_PATH_FILE_CALLS = {"exists", "isfile", "isdir", "islink", "getsize", "getmtime", "getctime", "getatime", "realpath", "samefile"}
PATH_FILE_METHODS = {
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "mkdir",
    "rmdir",
    "unlink",
    "touch",
    "iterdir",
    "rglob",
    "glob",
    "stat",
    "lstat",
    "exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "samefile",
    "chmod",
    "symlink_to",
    "hardlink_to",
    "readlink",
}


def floor_of(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if floor_of(p) in FLOORS)


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(absolute imports, floors reached by relative or package-absolute imports)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC).parent.parts
    absolute: set[str] = set()
    floors: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                absolute.add(alias.name)
                if alias.name.startswith("resolve_gpu_stack."):
                    floors.add(alias.name.split(".")[1])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                absolute.add(node.module)
                if node.module.startswith("resolve_gpu_stack."):
                    floors.add(node.module.split(".")[1])
            elif node.level:
                base = list(package[: len(package) - (node.level - 1)]) if node.level > 1 else list(package)
                target = base + (node.module.split(".") if node.module else [])
                if target:
                    floors.add(target[0])
                else:  # "from . import x" at the package root
                    floors |= {a.name for a in node.names}
    return absolute, floors


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_from_floors_below(path: Path) -> None:
    mine = FLOORS.index(floor_of(path))
    _, floors = imports(path)
    above = sorted(f for f in floors if f in FLOORS and FLOORS.index(f) > mine)
    assert not above, f"{path.relative_to(SRC)} (floor {floor_of(path)}) imports from a floor above it: {above}"


@pytest.mark.parametrize("path", [p for p in modules() if floor_of(p) in PURE], ids=lambda p: str(p.relative_to(SRC)))
def test_pure_floors_do_no_io(path: Path) -> None:
    absolute, floors = imports(path)
    assert not (absolute & IO_MODULES), f"{path.relative_to(SRC)} imports an I/O module"
    assert "atomic" not in floors, f"{path.relative_to(SRC)} imports the ground floor's file writer"


def file_io(path: Path) -> list[str]:
    """The file-system calls in a module, as ``line: call``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append(f"{node.lineno}: open()")
        elif isinstance(func, ast.Attribute):
            owner = ast.unparse(func.value)
            if (owner == "os" and func.attr in OS_FILE_CALLS) or (owner == "os.path" and func.attr in OS_PATH_FILE_CALLS):
                found.append(f"{node.lineno}: {owner}.{func.attr}()")
            elif owner not in ("os", "os.path") and func.attr in PATH_FILE_METHODS:
                found.append(f"{node.lineno}: .{func.attr}()")
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in modules() if floor_of(p) in PURE and str(p.relative_to(SRC)) not in READS_BUNDLED_DATA],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_pure_floors_touch_no_file(path: Path) -> None:
    calls = file_io(path)
    assert not calls, f"{path.relative_to(SRC)} touches the file system: {calls}"


def test_the_one_bundled_data_reader_is_a_pure_floor_module_that_reads() -> None:
    """The exception above is no blanket: each module it names exists, sits on a pure floor, and
    does read files (the one reader of the bundled knowledge files below the I/O floors)."""
    for name in READS_BUNDLED_DATA:
        path = SRC / name
        assert path.is_file() and floor_of(path) in PURE and file_io(path), name


def test_file_io_is_found() -> None:
    """The check above finds what it looks for (it is not vacuous)."""
    assert len(file_io(SRC / "data" / "toml.py")) >= 2  # read_bytes(), is_file()
    assert any("os.replace" in c for c in file_io(SRC / "atomic.py")) and any("open()" in c for c in file_io(SRC / "net" / "download.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of this package it imports (anywhere in it, lazily too)."""
    names = {module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = list(path.relative_to(SRC).parent.parts)
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                module = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.startswith("resolve_gpu_stack."):
                module = node.module.split(".")[1:]
            else:
                continue
            subs = {".".join([*module, a.name]) for a in node.names} & names.keys()
            edges |= subs or ({".".join(module)} & names.keys())
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles among modules of one floor (strongly connected components, Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w.split(".")[0] != v.split(".")[0]:
                continue  # another floor: the floor rule above
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_inside_a_floor() -> None:
    assert circles(import_graph()) == []
    assert circles({"net.a": {"net.b"}, "net.b": {"net.a"}, "net.c": {"net.a"}}) == [["net.a", "net.b"]]  # the check finds one


def commands_importing_commands(graph: dict[str, set[str]]) -> list[str]:
    """``cli.cmd_a -> cli.cmd_b`` for each command module that imports another (lazily too)."""
    command = re.compile(r"^cli\.cmd_\w+$")
    return sorted(f"{a} -> {b}" for a, edges in graph.items() if command.match(a) for b in edges if command.match(b) and b != a)


def test_no_command_imports_another() -> None:
    """What commands share (config-target selection, the uv sync warnings, downloads, the session)
    lives below them in cli/; a command module is never another's library."""
    assert commands_importing_commands(import_graph()) == []
    assert commands_importing_commands({"cli.cmd_a": {"cli.cmd_b", "cli.targets"}, "cli.cmd_b": set()}) == ["cli.cmd_a -> cli.cmd_b"]  # the check finds one


@pytest.mark.parametrize("floor", ["lock", "env"])
def test_lock_and_env_need_nothing_of_the_resolver(floor: str) -> None:
    """What they share with it (tag fit, version order, plan invariants) is on the rules floor."""
    using = sorted(str(p.relative_to(SRC)) for p in modules() if floor_of(p) == floor and "resolver" in imports(p)[1])
    assert not using, f"{floor}/ imports from resolver/: {using}"


def test_every_module_is_on_a_floor() -> None:
    stray = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if floor_of(p) not in FLOORS and p.parent == SRC and p.stem not in ("__init__", "__main__")]
    stray += [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if p.parent != SRC and floor_of(p) not in FLOORS]
    assert not stray, f"modules outside the floor plan: {stray}"


def test_help_imports_nothing_heavy():
    code = "import sys; from resolve_gpu_stack.cli import build_parser; build_parser().format_help(); print(sorted(m for m in ('http.client','ssl','resolvelib','rich','packaging') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


# The tests' own layout mirrors the house: a folder per floor of src/, e2e/ for the door tests that
# cross floors, support/ for what they share, and at the root only the checks of the whole house.
TEST_FOLDERS = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} | {"e2e"}
HOUSE_CHECKS = {"test_layers.py", "test_state.py", "test_docs.py", "test_schemas.py", "test_bytecode.py", "test_head_imports.py", "test_complexity.py"}


def test_every_test_file_lies_in_the_folder_of_its_floor() -> None:
    """A test file at the root of tests/ (beside the house's own checks), in support/ or in a folder
    that is no floor of src/ is out of place: move it where it belongs (testfloors-move.sh)."""
    stray = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if p.parent == TESTS and p.name not in HOUSE_CHECKS]
    stray += [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if p.parent != TESTS and p.relative_to(TESTS).parts[0] not in TEST_FOLDERS]
    assert not stray, f"test files outside the folders that mirror src/: {stray}"
    assert len({p.name for p in TESTS.rglob("test_*.py")}) == len(list(TESTS.rglob("test_*.py"))), "two test files of one name (pytest imports them by name)"


def test_no_test_module_is_imported_as_a_library() -> None:
    """What tests share lives in support/ (and its fixtures are registered in conftest.py): no test
    module, support module or conftest imports a test module or conftest."""
    found = []
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("importorskip", "import_module"):
                names = [a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            found += [f"{path.relative_to(TESTS)}: {n}" for n in names if n.split(".")[0].startswith("test_") or n == "conftest"]
    assert not found, f"test modules imported as libraries (move what they share to support/): {found}"
