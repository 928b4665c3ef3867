"""One root exception with a hint the user can act on, and an exit code per kind of failure.

Exit codes (documented in the README): 0 plan found / check passed, 1 no plan exists or a check
failed, 2 usage error, 3 an index could not be reached or answered garbage, 4 an output file could
not be written (nothing was written then).
"""

from __future__ import annotations

_LINE_BREAKS = frozenset("\n\t")


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would act on made visible: control characters
    (NUL, ESC, CR, DEL, the C1 range), format characters (bidi overrides) and lone surrogates are
    written as ``\\xNN``/``\\uNNNN`` escapes; ``lines`` keeps newlines and tabs. The one escaping
    function for text a server or a build sent (reason phrases, status lines, page text, build
    output): applying it twice changes nothing more."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable() or (lines and ch in _LINE_BREAKS):
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


class ResolveGpuStackError(Exception):
    """Base class. ``str(err)`` is the message; ``hint`` says what to do next. Both are made
    ``printable`` (lines kept): no error carries raw control characters to a terminal or a JSON
    document, whatever text a server put in it."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        message = printable(message, lines=True)
        super().__init__(message)
        self.message = message
        self.hint = None if hint is None else printable(hint, lines=True)

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
    unreachable = False  # the host did not answer (refused, timed out, 5xx after retries): not an answer about the URL

    def __init__(self, url: str, cause: str, *, hint: str | None = None, unreachable: bool = False) -> None:
        url, cause = printable(url), printable(cause, lines=True)
        super().__init__(f"{url}: {cause}", hint=hint)
        self.url = url
        self.cause = cause
        self.unreachable = unreachable or self.unreachable


class SnapshotMiss(CrawlError):
    """Replaying a snapshot asked for a URL that the snapshot does not hold (``unreachable``: the
    page was not recorded, as good as a host down offline), or an entry it cannot read."""


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


class VerdictMismatch(NoPlanError):
    """A compiled wheel the plan lets in does not run as the plan says when read from its verified
    file (``env/confirm.py``): the install is refused, both readings named."""


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
