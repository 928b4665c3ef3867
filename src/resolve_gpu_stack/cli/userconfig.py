"""Part of the CLI layer: where the PyPI index URL comes from when --index pypi=URL is not given.

Order: uv's environment variables (UV_DEFAULT_INDEX, UV_INDEX_URL), pip's (PIP_INDEX_URL), pip's
config files, then whatever the bundled uv would use (an empty ``uv pip compile --emit-index-url``,
which honours uv.toml and uv's own defaults). The URL is never written into the repository.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from uv import find_uv_bin

from ..errors import UsageError
from ..net import process


def uv_binary(explicit: str | None = None) -> str:
    if explicit:
        return explicit
    try:
        return find_uv_bin()
    except Exception as exc:  # the uv wheel is missing or broken
        raise UsageError(f"cannot find the bundled uv binary: {exc}", hint="reinstall resolve-gpu-stack, or pass --uv PATH") from None


def _pip_config_files(env: Mapping[str, str]) -> list[Path]:
    if env.get("PIP_CONFIG_FILE"):
        return [Path(env["PIP_CONFIG_FILE"])]
    home = Path(env.get("HOME", str(Path.home())))
    xdg = Path(env.get("XDG_CONFIG_HOME", str(home / ".config")))
    files = [Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"), home / ".pip" / "pip.conf", xdg / "pip" / "pip.conf"]
    if env.get("VIRTUAL_ENV"):
        files.append(Path(env["VIRTUAL_ENV"]) / "pip.conf")
    return files


def _from_pip_config(env: Mapping[str, str]) -> str | None:
    found = None
    for path in _pip_config_files(env):
        if not path.is_file():
            continue
        import configparser  # a pip.conf there is only: +8.6 M instructions (~1.7 ms) on a resolve (callgrind)

        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except (configparser.Error, OSError):
            continue
        for section in ("install", "global"):
            if parser.has_option(section, "index-url"):
                found = parser.get(section, "index-url").strip() or found
                break
    return found


def _from_uv(env: Mapping[str, str], uv: str) -> str | None:
    try:
        out = process.run(
            [uv, "pip", "compile", "-", "--emit-index-url", "--no-header", "--quiet", "--python", sys.executable],
            input="",
            text=True,
            timeout=30,
            env={**env, "UV_PYTHON_DOWNLOADS": "never", "UV_OFFLINE": "1"},
        )
    except (OSError, process.SubprocessError):
        return None
    for line in out.stdout.splitlines():
        if line.startswith("--index-url "):
            return line.split(None, 1)[1].strip()
    return None


def discover_pypi_url(env: Mapping[str, str], *, uv: str | None = None) -> str:
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if env.get(var, "").strip():
            return env[var].strip().split()[0]
    url = _from_pip_config(env) or _from_uv(dict(env), uv_binary(uv))
    if not url:
        raise UsageError("cannot tell which PyPI index to use", hint="pass --index pypi=URL (or set UV_DEFAULT_INDEX)")
    return url
