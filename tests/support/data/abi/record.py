"""Record the real-wheel fixtures of tests/scan/test_abi_real.py from wheels on disk (a dev tool).

    python tests/support/data/abi/record.py WHEEL [WHEEL...] [--out tests/support/data/abi]

For each wheel, under ``OUT/<name>-<version>/``:

- ``heads.tar.xz``: per ``.so`` member, its first bytes: up to the end of its ``.dynstr`` plus
  ``MARGIN`` (what the scanner reads; the rest of the member is left out);
- ``facts.json``: the wheel's file name and size, and per member its size, its prefix length and
  what binutils say of the whole member: ``readelf -d`` (NEEDED, SONAME), ``nm -D
  --undefined-only`` (names without ``@VERSION``), ``readelf -S`` (``.dynsym``/``.dynstr``).

and ``OUT/demangle.tsv``: every mangled name the members import, with ``c++filt``'s demangling.
Needs readelf, nm and c++filt (binutils). Members are written to a temporary file one at a time.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MARGIN = 4096
_SO = re.compile(r"\.so(?:\.[0-9]+)*$")


def _run(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def member_facts(path: Path) -> dict[str, object]:
    dynamic = _run("readelf", "-dW", str(path))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    soname = re.findall(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dynamic)
    sections = _run("readelf", "-SW", str(path))
    found = {}
    for name in (".dynsym", ".dynstr"):
        m = re.search(rf"\s{re.escape(name)}\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", sections)
        if m:
            found[name] = (int(m.group(1), 16), int(m.group(2), 16))
    undefined = sorted({line.split()[-1].split("@")[0] for line in _run("nm", "-D", "--undefined-only", str(path)).splitlines() if line.strip()})
    return {
        "needed": needed,
        "soname": soname[0] if soname else None,
        "undefined": undefined,
        "dynsym": found.get(".dynsym"),
        "dynstr": found.get(".dynstr"),
    }


def record(wheel: Path, out: Path, mangled: set[str]) -> Path:
    parts = wheel.name.split("-")
    folder = out / f"{parts[0]}-{parts[1]}"
    folder.mkdir(parents=True, exist_ok=True)
    members = []
    tar_buf = io.BytesIO()
    with zipfile.ZipFile(wheel) as zf, tarfile.open(fileobj=tar_buf, mode="w:xz", preset=9) as tar, tempfile.TemporaryDirectory() as tmp:
        for info in sorted(zf.infolist(), key=lambda i: i.filename):
            if info.is_dir() or not _SO.search(info.filename.rsplit("/", 1)[-1]):
                continue
            target = Path(tmp) / "member.so"
            with zf.open(info) as src, target.open("wb") as dst:
                while chunk := src.read(2**20):
                    dst.write(chunk)
            facts = member_facts(target)
            dynstr = facts["dynstr"]
            end = info.file_size if dynstr is None else min(info.file_size, dynstr[0] + dynstr[1] + MARGIN)  # type: ignore[index]
            with target.open("rb") as f:
                head = f.read(end)
            entry = tarfile.TarInfo(info.filename)
            entry.size = len(head)
            tar.addfile(entry, io.BytesIO(head))
            members.append({"name": info.filename, "size": info.file_size, "prefix": len(head), **facts})
            mangled.update(n for n in facts["undefined"] if n.startswith("_Z"))  # type: ignore[union-attr]
            print(f"  {info.filename}: {info.file_size} bytes, prefix {len(head)}", file=sys.stderr)
    (folder / "heads.tar.xz").write_bytes(tar_buf.getvalue())
    doc = {"wheel": wheel.name, "size": wheel.stat().st_size, "members": members}
    (folder / "facts.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = parser.parse_args()
    mangled: set[str] = set()
    for wheel in args.wheels:
        print(f"{wheel.name} -> {record(wheel, args.out, mangled)}", file=sys.stderr)
    tsv = args.out / "demangle.tsv"
    known = {}
    if tsv.exists():  # keep names recorded from other wheels
        known = dict(line.split("\t", 1) for line in tsv.read_text().splitlines() if "\t" in line)
    names = sorted(mangled | set(known))
    demangled = _run_input("c++filt", "\n".join(names) + "\n").splitlines()
    tsv.write_text("".join(f"{m}\t{d}\n" for m, d in zip(names, demangled, strict=True)))
    return 0


def _run_input(cmd: str, text: str) -> str:
    return subprocess.run([cmd], input=text, capture_output=True, text=True, check=True).stdout


if __name__ == "__main__":
    sys.exit(main())
