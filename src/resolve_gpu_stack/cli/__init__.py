"""The command line: the top floor, the only place that reads flags, the environment and config."""

from .app import build_parser, main

__all__ = ["build_parser", "main"]
