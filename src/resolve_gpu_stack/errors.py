"""One root exception with a hint the user can act on, and an exit code per kind of failure.

Exit codes (documented in the README): 0 plan found / check passed, 1 no plan exists or a check
failed, 2 usage error, 3 an index could not be reached or answered garbage, 4 an output file could
not be written (nothing was written then).
"""

from __future__ import annotations


class ResolveGpuStackError(Exception):
    """Base class. ``str(err)`` is the message; ``hint`` says what to do next."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ResolveGpuStackError):
    """Bad flags, bad config, contradictory requests."""

    exit_code = 2


class IndexDefinitionError(UsageError):
    """A file under indexes/ (or an --index override) is malformed."""


class CrawlError(ResolveGpuStackError):
    """An index could not be reached, or answered something unusable. Always names the URL."""

    exit_code = 3

    def __init__(self, url: str, cause: str, *, hint: str | None = None) -> None:
        super().__init__(f"{url}: {cause}", hint=hint)
        self.url = url
        self.cause = cause


class SnapshotMiss(CrawlError):
    """Replaying a snapshot asked for a URL that the snapshot does not hold."""


class WheelNotCached(CrawlError):
    """Downloads are off (a snapshot replay) and the wheel is not in the wheel cache."""


class IntegrityError(CrawlError):
    """Bytes did not match the sha256 / size / digest the index promised."""


class NoPlanError(ResolveGpuStackError):
    """No set of wheels satisfies the request. ``reasons`` are in the stack's own terms."""

    exit_code = 1

    def __init__(self, message: str, *, reasons: list[str] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.reasons = list(reasons or [])

    def __str__(self) -> str:
        if not self.reasons:
            return self.message
        return self.message + "\n" + "\n".join(f"  - {r}" for r in self.reasons)


class DowngradeRefused(NoPlanError):
    """The request would take torch backwards."""


class LockFileError(ResolveGpuStackError):
    """A lock or constraints file is malformed or inconsistent."""


class WriteError(LockFileError):
    """An output file could not be written (a read-only folder, a full disk). Not "no plan": exit 4."""

    exit_code = 4


class UvError(ResolveGpuStackError):
    """uv failed or would have touched what it must not."""


class BuildError(ResolveGpuStackError):
    """Building a package from its sdist (``--build``) failed or was refused before it started; the
    message names the package and, when the build ran, its log."""
