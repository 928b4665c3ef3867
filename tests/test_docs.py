"""The docs stay true (issue 31, item 5): the README and every page under docs/.

- the reference pages generated from the program (``cli/reference.py``: the settings table and
  the parsers) are the committed ones: a setting or a flag added without regenerating them fails;
- every ``resolve-gpu-stack`` command of a ``sh`` block parses with the real parser, its settings
  with the settings table's parsers (a flag renamed or a value no longer accepted fails);
- every command that runs offline (from a bundled snapshot) runs: a plan or a verdict, no traceback;
- every relative link names a file that exists.
"""

from __future__ import annotations

import re
import shlex

import pytest
from support.paths import REPO

from resolve_gpu_stack.cli import reference
from resolve_gpu_stack.cli import settings as S
from resolve_gpu_stack.cli.app import COMMANDS, build_parser, main

PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])


def commands() -> list[tuple[str, str, int | None]]:
    """(page, command line, exit code) of every ``resolve-gpu-stack`` command in a ``sh`` block
    (continuation lines joined, a pipe's later commands and the trailing comment dropped; a comment
    ``# exit N`` is the exit code the page promises, else none: a plan, a verdict or a check)."""
    out = []
    for page in PAGES:
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                promised = re.search(r"#\s*exit (\d)\b", line)
                words = shlex.split(line.split(" | ", 1)[0], comments=True)
                if words and words[0] == "resolve-gpu-stack":
                    out.append((str(page.relative_to(REPO)), shlex.join(words), int(promised.group(1)) if promised else None))
    return out


COMMAND_LINES = commands()


def test_the_reference_pages_are_generated_from_the_program():
    for name, text in reference.pages().items():
        committed = (REPO / "docs" / "reference" / name).read_text(encoding="utf-8")
        assert committed == text, f"docs/reference/{name} is stale: run `python -m resolve_gpu_stack.cli.reference docs/reference`"


def test_every_setting_and_every_command_is_in_the_reference():
    settings_page, commands_page = reference.settings_page(), reference.commands_page()
    assert all(f"`{s.key}`" in settings_page and s.flag in settings_page for s in S.SETTINGS)
    assert all(f"## `{name}`" in commands_page for name in COMMANDS)


def test_the_docs_have_command_blocks():
    pages = {page for page, _, _ in COMMAND_LINES}
    assert "README.md" in pages and len(COMMAND_LINES) >= 20


@pytest.mark.parametrize(("page", "line", "promised"), COMMAND_LINES, ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(COMMAND_LINES)])
def test_every_documented_command_parses(page: str, line: str, promised: int | None):
    argv = shlex.split(line)[1:]
    if argv and argv[0] in ("-V", "--version"):
        assert main(argv) == 0
        return
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["resolve", *argv]
    parser = build_parser(argv[0])
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit as exc:
        if promised == 2 and exc.code == 2:
            return  # the page shows a usage error on purpose, and says so
        if exc.code == 0 and ("-h" in argv or "--help" in argv):
            return
        pytest.fail(f"{page}: `{line}` does not parse (exit {exc.code})")
    assert not unknown, f"{page}: `{line}`: unknown arguments {unknown}"
    S.typed(args)  # every setting's value parsed as the command's edge parses it (a UsageError fails)


# a usage error a page shows on purpose (`# exit 2`) is held by the parse test above
OFFLINE = [(p, line, promised) for p, line, promised in COMMAND_LINES if "--snapshot indexes/snapshots/" in line and promised != 2]


@pytest.mark.parametrize(("page", "line", "promised"), OFFLINE, ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(OFFLINE)])
def test_every_offline_command_runs(page: str, line: str, promised: int | None, tmp_path, monkeypatch, capsys):
    """Run where a user runs it (a folder of their own, the snapshot named from the checkout); a
    command the page says fails must fail with the exit code it names."""
    monkeypatch.chdir(tmp_path)
    argv = [w.replace("indexes/snapshots/", f"{REPO}/indexes/snapshots/") for w in shlex.split(line)[1:]]
    if "--cache-dir" not in argv:
        argv += ["--cache-dir", str(tmp_path / "cache")]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    _, err = capsys.readouterr()
    expected = (promised,) if promised is not None else (0, 1)
    assert code in expected and "Traceback" not in err, f"{page}: `{line}` -> {code}: {err}"


# a usage error a page shows on purpose (`# exit 2`, read before any index): run, with that exit code
SAID_TO_FAIL = [(p, line, promised) for p, line, promised in COMMAND_LINES if promised == 2 and "--snapshot" not in line]


@pytest.mark.parametrize(("page", "line", "promised"), SAID_TO_FAIL, ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(SAID_TO_FAIL)])
def test_every_failure_a_page_shows_fails_as_it_says(page: str, line: str, promised: int, tmp_path, monkeypatch, capsys):
    """`inspect README.md`, `install --lock URL`: the exit code the page names, a message, no traceback."""
    monkeypatch.chdir(tmp_path)
    try:
        code = main(shlex.split(line)[1:])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    _, err = capsys.readouterr()
    assert code == promised and err.strip() and "Traceback" not in err, f"{page}: `{line}` -> {code}: {err}"


