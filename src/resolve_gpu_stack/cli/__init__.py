"""The command line: the top floor, the only place that reads flags, the environment and config."""

from __future__ import annotations

import gc

from .app import build_parser, main

# The collector's first threshold counts container objects made and not yet freed. A cold resolve
# keeps tens of thousands alive (files, tags, candidates) and makes few cycles: at the default
# (700) the collector runs ~120 times (~20 ms) and frees almost nothing; at 100,000 a resolve
# runs it not at all, and a long lock of many targets now and then.
RUN_GC_THRESHOLD = (100_000, 10, 10)


def run() -> int:
    """The console script: ``main()`` with the garbage collector kept off the hot paths.

    Everything imported before the run is long-lived, and nothing the run builds needs collecting
    when the process exits: freezing both moves them out of the collector's view, which saves a
    full collection at interpreter exit (~50 ms on a cold resolve); a higher first threshold
    (``RUN_GC_THRESHOLD``) keeps it from walking the young objects again and again during the
    run. Tests call ``main()``.
    """
    gc.freeze()
    gc.set_threshold(*RUN_GC_THRESHOLD)
    code = main()
    gc.freeze()
    return code


__all__ = ["build_parser", "main", "run"]
