"""A child a test sends Ctrl-C to: its SIGINT as a terminal's foreground job has it.

A suite started as a shell's background job (``cmd &``, ``nohup``, a CI runner without job control)
runs with SIGINT ignored, and a child inherits that: the tool then rightly ignores Ctrl-C (it keeps
an ignored SIGINT ignored), and a test of what Ctrl-C does would fail for the suite's reason, not
the tool's. Pass ``preexec_fn=foreground`` to ``subprocess.Popen``.
"""

from __future__ import annotations

import signal


def foreground() -> None:
    """In the child, before it runs: SIGINT with its default action."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