# every other line of a guide's or the README's ``sh`` block, and the test that runs it (the file, and
# what in it runs the line): a block added without a test fails below
OTHER_LINES = {
    "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/resolve-gpu-stack": ("test_docs.py", "test_every_offline_command_runs"),
    "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest": ("test_docs.py", "the suite itself"),
    "uv pip install --python /opt/venv/bin/python -r": ("e2e/test_wheelhouse_e2e.py", '"-r", str(out / "pylock.x86.toml")'),
    "uv pip install -c constraints-vllm.txt --overrides overrides-vllm.txt": ("e2e/test_kept_closure.py", '"-c", str(constraints), "--overrides"'),
    "URL=https://github.com/OWNER/resolve-gpu-stack": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "cat > .pre-commit-config.yaml": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "repos:": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "- repo: $URL": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "rev: $(git ls-remote": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "hooks:": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "- id: resolve-gpu-stack-check": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "EOF": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "pre-commit run --all-files": ("e2e/test_precommit.py", "test_the_remote_route_with_a_commit_as_rev_on_a_copy_with_no_tags"),
    "python -m venv ~/gpu": ("support/install_world.py", "def make_venv"),
    "~/gpu/bin/pip install torch": ("support/install_world.py", "def make_venv"),
    ".venv/bin/python indexes/verify_today.py": ("e2e/test_today.py", "test_verify_today_checks_each_verdict_against_binutils"),
    "uv init demo && cd demo": ("e2e/test_export_uv.py", "as `uv init` writes it"),
    "uv venv && uv pip install torch": ("e2e/test_export_uv.py", 'uv(["venv"'),
    "uv lock && uv sync": ("e2e/test_export_uv.py", '"sync"'),
}


def test_every_other_line_of_a_guide_block_names_the_test_that_runs_it():
    """Lines of ``sh`` blocks that are not ``resolve-gpu-stack`` commands (venvs, uv, pre-commit,
    the verify scripts): each has a row above, and the test file it names holds what runs it."""
    pages = [REPO / "README.md", *sorted((REPO / "docs" / "guides").glob("*.md")), *sorted((REPO / "docs" / "concepts").glob("*.md"))]
    missing = []
    for page in pages:
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                text = line.strip()
                if not text or text.startswith(("#", "resolve-gpu-stack ")):
                    continue
                row = next((v for k, v in OTHER_LINES.items() if text.startswith(k)), None)
                if row is None:
                    missing.append(f"{page.relative_to(REPO)}: {text}")
                elif row[1] != "the suite itself":
                    assert row[1] in (REPO / "tests" / row[0]).read_text(encoding="utf-8"), row
    assert not missing, "lines of guide blocks no test runs (add the test and its row to OTHER_LINES):\n" + "\n".join(missing)


def test_the_offline_commands_include_the_quick_starts():
    lines = [line for _, line, _ in OFFLINE]
    assert any(line.startswith("resolve-gpu-stack --python 3.12") for line in lines)
    assert any(line.startswith("resolve-gpu-stack inspect ") for line in lines)


def test_every_relative_link_names_a_file():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []


def test_the_readme_is_read_in_five_minutes():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def thread_sites() -> set[tuple[str, str]]:
    """(file under src/resolve_gpu_stack, thread name) of every ``threading.Thread(`` and
    ``ThreadPoolExecutor(`` in the code; a thread without a name is named ``?``."""
    import ast

    src = REPO / "src" / "resolve_gpu_stack"
    sites = set()
    for path in sorted(src.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or ast.unparse(node.func) not in (
                "threading.Thread",
                "Thread",
                "ThreadPoolExecutor",
                "futures.ThreadPoolExecutor",
            ):
                continue
            named = next((k.value for k in node.keywords if k.arg in ("name", "thread_name_prefix")), None)
            if isinstance(named, ast.Constant):
                name = str(named.value)
            elif isinstance(named, ast.JoinedStr):
                name = "".join(
                    str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                    for v in named.values
                    if isinstance(v, (ast.Constant, ast.FormattedValue))
                )
            else:
                name = "?"
            sites.add((str(path.relative_to(src)), name))
    return sites


def test_the_concurrency_page_names_every_place_a_thread_starts():
    """docs/internals/concurrency.md's table is where threads start: each row a file and the name
    its threads get, no more, no fewer than the code has."""
    page = (REPO / "docs" / "internals" / "concurrency.md").read_text()
    rows = set(re.findall(r"^\| `([\w/]+\.py)` \| `([^`]+)` \|", page, re.M))
    assert rows == thread_sites(), (
        f"in the code, not on the page: {sorted(thread_sites() - rows)}; on the page, not in the code: {sorted(rows - thread_sites())}"
    )
    count = re.search(r"Threads start at the (\w+) sites", page)
    assert count is not None and count.group(1) == NUMBERS[len(rows)]


NUMBERS = {
    n: w
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
