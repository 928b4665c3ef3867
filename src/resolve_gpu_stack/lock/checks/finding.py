"""What a check of a lock file answers: a ``Finding`` (error, warning or note, naming the file and the
package), what the config expects of a file (``Expected``) and one file's result (``Checked``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ...model import LockPlan
from ..locked import LockedFile

ERROR, WARNING, NOTE = "error", "warning", "note"


# What a finding is about, where ``install --lock`` treats it apart (None: the lock's own promises).
TARGET = "target"  # the target's Python or platform is not the lock's: ``--force-target`` relaxes it


INSTALLED = "installed"  # what the target has installed is not what the lock keeps or moves from


LOCATION = "location"  # where a wheel is fetched from (a wheelhouse moves every wheel; the sha256 holds)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    level: str  # error | warning | note
    path: Path
    message: str
    package: str | None = None
    hint: str | None = None
    rule: str | None = None  # TARGET, INSTALLED, LOCATION or None

    def render(self, shown: str | None = None) -> str:
        where = shown or str(self.path)
        what = f"{self.package}: " if self.package else ""
        text = f"{self.level}: {where}: {what}{self.message}"
        return text + (f"\n  {self.hint}" if self.hint else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What the current config says a lock file should have been made from."""

    target: str
    inputs: Mapping[str, object]
    digest: str
    command: str  # regenerates the file (run in ``folder``)
    folder: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """One file's result; ``plan`` is what the file says (None if it could not be read)."""

    path: Path
    findings: tuple[Finding, ...]
    plan: LockPlan | None = None
    locked: LockedFile | None = None


def regenerate_hint(expected: Expected | None, cwd: Path | None = None) -> str | None:
    if expected is None:
        return None
    here = (cwd or Path.cwd()).resolve()
    prefix = "" if expected.folder.resolve() == here else f"cd {expected.folder} && "
    return f"regenerate: {prefix}{expected.command}"


def error_at(path: Path, message: str, *, package: str | None = None, hint: str | None = None, rule: str | None = None) -> Finding:
    return Finding(level=ERROR, path=path, message=message, package=package, hint=hint, rule=rule)


def without_path(message: str, path: Path) -> str:
    """A LockFileError message names the file; the finding names it once already."""
    return message[len(str(path)) + 2 :] if message.startswith(f"{path}: ") else message
