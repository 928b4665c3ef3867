"""The command line: the top floor, the only place that reads flags, the environment and config."""

from __future__ import annotations

import gc

from .app import build_parser, main


def run() -> int:
    """The console script (``__main__.run``): ``main()`` with the garbage collector kept off the hot paths.

    Everything imported before the run is long-lived, and nothing the run builds needs collecting
    when the process exits: freezing both moves them out of the collector's view, which saves a
    full collection at interpreter exit (~50 ms on a cold resolve); a higher first threshold
    (``__main__.RUN_GC_THRESHOLD``, set before anything of the program is imported) keeps it from
    walking the young objects again and again during the run. Tests call ``main()``.
    """
    gc.freeze()
    code = main()
    gc.freeze()
    return code


__all__ = ["build_parser", "main", "run"]
