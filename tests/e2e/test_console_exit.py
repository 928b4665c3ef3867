"""The console script ends at once once its command returned (``__main__.leave``: no interpreter
shutdown), with everything it printed flushed and its exit status; a thread of the caller's still
running is waited for, as the interpreter would. Real processes, a resolve replayed from the
bundled snapshot (no socket)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.doors import run_cli
from support.paths import SNAPSHOT

STORY = ["--python", "3.12", "--platform", "x86_64-manylinux_2_28", "--installed", "torch==2.12.0.dev20260307+cu130", "--snapshot", str(SNAPSHOT)]
RUN = "import sys; from resolve_gpu_stack.__main__ import run; sys.exit(run())"


def console(tmp_path: Path, *args: str, before: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", before + RUN, *args, "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True, timeout=300, check=False
    )


def test_the_console_script_ends_with_all_it_printed_and_its_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = "import atexit, sys; atexit.register(lambda: print('the callers handler ran', file=sys.stderr)); "
    done = console(tmp_path, *STORY, "--format", "json", before=said)
    assert done.returncode == 0, done.stderr
    assert done.stderr.endswith("the callers handler ran\n")  # the interpreter's exit handlers still run
    code, out, _ = run_cli(capsys, *STORY, "--format", "json", "--cache-dir", str(tmp_path / "in-process"))
    assert code == 0 and done.stdout == out  # every byte, the last buffer's included
    assert json.loads(done.stdout)["schema"] == "resolve-gpu-stack/plan/v1"
    refused = console(tmp_path, *STORY, "--with", "no-such-package-anywhere", "--format", "json")
    assert refused.returncode != 0 and refused.stdout == ""
    assert "no-such-package-anywhere" in refused.stderr and "Traceback" not in refused.stderr


def test_a_thread_of_the_callers_still_running_is_waited_for(tmp_path: Path) -> None:
    mark = tmp_path / "written-by-the-thread"
    before = f"import threading, time; threading.Thread(target=lambda: (time.sleep(0.5), open({str(mark)!r}, 'w').write('done'))).start(); "
    done = console(tmp_path, *STORY, "--format", "json", before=before)
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "done"
    assert json.loads(done.stdout)["schema"] == "resolve-gpu-stack/plan/v1"
