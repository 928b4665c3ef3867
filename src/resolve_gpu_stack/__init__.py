"""resolve-gpu-stack: resolve and install a PyTorch + FlashInfer GPU stack without touching the installed torch."""

# The one place the version lives: pyproject.toml reads it from here (hatch dynamic version), and
# `--version`, the HTTP User-Agent and the release tag (v<version>) follow it.
__version__ = "0.1.0"
