"""Which targets a command runs on: a project's config found (``--config``, else the nearest),
its targets selected (``--target``) with the typed settings over theirs, and the command-line
words a regenerate command repeats. Shared by ``lock``, ``export uv`` and ``check``; below every
command (no ``cmd_*`` imports another: ``tests/test_layers.py``)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..urls import redact_url
from . import common
from . import options as O
from . import settings as S
from .config import discover_config, effective, with_overrides

if TYPE_CHECKING:
    from .config import ProjectConfig, TargetConfig


def own_target(typed: S.TypedSettings) -> bool:
    """--python/--platform/--installed: the flags describe a target of their own (``lock``, ``export``)."""
    return any(name in typed for name in ("python", "platform", "installed"))


def discover_configured(configured: O.ConfigOptions) -> ProjectConfig | None:
    """The config ``--config`` names, else the nearest one; None without one, unless ``--target``
    names a configured target (a usage error then)."""
    config = discover_config(configured.config)
    if config is None and configured.targets:
        raise UsageError(
            "--target names a configured target, but no config was found",
            hint="add [tool.resolve-gpu-stack] to pyproject.toml (or a gpu-stack.toml), or pass --config FILE",
        )
    return config


def source_words(sources: O.SourceOptions, config: ProjectConfig | None = None) -> list[str]:
    """The --snapshot/--index words of the command line, as a regenerate command records them
    (a snapshot relative to the config's folder, when there is a config)."""
    words: list[str] = []
    if sources.snapshot is not None:
        words += ["--snapshot", config.relative(sources.snapshot.resolve()) if config is not None else str(sources.snapshot)]
    for flag, items in (("--index", sources.indexes), ("--package-index", sources.package_indexes)):
        for item in items:
            name, _, url = item.partition("=")
            words += [flag, f"{name}={redact_url(url)}"]
    return words


def selected_targets(config: ProjectConfig, options: O.ResolveOptions, names: Sequence[str]) -> tuple[ProjectConfig, list[TargetConfig], str]:
    """(the config with --snapshot/--index applied, the targets ``names`` (--target) select with the
    typed settings over theirs, the command-line words a regenerate command repeats)."""
    typed = options.typed  # the settings the user typed win over the config's
    sources = options.sources
    config = effective(config, snapshot=sources.snapshot, indexes=common.index_overrides(sources), package_indexes=common.package_index_overrides(sources))
    targets = [with_overrides(t, typed.values) for t in config.select(names)]
    return config, targets, " ".join(map(shlex.quote, [*typed.words, *source_words(sources, config)]))


__all__ = ["discover_configured", "own_target", "selected_targets", "source_words"]
