"""Mangled C++ names demangled by the platform's C++ runtime, for messages: ``__cxa_demangle`` of
libstdc++ (or libc++) through ``ctypes``: ``_ZN3c106detail14torchCheckFailEPKcS2_j...`` ->
``c10::detail::torchCheckFail(char const*, char const*, unsigned int, ...)``.

Loaded for each name (a message names at most three; the first load ~7 ms, never on a resolve's hot
path; no module-level memo: ``tests/test_state.py``). Without a C++ runtime, or for a name it cannot
read, ``demangle`` gives the name back unchanged; it never raises.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_INPUT = 16 * 2**10  # longer names are given back as they are
RUNTIMES = ("libstdc++.so.6", "libc++.so.1", "libc++abi.dylib", "libc++.1.dylib")


def demangle(name: str) -> str:
    """``name`` demangled, or ``name`` itself when it is not a mangled C++ name the runtime reads."""
    if not name.startswith("_Z") or len(name) > MAX_INPUT or "\x00" in name:
        return name
    runtime = _runtime()
    return (runtime(name) if runtime is not None else None) or name


def _runtime() -> Callable[[str], str | None] | None:
    """The runtime's ``__cxa_demangle`` (and the C library's ``free``) as a function; None without one."""
    import ctypes  # a name to demangle (a message) only: +7 M instructions (~1.4 ms) on a plain resolve (callgrind)

    for library in RUNTIMES:
        try:
            cxa = ctypes.CDLL(library).__cxa_demangle
            free = ctypes.CDLL(None).free
        except (OSError, AttributeError):
            continue
        break
    else:
        return None
    cxa.restype = ctypes.c_void_p
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free.restype = None
    free.argtypes = [ctypes.c_void_p]

    def call(name: str) -> str | None:
        status = ctypes.c_int(0)
        out = cxa(name.encode("utf-8", "surrogateescape"), None, None, ctypes.byref(status))
        if not out:
            return None
        try:
            return ctypes.string_at(out).decode("utf-8", "replace")
        finally:
            free(out)

    return call


__all__ = ["demangle"]
