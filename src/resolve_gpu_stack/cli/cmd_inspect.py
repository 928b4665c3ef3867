"""`resolve-gpu-stack inspect WHEEL|URL|NAME==VERSION`: can I use this compiled wheel with my torch?

Per ``.so`` member: the libraries it needs, its C-shim and C++ torch imports (three examples,
demangled), its CUDA majors, the torch a per-torch build member is for; then the wheel's verdict
against the target's torch (``rules/abi.py``: the judgement ``resolve``, ``lock``, ``check`` and
``doctor`` make). A local file is read from disk; a URL or ``NAME==VERSION`` (the best wheel for
the target on the index that owns NAME) by range requests, only its first bytes. Exit 0 when it
can run (or the target has no torch to judge against), 1 when it cannot.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypedDict

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from ..data.definitions import RouteContext
from ..errors import CrawlError, UsageError
from ..index.parse import MAX_METADATA_BYTES, parse_metadata
from ..model import IndexFile
from ..model.abi import UNKNOWN, WheelAbi
from ..model.request import TORCH
from ..net.scan.classify import IGNORED_RANGE
from ..rules.fit import TargetFit
from ..scan import zipmeta
from ..scan.abi import demangle, member_abi
from ..scan.wheelscan import scan_file
from ..urls import redact_url
from . import common, render
from . import options as O
from .assemble import offline_hinted

if TYPE_CHECKING:
    from ..data.definitions import Definitions
    from ..model import Target
    from ..model.abi import AbiVerdict, MemberAbi
    from ..model.kept import KeptTorch
    from ..scan.wheelscan import MemberScan, WheelScan
    from .assemble import ResolveParts, Session

INSPECT_SCHEMA = "resolve-gpu-stack/inspect/v1"
SHOWN = 3


class MemberReport(TypedDict):
    """One shared object of the report (schemas/inspect-v1.json's ``members``)."""

    name: str
    needed: list[str] | None  # None: its dynamic section was not read
    torch_libraries: list[str]
    cuda_majors: list[int]
    shim_imports: int | None  # None: its symbols were not read
    shim_examples: list[str]
    cxx_imports: int | None
    cxx_examples: list[str]
    build: str | None
    read: bool
    error: str | None


# "from" is a keyword: the functional form
TorchCudaReport = TypedDict("TorchCudaReport", {"label": str, "from": str})


class VerdictReport(TypedDict):
    abi: str | None
    runs: bool | None  # None: a guess from the names in the first bytes, never "runs"
    read: str
    floor: str | None
    cuda_majors: list[int]
    builds: list[str]
    refusal: str | None
    note: str | None


class InspectReport(TypedDict):
    """The ``resolve-gpu-stack/inspect/v1`` object."""

    schema: str
    wheel: str
    source: str
    kind: str
    why: str
    bytes_read: int
    file_size: int
    cuda_majors: list[int]
    builds: list[str]
    members: list[MemberReport]
    torch: str | None
    torch_cuda: TorchCudaReport | None
    verdict: VerdictReport | None


@dataclass(frozen=True, slots=True, kw_only=True)
class InspectSettings(O.ResolveOptions):
    wheel: str  # a file, a URL or NAME==VERSION


def read(args: argparse.Namespace, env: Mapping[str, str]) -> InspectSettings:
    return InspectSettings(**O.resolve_fields(args, env), wheel=args.wheel)


def run(settings: InspectSettings, env: Mapping[str, str], session: Session) -> int:
    cuda = settings.typed.cuda  # parsed at the edge by the settings table: a bad --cuda is a usage error there
    target, installed_requires = common.target_of(settings.typed, env)
    wheel = settings.wheel
    # a declared torch without label is known from its own wheel (PyPI's page): its CUDA by its runtime pin, as resolve knows it
    declared_pypi_torch = target.interpreter is None and any(v.local is None for n, v in target.installed.items() if n == TORCH)
    defs = common.definitions(settings.sources, env, need_pypi=("==" in wheel and "://" not in wheel) or declared_pypi_torch)

    with common.make_parts(session, settings.sources, defs) as parts, offline_hinted(target.installed.get(TORCH)):
        kept = parts.kept_torch(target, installed_requires.get(TORCH, ()), cuda)
        source, name, scan, abi, cost, requires = _read(wheel, parts, target, kept)
        verdict = parts.judge(name, abi, requires, kept, target)
    report = _report(wheel, source, scan, abi, cost, verdict, kept, parts.defs)
    if common.output_format(settings.output) == "json":
        render.print_json(report, sys.stdout)
    else:
        _print(report, sys.stdout)
    return 1 if verdict is not None and verdict.refusal is not None else 0


def _read(
    text: str, parts: ResolveParts, target: Target, kept: KeptTorch | None
) -> tuple[str, str, WheelScan | None, WheelAbi, dict[str, int], tuple[str, ...]]:
    """(where it was read, the project name its file name gives (the data's rows are keyed by it), the
    finished scan or None, what it imports, bytes read / file size, its Requires-Dist)."""
    path = Path(text)
    if "://" not in text and "==" not in text:
        if not path.is_file():
            raise UsageError(f"{text}: no such file", hint="give a wheel file, an http(s) URL, or NAME==VERSION")
        if path.suffix != ".whl":
            raise UsageError(f"{text} is not a wheel (a wheel's file name ends in .whl)", hint="give a wheel file, an http(s) URL, or NAME==VERSION")
        return _read_local(path, parts.defs)

    file = _remote_file(text, parts, target, kept)
    record, scan = parts.classifier.inspect(file)
    if scan is None and IGNORED_RANGE in record.abi.why:  # its METADATA would cost the whole wheel: not read (nothing downloaded)
        return file.url, str(file.name), None, record.abi, {"bytes_read": record.bytes_read, "file_size": record.file_size}, ()
    metadata = parts.source.fetch_metadata([file]).get(file.url, b"")
    return file.url, str(file.name), scan, record.abi, {"bytes_read": record.bytes_read, "file_size": record.file_size}, _requires_dist(metadata, file.url)


def _read_local(path: Path, defs: Definitions) -> tuple[str, str, WheelScan | None, WheelAbi, dict[str, int], tuple[str, ...]]:
    size = path.stat().st_size
    name = _name_of(path.name)
    with path.open("rb") as fh:
        try:
            # on disk: every member by its structure, from its start (never a guess from the names in its first bytes)
            scan = scan_file(fh, size, cap=64 * 2**20, max_inflated=256 * 2**20, structural=True)
        except zipmeta.ZipError as exc:
            return str(path), name, None, WheelAbi(kind=UNKNOWN, why=f"not a readable wheel ({exc})"), {"bytes_read": 0, "file_size": size}, ()
        try:
            fh.seek(0)
            requires = _requires_dist(zipmeta.read_metadata_from_zip(fh, max_size=MAX_METADATA_BYTES), str(path))
        except zipmeta.ZipError:
            requires = ()  # no readable METADATA: no torch floor of its own
    return str(path), name, scan, scan.abi(defs.abi), {"bytes_read": scan.bytes_read, "file_size": size}, requires


def _remote_file(text: str, parts: ResolveParts, target: Target, kept: KeptTorch | None) -> IndexFile:
    """The wheel a URL names, or the best wheel of NAME==VERSION for the target on its own index."""
    return _file_at(text) if "://" in text else _best_wheel(text, parts, target, kept)


def _file_at(url: str) -> IndexFile:
    """The wheel at ``url``, from its file name."""
    filename = url.split("#", 1)[0].split("?", 1)[0].rsplit("/", 1)[-1]
    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        raise UsageError(f"{redact_url(url)}: the URL does not end in a wheel file name", hint="give the wheel's own URL") from None
    return IndexFile(filename=filename, url=url, name=name, version=version, tags=frozenset(tags))


def _best_wheel(text: str, parts: ResolveParts, target: Target, kept: KeptTorch | None) -> IndexFile:
    """The wheel of ``NAME==VERSION`` with the target's best tag, on the package's own index."""
    name, pin = _name_and_version(text)
    # the package's own index for this target: the torch family follows its torch (routing.toml)
    offers, _ = parts.finder.offers(name, RouteContext.of_kept(kept))
    fitting = [o.file for o in offers if pin in (str(o.file.version), o.file.version.public)]
    fit = TargetFit(target)
    ranked = sorted((f for f in fitting if fit(f) is None), key=lambda f: fit.tag_rank(f) or 0)
    if not ranked:
        found = ", ".join(sorted({f.filename for f in fitting})) or "none"
        raise UsageError(
            f"{name} {pin}: no wheel for {target.describe()} on its index (files of that version: {found})",
            hint="name another version, or inspect a wheel file or URL directly",
        )
    return ranked[0]


def _name_and_version(text: str) -> tuple[str, str]:
    """``NAME==VERSION`` read: (the canonical name, the version as typed)."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise UsageError(f"{text!r} is not NAME==VERSION: {exc}") from None
    pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
    if len(pins) != 1 or len(req.specifier) != 1:
        raise UsageError(f"{text!r}: name one version exactly (NAME==VERSION)")
    return canonicalize_name(req.name), pins[0]


def _requires_dist(metadata: bytes, source: str) -> tuple[str, ...]:
    if not metadata:
        return ()
    try:
        return parse_metadata(metadata, source=source).requires_dist
    except CrawlError:
        return ()


def _name_of(filename: str) -> str:
    """The project name in a local wheel's file name ("" when it is not a wheel file name)."""
    try:
        return str(parse_wheel_filename(filename)[0])
    except InvalidWheelFilename:
        return ""


def _report(
    asked: str, source: str, scan: WheelScan | None, abi: WheelAbi, cost: dict[str, int], verdict: AbiVerdict | None, kept: KeptTorch | None, defs: Definitions
) -> InspectReport:
    return {
        "schema": INSPECT_SCHEMA,
        "wheel": asked,
        "source": redact_url(source),
        "kind": abi.kind,
        "why": abi.why,
        "bytes_read": cost["bytes_read"],
        "file_size": cost["file_size"],
        "cuda_majors": list(abi.cuda_majors),
        "builds": list(abi.builds),
        "members": _member_reports(scan, abi, defs),
        "torch": None if kept is None else str(kept.version),
        "torch_cuda": None if kept is None or kept.cuda is None else {"label": str(kept.cuda.label), "from": kept.cuda.words()},
        "verdict": None
        if verdict is None
        else {
            "abi": verdict.kind.value if verdict.kind is not None else None,
            "runs": None if verdict.unverified and verdict.runs else verdict.runs,  # a guess from the names in first bytes: never "runs"
            "read": verdict.read or "start",
            "floor": verdict.floor,
            "cuda_majors": list(verdict.cuda_majors),
            "builds": list(verdict.builds),
            "refusal": verdict.refusal,
            "note": verdict.note,
        },
    }


def _member_reports(scan: WheelScan | None, abi: WheelAbi, defs: Definitions) -> list[MemberReport]:
    """Every shared object the scan considered. The imports of the torch-linked members whose
    symbols were all read are ``abi.members`` (``scan.abi`` split them, in scan order); those of a
    member whose symbols were read in part are split here. No scan (a snapshot's recorded one): the
    torch-linked members as recorded."""
    if scan is None:
        return [_recorded_member_report(m) for m in abi.members]
    described = iter(abi.members)
    out = []
    for m in scan.members:
        if m.links_torch and m.symbols_complete:
            member: MemberAbi | None = next(described)
        else:
            member = member_abi(m.name, m.libraries, m.symbols.imports, defs.abi) if m.libraries is not None and m.symbols is not None else None
        out.append(_member_report(m, member, defs))
    return out


def _recorded_member_report(m: MemberAbi) -> MemberReport:
    """A torch-linked member as a recorded scan keeps it (what it needs beyond torch and CUDA is not kept)."""
    return {
        "name": m.name,
        "needed": None,
        "torch_libraries": list(m.torch_libs),
        "cuda_majors": list(m.cuda_majors),
        "shim_imports": m.shim,
        "shim_examples": list(m.shim_examples[:SHOWN]),
        "cxx_imports": len(m.cxx),
        "cxx_examples": [demangle(s) for s in m.cxx[:SHOWN]],
        "build": m.build,
        "read": True,
        "error": None,
    }


def _member_report(m: MemberScan, described: MemberAbi | None, defs: Definitions) -> MemberReport:
    """One shared object of the wheel: what it needs, what it imports of torch (``described``; None:
    its symbols were not read), whether it was read."""
    libs = m.libraries
    return {
        "name": m.name,
        "needed": list(libs.needed) if libs else None,
        "torch_libraries": list(libs.torch_libs) if libs else [],
        "cuda_majors": list(libs.cuda_majors) if libs else [],
        "shim_imports": described.shim if described is not None else None,
        "shim_examples": list(described.shim_examples[:SHOWN]) if described is not None else [],
        "cxx_imports": len(described.cxx) if described is not None else None,
        "cxx_examples": [demangle(s) for s in described.cxx[:SHOWN]] if described is not None else [],
        "build": described.build if described is not None else defs.abi.build_of(m.name),
        "read": m.conclusive and (not m.links_torch or m.symbols_complete),
        "error": m.error,
    }


def _print(report: InspectReport, out: TextIO) -> None:
    size, read = report["file_size"], report["bytes_read"]
    if str(report["source"]).startswith(("http://", "https://")):  # every byte received: bodies, status lines, headers (may pass the file's size)
        share = f", {read:,} bytes received over HTTP (headers included) for a file of {size:,} bytes" if size else ""
    else:
        share = f", {read:,} of its {size:,} bytes read ({100 * read / size:.1f}%)" if size else ""
    out.write(f"{report['wheel']}: {report['kind']}{share}\n  {report['why']}\n")
    for m in report["members"]:
        out.writelines(f"{line}\n" for line in _member_lines(m))
    out.writelines(f"{line}\n" for line in _verdict_lines(report))


def _member_lines(m: MemberReport) -> list[str]:
    """A member of the report in words: its name, then what is known of it."""
    lines = [f"  {m['name']}"]
    if m["error"]:
        lines.append(f"    not read: {m['error']}")
    if m["needed"] is not None:
        lines.append(f"    needs: {', '.join(m['needed']) or 'nothing'}")
    if m["torch_libraries"]:
        lines.append(_torch_imports_line(m))
    if m["cuda_majors"]:
        lines.append(f"    CUDA: {', '.join(str(v) for v in m['cuda_majors'])}")
    if m["build"]:
        lines.append(f"    a build for torch {m['build']}")
    return lines


def _torch_imports_line(m: MemberReport) -> str:
    if m["shim_imports"] is None:
        return "    torch imports: not read"
    shim = f"{m['shim_imports']} C-shim" + (f" ({', '.join(m['shim_examples'])})" if m["shim_examples"] else "")
    cxx = f"{m['cxx_imports']} C++" + (f" ({'; '.join(m['cxx_examples'])})" if m["cxx_examples"] else "")
    return f"    torch imports: {shim}, {cxx}"


def _verdict_lines(report: InspectReport) -> list[str]:
    verdict = report["verdict"]
    if verdict is None:
        return ["verdict: the target has no torch to judge it against (pass --installed torch==VERSION, or --python PATH)"]
    kind = verdict["abi"] or "no torch linked"
    floor = f", torch >= {verdict['floor']}" if verdict["floor"] else ""
    head = "runs" if verdict["runs"] else "cannot run"
    cuda = report["torch_cuda"]
    torch = f"torch {report['torch']}" + (f" ({cuda['label']}: {cuda['from']})" if cuda else "")
    return [f"verdict against {torch}: {head} ({kind}{floor})", *(f"  {line}" for line in (verdict["refusal"], verdict["note"]) if line)]


__all__ = ["INSPECT_SCHEMA", "run"]
