"""Which torch and CUDA a compiled wheel's shared objects bind to: read each ``.so`` member's first
bytes, never the whole wheel.

A wheel whose shared objects need ``libtorch*.so`` / ``libc10*.so`` links torch (``torch-abi``);
how it binds (the stable C shim, C++ symbols of one torch, one build per torch) is in the dynamic
symbols those members import, which ``WheelScan.abi`` judges with ``AbiRules`` (``abi.py``). One
whose objects need only CUDA libraries is bound to a CUDA major (``cuda``); one with no shared
object, or objects that need neither, is ``agnostic``; ``unknown`` when a member could not be told
(not ELF, the cap reached first, the wheel's limits reached).

Pure: ``WheelScanner`` (``scanner.py``; a member's first bytes: ``member.py``; what it found: ``result.py``) plans byte ranges and evaluates what comes back, an I/O layer does the
reading. The reads, in order: the zip's tail (end of central directory), the central directory
when the tail does not hold it, then for every ``.so`` member (largest first) its local header and
first compressed bytes, inflated as they come, in reads sized by what the member's symbol table
says it still needs (``elf.dynamic_symbols``' ``needed_bytes``), else growing chunks. A member that
does not link torch stops when its needed libraries are known (``elf/``: its dynamic section
read; or, a guess from the names scanned, the string table holding the library names ended or its
first loadable segment read); one that links torch reads on until its dynamic symbol table is
complete. The guesses and the ``cap`` (inflated bytes) are not the end for a wheel tied to torch
(``torch_tie``: its METADATA, read first, or its name, or a member that links torch): such a
member is read on by its structure (``elfstream.py``: ``.dynamic`` and the tables it points to,
wherever they lie), as is a torch-linked member whose symbols the first bytes did not finish and
a member of any wheel whose first bytes did not tell. ``stop`` ends a scan for the caller's budget. A wheel stops at ``MAX_MEMBERS`` members, ``MAX_INFLATED`` inflated bytes,
``time_limit`` seconds of the scanner's own work (``clock``), or members that overlap (a zip
bomb's layout: ``ZipError``).

    scanner = WheelScanner(file_size)
    scanner.feed(tail_start, tail)            # optional: bytes already read (METADATA's tail)
    while ranges := scanner.next_ranges():
        for start, end in ranges:             # end exclusive; Range: bytes=start-(end-1)
            scanner.feed(start, fetch(start, end))
    result = scanner.result()

or ``scan_wheel(read, file_size)`` with a ``read(start, end) -> bytes`` callable (``scan_file`` for an
open file).
"""

from __future__ import annotations

from .result import (
    CONCLUSIVE,
    DEFAULT_CAP,
    FIRST_CHUNK,
    FIRST_TAIL,
    MAX_CENTRAL_DIRECTORY,
    MAX_CHUNK,
    MAX_INFLATED,
    MAX_MEMBERS,
    MAX_METADATA,
    MERGE_GAP,
    MIN_CHUNK,
    NAMES_MARGIN,
    SMALL_MEMBER,
    STRINGS_RATIO,
    TIME_LIMIT,
    WHOLE_FILE,
    Evidence,
    Kind,
    MemberScan,
    Stop,
    WheelScan,
    first_tail,
    is_shared_object,
    torch_tie,
)
from .scanner import WheelScanner, scan_file, scan_wheel

__all__ = [
    "CONCLUSIVE",
    "DEFAULT_CAP",
    "Evidence",
    "FIRST_CHUNK",
    "FIRST_TAIL",
    "Kind",
    "MAX_CENTRAL_DIRECTORY",
    "MAX_CHUNK",
    "MAX_INFLATED",
    "MAX_MEMBERS",
    "MAX_METADATA",
    "MERGE_GAP",
    "MIN_CHUNK",
    "MemberScan",
    "NAMES_MARGIN",
    "SMALL_MEMBER",
    "STRINGS_RATIO",
    "Stop",
    "TIME_LIMIT",
    "WHOLE_FILE",
    "WheelScan",
    "WheelScanner",
    "first_tail",
    "is_shared_object",
    "scan_file",
    "scan_wheel",
    "torch_tie",
]
