"""What a shared object's imports say about the torch it runs on: pure functions over symbol names.

``split_imports`` sorts a member's undefined dynamic symbols by ``AbiRules``
(``indexes/components.toml [abi]``): functions of the LibTorch stable C shim (unmangled
``aoti_torch_*``/``torch_*``: the **stable** ABI), C++ symbols of torch's namespaces (``c10::``,
``at::``, ``torch::``, ``caffe2::`` and their typeinfo/vtables) and ``THP*`` Python bindings (both
**version-locked**). ``member_abi`` is one torch-linked member's ``MemberAbi``: that split, and the
torch series a per-torch build member is for (from its name). ``demangle`` (``demangle.py``: the C++ runtime's ``__cxa_demangle``) writes a mangled name readably, for messages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..data.rules import AbiRules
from ..model.abi import MemberAbi
from .demangle import demangle
from .elf import ElfLibraries

# The first identifier of a mangled name's entity: after the special-name prefix (typeinfo,
# vtable, thunks, guard variables), a local name's function, a nested name's qualifiers.
_ENTITY = re.compile(
    r"_Z(?:T[IVST][PRK]*|T[HW]|GV|Th n?\d+_|Tv n?\d+_n?\d+_|Tc[hv]n?\d+_(?:n?\d+_)?[hv]n?\d+_(?:n?\d+_)?|Z)?(?:N[rVK]*[RO]?)?(\d+)".replace(" ", "")
)
EXAMPLES = 3  # shim examples kept per member


@dataclass(frozen=True, slots=True)
class ImportSplit:
    """A member's imports, sorted by what they bind to."""

    shim: tuple[str, ...] = ()  # C-shim functions, in import order
    cxx: tuple[str, ...] = ()  # mangled C++ symbols of torch's namespaces, sorted
    python: tuple[str, ...] = ()  # THP* Python-binding symbols, sorted

    @property
    def locked(self) -> tuple[str, ...]:
        """Every import a torch must export for this member to load (C++ and Python bindings)."""
        return tuple(sorted({*self.cxx, *self.python}))


def entity_identifier(symbol: str) -> str | None:
    """The first identifier of a mangled name's entity (``_ZN3c106detail...`` -> ``c10``,
    ``_ZTIN3c105ErrorE`` -> ``c10``, ``_Z16THPVariable_Wrap...`` -> ``THPVariable_Wrap``);
    None for an unmangled name or one that starts with a substitution (``std::``)."""
    m = _ENTITY.match(symbol)
    if m is None:
        return None
    length = int(m.group(1))
    start = m.end()
    ident = symbol[start : start + length]
    return ident if len(ident) == length else None


def split_imports(imports: Iterable[str], rules: AbiRules) -> ImportSplit:
    """``imports`` sorted into C-shim, C++ torch and Python-binding symbols (the rest: neither)."""
    shim: list[str] = []
    cxx: set[str] = set()
    python: set[str] = set()
    namespaces = set(rules.cxx_namespaces)
    for name in imports:
        if not name.startswith("_Z"):
            if name.startswith(rules.python_prefixes):
                python.add(name)
            elif rules.is_shim(name):
                shim.append(name)
            continue
        ident = entity_identifier(name)
        if ident is None:
            continue
        if ident in namespaces:
            cxx.add(name)
        elif ident.startswith(rules.python_prefixes):
            python.add(name)
    return ImportSplit(shim=tuple(dict.fromkeys(shim)), cxx=tuple(sorted(cxx)), python=tuple(sorted(python)))


def member_abi(name: str, libs: ElfLibraries, imports: Iterable[str], rules: AbiRules) -> MemberAbi:
    """What torch-linked member ``name`` (needing ``libs``, importing ``imports``) binds to: its
    imports split by ``rules`` (the shim counted, ``EXAMPLES`` of it kept), and the torch series it
    is a build for, from its file name (``..._torch29-cuda.so`` -> ``"2.9"``)."""
    split = split_imports(imports, rules)
    return MemberAbi(
        name=name,
        torch_libs=libs.torch_libs,
        cuda_majors=libs.cuda_majors,
        shim=len(split.shim),
        shim_examples=split.shim[:EXAMPLES],
        cxx=split.locked,
        build=rules.build_of(name),
    )


__all__ = ["EXAMPLES", "ImportSplit", "demangle", "entity_identifier", "member_abi", "split_imports"]
