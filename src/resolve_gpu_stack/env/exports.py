"""What an installed torch exports: the defined dynamic symbols of its libraries on disk
(``torch/lib/libtorch*.so``, ``libc10*.so``), for the ABI judgement of version-locked wheels
(``rules/abi.py``) and for ``doctor``'s static check of installed extensions.

The files are mapped, not read: the ELF reader touches only the pages of the symbol table.
"""

from __future__ import annotations

import mmap
from pathlib import Path

from ..index import elf
from ..rules.abi import TorchExports


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
    with path.open("rb") as fh:
        size = path.stat().st_size
        if size == 0:
            raise elf.ElfError("empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            found = elf.dynamic_symbols(data, file_size=size, exports=True)  # type: ignore[arg-type]
    if not found.complete:
        raise elf.ElfError("its dynamic symbol table could not be read to the end")
    return found.exports


__all__ = ["installed_torch_exports", "library_exports", "torch_libraries"]
