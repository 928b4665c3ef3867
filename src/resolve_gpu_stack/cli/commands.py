"""Each command's flags (``register_<command>``): all that parsing a command line and ``--help``
need. The rest of a command (``read``: its parsed flags read once into its frozen settings value;
``run``) is in ``cmd_<command>.py``, which the command table (``app.COMMANDS``) imports only once
that command's line is parsed; this module imports only the light option modules (``options``,
``flags``), so ``--help`` loads no command's dependencies.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from . import flags as S
from . import options as O

if TYPE_CHECKING:
    import datetime as dt

# -- resolve ----------------------------------------------------------------------------------------


def register_resolve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "resolve",
        help="print the plan (the default command)",
        description="Resolve and print the plan: per package keep / install / upgrade, from where, and why.",
    )
    O.add_resolve_flags(p)
    O.add_output_flags(p)


# -- candidates -------------------------------------------------------------------------------------


_CANDIDATES_HELP = {
    "torch": "PyTorch channel for pytorch-index packages: nightly (default), test, stable (installed or a version: its channel)",
    "flashinfer": "latest (stable pages, the default) or nightly",
}


def register_candidates(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "candidates",
        help="list what every owning index offers for a package",
        description="List the files each owning index offers for PACKAGE: version, tags, index, sha256 or 'no hash', size, and whether it fits the target.",
    )
    p.add_argument("package")
    S.add_flags(p, [*S.TARGET_FLAGS, "torch", "flashinfer", "exclude_newer", "wheel_variants", "gpus", "scan_records"], help=_CANDIDATES_HELP)
    O.add_index_flags(p)
    O.add_output_flags(p)


# -- inspect ----------------------------------------------------------------------------------------


def register_inspect(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "inspect",
        help="can this compiled wheel run on my torch? what each .so imports, and the verdict",
        description=(
            "Read a wheel's .so members (their first bytes only) and print, per member, the libraries it needs, its imports of the "
            "LibTorch stable C shim and of torch's C++ namespaces (three examples, demangled), its CUDA majors and the torch a "
            "per-torch build member is for; then the verdict against the target's torch: stable ABI (runs on every torch at or above "
            "its floor), version-locked (runs on a torch that exports each of its C++ imports), one build per torch, or unknown. "
            "WHEEL is a file, an http(s) URL, or NAME==VERSION (the best wheel for the target on the index that owns NAME). "
            "Exit 0: it can run (or the target has no torch); 1: it cannot."
        ),
    )
    p.add_argument("wheel", metavar="WHEEL|URL|NAME==VERSION")
    S.add_flags(p, [*S.TARGET_FLAGS, "scan_records"])
    O.add_index_flags(p)
    O.add_output_flags(p)


# -- snapshot ---------------------------------------------------------------------------------------


def register_snapshot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "snapshot",
        help="record every page and metadata file a resolve reads",
        description="Run the resolver and record every page and METADATA file it reads (404s included) into DIR, with a manifest. Replay with --snapshot DIR. "
        "With --snapshot OLD it extends a snapshot: OLD is replayed, what it lacks is fetched live (as --live-fallback does), and both are recorded into DIR.",
    )
    O.add_resolve_flags(p)
    O.add_output_flags(p)
    p.add_argument("--output", type=Path, required=True, metavar="DIR")


# -- lock -------------------------------------------------------------------------------------------


def register_lock(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lock",
        help="resolve and write the lock files of every configured target, or of one plan with -o",
        description=(
            "With a project config ([tool.resolve-gpu-stack] in pyproject.toml, or gpu-stack.toml, found in the "
            "current directory or a parent): resolve every configured target (or those named with --target), "
            "sharing one crawl, and write each target's outputs. Flags given here override the config's values. "
            "With -o: resolve one plan from the flags and write it as a PEP 751 pylock.<name>.toml or a pip/uv "
            "constraints file (*.txt). With --python/--platform/--installed and no -o, print the plan like `resolve`; "
            "with none of these and no config, there is nothing to lock (exit 2)."
        ),
    )
    O.add_resolve_flags(p)
    O.add_output_flags(p)
    p.add_argument(
        "-o", "--output", type=Path, action="append", default=[], metavar="FILE", help="pylock.<name>.toml or *.txt (repeatable); the config is not read"
    )
    g = p.add_argument_group("project config")
    g.add_argument("--config", type=Path, metavar="FILE", help="the config file (default: search the current directory and its parents)")
    g.add_argument("--target", action="append", default=[], metavar="NAME", help="lock only this configured target (repeatable)")
    g.add_argument(
        "--allow-synthetic",
        action="store_true",
        help="write pylock rows whose sha256 is a stand-in of a reconstructed snapshot (refused otherwise: such a lock cannot install; for tests and demos)",
    )
    g.add_argument(
        "--allow-outside-project",
        action="store_true",
        help="let the config write outputs outside its own folder (refused otherwise: a config from an untrusted repository must not overwrite your files)",
    )


# -- export -----------------------------------------------------------------------------------------


def register_export(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "export",
        help="write the plan into a uv project's pyproject.toml ([tool.uv]), so that `uv lock` and `uv sync` keep it",
        description=(
            "Resolve (one plan from the flags, or every configured target: --config/--target as for `lock`) and write into "
            "the project's pyproject.toml the uv tables that make `uv lock` and `uv sync` reproduce the plan: explicit "
            "indexes and sources (torch and its family from the PyTorch channel and CUDA folder the plan uses, "
            "flashinfer-jit-cache from FlashInfer's index), a dependency group with the stack's roots, constraints pinning "
            "every planned package, the overrides (a framework's torch pins), build settings for packages built against "
            "torch, and the target environments. Only these keys change; formatting and comments stay; a second run "
            "changes nothing. `check` then verifies uv.lock against it."
        ),
    )
    p.add_argument("tool", choices=("uv",), metavar="uv", help="the project tool to export to (uv)")
    O.add_resolve_flags(p)
    g = p.add_argument_group("the project")
    g.add_argument(
        "--project",
        type=Path,
        metavar="DIR",
        help="the uv project's folder, with its pyproject.toml (default: the config's folder, else the current directory)",
    )
    g.add_argument("--dry-run", action="store_true", help="print the change to pyproject.toml as a diff; write nothing")
    g.add_argument("--config", type=Path, metavar="FILE", help="the config file (default: search the current directory and its parents)")
    g.add_argument("--target", action="append", default=[], metavar="NAME", help="export only this configured target (repeatable; default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="log requests and decisions to stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")


# -- install ----------------------------------------------------------------------------------------


def register_install(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "install",
        help="resolve, download and verify every wheel, and install with uv (torch is never touched)",
        description=(
            "Resolve for the target interpreter (--python PATH, default: the active virtual environment; "
            "with none active, --system installs into python3 on PATH), download every wheel to install "
            "into the wheel cache and check its sha256, then install them with uv. The installed torch is "
            "never reinstalled or replaced; uv's dry run is checked first and the install is refused if uv "
            "would touch anything the plan does not say."
        ),
    )
    O.add_resolve_flags(p)
    O.add_output_flags(p)
    p.add_argument(
        "--dry-run", action="store_true", help="download nothing: print per package installed -> planned, why, and the bytes an install would download"
    )
    p.add_argument("--system", action="store_true", help="with no virtual environment active and no --python, install into python3 on PATH (as uv's --system)")
    p.add_argument("--uv", metavar="PATH", help="the uv executable (default: the uv installed with this tool, else uv on PATH)")
    p.add_argument("-o", "--output", type=Path, metavar="LOCKFILE", help="also write the plan, with every sha256, to pylock.<name>.toml or a constraints *.txt")
    add_lock_flags(p)


def add_lock_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("installing a lock (no resolving: the resolver and index flags do not apply)")
    g.add_argument(
        "--lock",
        type=O.local_file,
        metavar="PYLOCK",
        help="install exactly this pylock.<name>.toml (written by `lock`, `install -o` or `wheelhouse`): "
        "uv fetches its wheels from their own URLs or paths and checks them against its sha256 and sizes; nothing is resolved and no index is read",
    )
    g.add_argument(
        "--force-target",
        action="store_true",
        help="with --lock: install a lock whose wheels or Python do not fit this interpreter "
        "(Python and platform only: the packages a lock keeps, torch above all, must be installed here exactly as locked, forced or not)",
    )


# -- wheelhouse -------------------------------------------------------------------------------------


def register_wheelhouse(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "wheelhouse",
        help="export locks as a static package index any web server serves (a fleet's mirror)",
        description=(
            "Download every wheel the locks install (verified against their sha256, resumable, from the wheel cache when "
            "there) into DIR/files/, write a PEP 503/691 simple index of them under DIR/simple/, each lock rewritten into DIR/ "
            "(its wheels under --base-url, else as paths relative to the lock) and the manifest DIR/wheelhouse.json. "
            "A rerun only fetches and writes what changed. Nodes then run `install --lock DIR/pylock.<name>.toml`, "
            "`uv pip install -r DIR/pylock.<name>.toml`, or resolve with --index NAME=flat:URL/simple/."
        ),
    )
    p.add_argument("locks", nargs="+", type=Path, metavar="LOCK", help="pylock.<name>.toml files (several targets share one wheelhouse)")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="the wheelhouse folder (created; an earlier export there is updated)")
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="the URL DIR will be served at (https, or http on loopback; no query or fragment): "
        "the rewritten locks then name URL/files/<wheel> (default: relative paths)",
    )
    p.add_argument(
        "--prune",
        action="store_true",
        help="delete wheels and pages no lock given here installs any more (only in a folder an export made: never through a link, never outside DIR)",
    )
    p.add_argument("--offline", action="store_true", help="take every wheel from the wheel cache or local files; download nothing")
    O.add_network_flags(p.add_argument_group("network"))
    O.add_output_flags(p)


# -- doctor -----------------------------------------------------------------------------------------


def register_doctor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="verify the installed torch + FlashInfer stack (versions, CUDA labels, GPU kernels, import)",
        description=(
            "Verify a target environment past 'it imports': torch's CUDA build, FlashInfer's components "
            "aligned (cubin == python, jit-cache == <python>+cuNNN with torch's CUDA major), apache-tvm-ffi "
            "in range, no torch-ABI-bound package built for another torch, `import flashinfer` with "
            "FlashInfer's own version checks on, and jit-cache kernels for every GPU nvidia-smi lists. "
            "Nothing is downloaded. Exit 0 when no check failed, 1 otherwise, 5 when nothing failed but a host "
            "without the NVIDIA driver could not check what needs it (its binaries judged from their symbols, not imported)."
        ),
    )
    S.add_flags(
        p,
        ["python", "require_api"],
        help={
            "python": "the interpreter to check (default: the active virtual environment, else python3)",
            "require_api": "a FlashInfer API the environment must have, e.g. mm_mxfp8 or mm_mxfp8:cutlass (repeatable): "
            "imported and looked up in the target, and checked against each GPU's floor",
        },
    )
    p.add_argument("--nvidia-smi", dest="nvidia_smi", metavar="PATH", help="the nvidia-smi to run (default: the one on PATH; none: the GPU check is skipped)")
    p.add_argument(
        "--timeout", dest="import_timeout", type=float, default=120.0, metavar="SECONDS", help="limit for `import flashinfer` in the target (default 120)"
    )
    O.add_output_flags(p)


# -- check ------------------------------------------------------------------------------------------


def register_check(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="check lock files: invariants, hashes, freshness against the config, nightly retention",
        description=(
            "Check lock files (default: every output of every configured target). Each must parse and hold every "
            "invariant (FlashInfer components aligned, jit-cache label = torch's CUDA major, no torch-ABI wheel for "
            "another torch, a sha256 for every file, each package from the index that owns it, no duplicates, no "
            "credentials), be fresh (its inputs digest equals the config's for its target) and never record a torch "
            "below the installed one. Nightlies past the index's retention are warnings. A uv project `export uv` wrote into "
            "has its uv.lock checked against the exported plan: every planned package at its version, the kept torch, "
            "each package from its index, FlashInfer aligned. No network unless --online."
        ),
    )
    p.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="pylock*.toml, constraints *.txt or uv.lock files (default: the configured outputs, and the uv.lock of a project `export uv` wrote into)",
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="the config file (default: search the current directory and its parents)")
    p.add_argument("--target", action="append", default=[], metavar="NAME", help="check only this configured target's outputs (repeatable)")
    p.add_argument("--online", action="store_true", help="also re-resolve each target (network, or the configured snapshot) and report drift; writes nothing")
    p.add_argument("--today", type=_day, metavar="YYYY-MM-DD", help="judge nightly retention as of this day (default: today)")
    O.add_index_flags(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors (warnings: one line that counts them)")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: findings and the verdict on stderr (default); json: one resolve-gpu-stack/check/v1 object on stdout",
    )


def _day(text: str) -> dt.date:
    import datetime as dt  # --today only: datetime is +6.6 M instructions (~1.3 ms) on `resolve --help` (callgrind)

    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


# -- cache ------------------------------------------------------------------------------------------


DEFAULT_DAYS = 7.0


def register_cache(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "cache",
        help="show the cache's size per kind, prune what was not used lately, or clean it",
        description=(
            "info (default): the cache directory and its files and bytes per kind. prune: remove abandoned temp files, "
            "partial downloads and stored results older than --older-than days and wheels not used for as long "
            "(pages, METADATA and scans stay). clean: remove every entry. Wheels a running command uses are left alone; "
            "a cache folder that is a symbolic link is refused."
        ),
    )
    p.add_argument("action", nargs="?", choices=("info", "prune", "clean"), default="info")
    p.add_argument(
        "--older-than", type=_days, default=DEFAULT_DAYS, metavar="DAYS", help=f"prune: what was not used for this many days (default {DEFAULT_DAYS:g})"
    )
    p.add_argument("--cache-dir", metavar="DIR", type=O.absolute_path, help="the cache (default: $XDG_CACHE_HOME/resolve-gpu-stack)")
    p.add_argument("--format", choices=("table", "json"), help="output format (default: table on a terminal, json otherwise)")


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of days") from None
    if not math.isfinite(days) or days < 0 or days > 100_000:
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: give a number of days between 0 and 100000")
    return days
