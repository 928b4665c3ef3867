"""What an installed torch exports: the defined dynamic symbols of its libraries on disk
(``torch/lib/libtorch*.so``, ``libc10*.so``), for the ABI judgement of version-locked wheels
(``rules/abi.py``) and for ``doctor``'s static check of installed extensions.

The files are mapped, not read: the ELF reader touches only the pages of the symbol table.
"""

from __future__ import annotations

import mmap
from pathlib import Path

from ..rules.abi import TorchExports
from ..scan import elf


def torch_libraries(site: Path) -> list[Path]:
    """The torch libraries under ``site/torch/lib`` (sorted by name)."""
    folder = site / "torch" / "lib"
    try:
        names = sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return []
    return [folder / name for name in elf.torch_libs(names)]


def installed_torch_exports(site: Path, version: str) -> TorchExports:
    """The exports of the torch installed in ``site`` (a site-packages folder); ``symbols`` None
    with the reason when its libraries cannot be read."""
    libraries = torch_libraries(site)
    if not libraries:
        return TorchExports(version=version, symbols=None, source=f"no torch libraries in {site / 'torch' / 'lib'}")
    symbols: set[str] = set()
    for path in libraries:
        try:
            symbols |= set(library_exports(path))
        except (OSError, ValueError) as exc:  # ElfError is a ValueError
            return TorchExports(version=version, symbols=None, source=f"{path.name}: {exc}")
    return TorchExports(version=version, symbols=frozenset(symbols), source=f"{len(libraries)} libraries of torch in {site / 'torch' / 'lib'}")


def library_exports(path: Path) -> tuple[str, ...]:
    """The defined dynamic symbols of the shared object at ``path``."""
    return mapped_symbols(path, exports=True)[1]


def mapped_symbols(path: Path, *, exports: bool = False, torch_linked: bool = False) -> tuple[elf.ElfLibraries | None, tuple[str, ...]]:
    """The dynamic symbols of the shared object at ``path`` (its exports, else its imports), read to
    the end of their table from the file mapped, not read whole. ``torch_linked``: first the
    libraries it needs (returned), and its symbols only when one of them is torch's (``()`` when
    none is); else no libraries (None). ``ElfError`` for an empty file or a table not read to the end."""
    size = path.stat().st_size
    if size == 0:
        raise elf.ElfError("empty file")
    libs = None
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if torch_linked:
            libs = elf.needed_libraries(data, file_size=size)  # type: ignore[arg-type]
            if not libs.torch_libs:
                return libs, ()
        found = elf.dynamic_symbols(data, file_size=size, exports=exports)  # type: ignore[arg-type]
    if not found.complete:
        raise elf.ElfError("its dynamic symbol table could not be read to the end")
    return libs, found.exports if exports else found.imports


__all__ = ["installed_torch_exports", "library_exports", "mapped_symbols", "torch_libraries"]
