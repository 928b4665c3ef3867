"""No hidden state: a resolve keeps what it remembers in its own objects (the candidate factory, the
target's ``TargetFit``, the finder's ``ParseMemo``), never in a module. Two resolves at once in one
process give exactly the plans they give one after the other, and no module of ``src/`` holds a
memo of its own."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from support.paths import SRC
from support.server import IndexServer
from support.stack_world import ARM, build_story_world, resolve_with, torch_nightly

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.index.finder import Finder
from resolve_gpu_stack.model.codec import plan_to_dict
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.net.http import HttpFetcher
from resolve_gpu_stack.net.settings import FetchSettings, TransportSettings

NIGHTLY = "2.12.0.dev20260307+cu130"

# -- a lint: module-level memos --------------------------------------------------------------------

MEMO_DECORATORS = {"cache", "lru_cache", "functools.cache", "functools.lru_cache", "cached_property", "functools.cached_property"}
CONTAINERS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "collections.defaultdict", "collections.OrderedDict"}
MUTATORS = {"append", "extend", "add", "update", "setdefault", "pop", "popitem", "clear", "insert", "remove", "discard", "appendleft"}


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and ast.unparse(value.func) in CONTAINERS


def module_memos(source: str) -> list[str]:
    """What in a module keeps state across calls: a memo decorator, a ``global`` statement, or a
    module-level container the module changes after it is built (a constant table is fine)."""
    tree = ast.parse(source)
    found: list[str] = []
    containers: dict[str, int] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if targets and _is_container(node.value):  # type: ignore[union-attr]
            containers |= {t.id: node.lineno for t in targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for deco in node.decorator_list:
                name = ast.unparse(deco.func if isinstance(deco, ast.Call) else deco)
                if name in MEMO_DECORATORS:
                    found.append(f"{node.lineno}: @{name} on {node.name}")
        elif isinstance(node, ast.Global):
            found.append(f"{node.lineno}: global {', '.join(node.names)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in containers:
                found.append(f"{node.lineno}: {owner.id}.{node.func.attr}() on the module's {owner.id} (line {containers[owner.id]})")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            for target in node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in containers:
                    found.append(f"{node.lineno}: {target.value.id}[...] changed (the module's, line {containers[target.value.id]})")
    return found


def test_no_module_level_memo_in_src():
    found = {str(p.relative_to(SRC)): memos for p in sorted(SRC.rglob("*.py")) if (memos := module_memos(p.read_text()))}
    assert found == {}


def test_the_lint_finds_each_kind_of_memo():
    source = """
import functools
TABLE = {"a": 1}
_SEEN: dict[int, int] = {}
_LIST = []
_N = None

@functools.lru_cache(maxsize=4)
def parsed(x): return x

def remember(x):
    global _N
    _SEEN[x] = x
    _LIST.append(x)
    return TABLE["a"]
"""
    found = module_memos(source)
    assert len(found) == 4, found
    assert any("lru_cache" in f for f in found) and any("global _N" in f for f in found)
    assert any("_SEEN[...]" in f for f in found) and any("_LIST.append" in f for f in found)
    assert not any("TABLE" in f for f in found)  # a constant table is not a memo


# -- two resolves at once ---------------------------------------------------------------------------


def _requests() -> list[ResolveRequest]:
    x86 = declared_target("3.12", "x86_64-manylinux_2_28", [f"torch=={NIGHTLY}"])
    arm = declared_target("3.12", "aarch64-manylinux_2_28", [f"torch=={NIGHTLY}"])
    return [
        ResolveRequest.build(target=x86),
        ResolveRequest.build(target=arm),
        ResolveRequest.build(target=x86, with_=("torchvision",), flashinfer="0.6.4"),
        ResolveRequest.build(target=x86, torch="nightly", jit_cache=False),
    ]


def _at_once(fetcher: HttpFetcher, defs, requests: list[ResolveRequest], *, shared: bool) -> list[dict | BaseException | None]:
    """Each request resolved on a thread of its own, all started together; one finder shared by all
    (as a lock of many targets shares one), or one finder each."""
    finder = Finder(fetcher, defs)
    out: list[dict | BaseException | None] = [None] * len(requests)
    start = threading.Barrier(len(requests))

    def run(i: int) -> None:
        try:
            start.wait()
            mine = finder if shared else Finder(fetcher, defs)
            out[i] = plan_to_dict(resolve_with(mine, defs, requests[i]))
        except BaseException as exc:  # noqa: BLE001 - compared by the caller
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


# -- a lint: state found, not passed ----------------------------------------------------------------

# Each thread-local left, and why it is not passed: none may be added without a reason here.
THREAD_LOCALS_KEPT = {"net/transport.py": "_Attempt: whether this thread's attempt is a retry (a fresh connection), set by Transport.retrying"}


def ambient_state(source: str) -> list[str]:
    """What a module finds instead of being passed: a ``ContextVar``, or a ``threading.local``
    (made, or subclassed)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and (ast.unparse(node.func).split(".")[-1] == "ContextVar" or ast.unparse(node.func) == "threading.local"):
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
        if isinstance(node, ast.ClassDef) and any(ast.unparse(b) in ("threading.local", "local") for b in node.bases):
            found.append(f"line {node.lineno}: class {node.name}({', '.join(ast.unparse(b) for b in node.bases)})")
    return found


def test_the_session_and_the_deadline_are_passed_not_found():
    """A command's session (``cli/app.py`` hands it to ``run``) and a request's deadline
    (``Transport.open`` hands it to the client) are parameters: no ContextVar in ``src/``, and no
    thread-local but the ones listed, each with its reason."""
    found = {str(p.relative_to(SRC)): hits for p in sorted(SRC.rglob("*.py")) if (hits := ambient_state(p.read_text()))}
    assert set(found) == set(THREAD_LOCALS_KEPT), found
    assert ambient_state("import contextvars\nS = contextvars.ContextVar('s')\n") and ambient_state(
        "import threading\nclass L(threading.local):\n    x = 1\n"
    )  # the lint finds each kind


def test_resolves_in_parallel_threads_give_the_plans_they_give_in_turn(tmp_path: Path):
    world = build_story_world(tmp_path / "www")
    torch_nightly(world, "20260307", arch=ARM)
    requests = _requests()
    with IndexServer(world.root) as srv:
        world.write(srv.url)
        defs = load_definitions().with_index_urls(world.index_urls(srv.url))
        with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
            finder = Finder(fetcher, defs)
            in_turn = [plan_to_dict(resolve_with(finder, defs, r)) for r in requests]
        for shared in (True, False):
            with HttpFetcher(FetchSettings(transport=TransportSettings(timeout=10)), cache=None) as fetcher:
                assert _at_once(fetcher, defs, requests, shared=shared) == in_turn, f"shared finder: {shared}"
    assert len({str(p["packages"]) for p in in_turn}) == len(requests)  # four different plans, not one four times
