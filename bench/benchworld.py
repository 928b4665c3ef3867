"""The benchmark's worlds: story 1 at realistic size, served from disk by ``tests/support/server.py``.

Built on ``tests/support/world.py`` (the same page dialects the resolver tests use) with real wheels for
every row; only the padding inside the large wheels of the metadata world is a sparse hole.

- ``build_story(root)``: the PyTorch nightly cu130 ``torch/`` page with 60 dates x 7 Pythons x 3
  platforms (1,260 rows, PEP 658 sidecars), triton, FlashInfer's pages, and a PyPI (PEP 691 JSON)
  with torch's era-3 closure and flashinfer-python 0.6.5's, several versions and many platform
  wheels per package.
- ``build_story(root, big=..., half_sidecars=True)``: the metadata world, a smaller story whose torch
  and jit-cache wheels are ``big`` bytes each (METADATA near the end) and whose torch page has no
  ``.metadata`` sidecar for every other date (the newest included).
- ``build_story(root, shape=SMALL)``: the same closure on small pages (a few torch nightlies, two
  versions of each PyPI project, wheels for cp312 on Linux only), where fixed costs dominate.
- ``build_story(root, wide=WIDE)``: story 1 plus ``servekit``, a framework whose requirements pull
  in 165 more projects over six levels (some native, some shared with story 1): a closure of 215.
- ``pytorch_page_body(rows)`` / ``pypi_json_body(files)``: page bodies for the parsing figures.

Every world is PyPI-shaped (``PypiShapedWorld``, issue 53): each PyPI wheel has its PEP 658
``.metadata`` sidecar, named with its sha256 on both of its pages (PEP 691 JSON with
``core-metadata`` and ``data-dist-info-metadata``, ``upload-time``, ``versions``; PEP 503 HTML with
``data-core-metadata`` and ``data-dist-info-metadata``); the PyTorch index answers in its own HTML
template only (``data-upload-time`` on every row, no JSON), carries verbatim copies of the PyPI
pages of the dependencies it mirrors (``PYTORCH_MIRRORS``), and answers 404 for every other name;
FlashInfer's index is its GitHub-pages dialect (absolute release URLs with ``#sha256=``, no
sidecars, no ``data-*``) and answers 404 for names it does not host. ``pypi_sidecars=False``
builds the shape the worlds had before issue 53 (no sidecar for any PyPI wheel, no mirrored
pages, no upload times on the PyTorch index), kept only for ``reconcile.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
import zlib
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from packaging.utils import canonicalize_name  # noqa: E402
from support.wheels import BuiltWheel, metadata_text  # noqa: E402
from support.world import World, _Entry, _flashinfer_page, _pytorch_page  # noqa: E402

CUDA = "cu130"
TRITON = "3.7.0+git9c288bc5"
NEWEST = date(2026, 3, 7)
X86 = "manylinux_2_28_x86_64"
ARM = "manylinux_2_28_aarch64"
TORCH_PYTHONS = ("cp310-cp310", "cp311-cp311", "cp312-cp312", "cp313-cp313", "cp313-cp313t", "cp314-cp314", "cp314-cp314t")
TORCH_PLATFORMS = (ARM, X86, "win_amd64")
FI_VERSION = "0.6.5"
FI_VERSIONS = ("0.5.0", "0.5.1", "0.5.2", "0.5.3", "0.6.0", "0.6.1", "0.6.2", "0.6.3", "0.6.4", "0.6.5")

# torch nightly cu130, era 3 (indexes.md 1.8): cuda-toolkit metapackage + four -cu13 pins + triton
TORCH_REQUIRES = [
    "filelock",
    "typing-extensions>=4.10.0",
    "setuptools>=77.0.3",
    "sympy>=1.13.3",
    "networkx>=2.5.1",
    "jinja2",
    "fsspec>=0.8.5",
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == "Linux"',
    'cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"',
    'nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"',
    'nvidia-cusparselt-cu13==0.8.1; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.29.7; platform_system == "Linux"',
    'nvidia-nvshmem-cu13==3.4.5; platform_system == "Linux"',
    f'triton=={TRITON}; platform_system == "Linux"',
    'optree>=0.13.0; extra == "optree"',
    'opt-einsum>=3.3; extra == "opt-einsum"',
    'pyyaml; extra == "pyyaml"',
]
# flashinfer-python 0.6.x (flashinfer.md 1b), plus cuda-python as the brief asks
FI_REQUIRES = [
    "apache-tvm-ffi!=0.1.8,!=0.1.8.post0,<0.2,>=0.1.6",
    "click",
    "cuda-python",
    "einops",
    "ninja",
    "numpy",
    "nvidia-cudnn-frontend>=1.13.0",
    "nvidia-cutlass-dsl>=4.3.4",
    "nvidia-ml-py",
    "packaging>=24.2",
    "requests",
    "tabulate",
    "torch",
    "tqdm",
]
# cuda-toolkit 13.0.2's extras -> the nvidia runtime wheels
TOOLKIT = {
    "cublas": ("nvidia-cublas", "13.1.0.3"),
    "cudart": ("nvidia-cuda-runtime", "13.0.96"),
    "cufft": ("nvidia-cufft", "12.0.0.61"),
    "cufile": ("nvidia-cufile", "1.15.1.6"),
    "cupti": ("nvidia-cuda-cupti", "13.0.85"),
    "curand": ("nvidia-curand", "10.4.0.35"),
    "cusolver": ("nvidia-cusolver", "12.0.4.66"),
    "cusparse": ("nvidia-cusparse", "12.6.3.3"),
    "nvjitlink": ("nvidia-nvjitlink", "13.0.88"),
    "nvrtc": ("nvidia-cuda-nvrtc", "13.0.88"),
    "nvtx": ("nvidia-nvtx", "13.0.85"),
}


@dataclass(frozen=True)
class Pkg:
    """A PyPI project: newest version, how many versions, kind of wheels, and its requirements."""

    name: str
    newest: str
    count: int = 8
    kind: str = "pure"  # pure | binary (cp310..cp314 x many platforms) | nvidia (py3-none-<platform>)
    requires: tuple[str, ...] = ()
    requires_python: str | None = ">=3.9"
    old_requires_python: str | None = None  # for versions but the two newest (networkx, numpy)
    pinned: dict[str, tuple[str, ...]] = field(default_factory=dict)  # version -> requires


def _pypi_packages() -> list[Pkg]:
    win = 'platform_system == "Windows"'
    pkgs = [
        Pkg("filelock", "3.20.0", 12),
        Pkg("typing-extensions", "4.15.0", 12),
        Pkg("setuptools", "80.9.0", 14),
        Pkg("sympy", "1.14.0", 8, requires=("mpmath<1.4,>=1.1.0",)),
        Pkg("mpmath", "1.3.0", 6),
        Pkg("networkx", "3.5", 10, requires_python=">=3.11", old_requires_python=">=3.10"),
        Pkg("jinja2", "3.1.6", 10, requires=("MarkupSafe>=2.0",)),
        Pkg("markupsafe", "3.0.3", 8, kind="binary"),
        Pkg("fsspec", "2025.9.0", 12),
        Pkg("cuda-bindings", "13.0.3", 8, kind="binary", requires=("cuda-pathfinder~=1.1",)),
        Pkg("cuda-pathfinder", "1.3.0", 8),
        Pkg("cuda-python", "13.0.3", 8, requires=("cuda-bindings~=13.0.3", "cuda-pathfinder~=1.1")),
        Pkg("nvidia-cudnn-cu13", "9.19.0.56", 6, kind="nvidia", requires=("nvidia-cublas",)),
        Pkg("nvidia-cusparselt-cu13", "0.8.1", 4, kind="nvidia"),
        Pkg("nvidia-nccl-cu13", "2.29.7", 6, kind="nvidia"),
        Pkg("nvidia-nvshmem-cu13", "3.4.5", 5, kind="nvidia"),
        Pkg("apache-tvm-ffi", "0.1.9", 9, kind="binary", requires=("typing-extensions>=4.5",)),
        Pkg("click", "8.3.0", 12, requires=(f"colorama; {win}",)),
        Pkg("colorama", "0.4.6", 6),
        Pkg("einops", "0.8.1", 8),
        Pkg("ninja", "1.13.0", 10, kind="binary"),
        Pkg("numpy", "2.3.4", 14, kind="binary", requires_python=">=3.11", old_requires_python=">=3.10"),
        Pkg("nvidia-cudnn-frontend", "1.15.0", 8, kind="binary"),
        Pkg(
            "nvidia-cutlass-dsl", "4.3.4", 6, kind="binary", requires=("nvidia-cutlass-dsl-libs-base==4.3.4", "numpy", "typing-extensions", "cuda-python>=12.8")
        ),
        Pkg("nvidia-cutlass-dsl-libs-base", "4.3.4", 6, kind="binary"),
        Pkg("nvidia-ml-py", "13.580.82", 8),
        Pkg("packaging", "25.0", 10),
        Pkg("requests", "2.32.5", 12, requires=("charset_normalizer<4,>=2", "idna<4,>=2.5", "urllib3<3,>=1.21.1", "certifi>=2017.4.17")),
        Pkg("charset-normalizer", "3.4.3", 8, kind="binary"),
        Pkg("idna", "3.10", 8),
        Pkg("urllib3", "2.5.0", 10),
        Pkg("certifi", "2025.8.3", 12),
        Pkg("tabulate", "0.9.0", 5),
        Pkg("tqdm", "4.67.1", 12, requires=(f"colorama; {win}",)),
        Pkg("optree", "0.17.0", 6, kind="binary"),
        Pkg("flashinfer-cubin", FI_VERSION, 0),  # versions: FI_VERSIONS
        Pkg("flashinfer-python", FI_VERSION, 0, requires=tuple(FI_REQUIRES), requires_python=">=3.10"),
    ]
    toolkit_extras = tuple(f'{n}=={v}; extra == "{e}"' for e, (n, v) in TOOLKIT.items())
    pkgs.append(Pkg("cuda-toolkit", "13.0.2", 6, requires=toolkit_extras))
    deps = {
        "nvidia-cusolver": ("nvidia-cublas", "nvidia-nvjitlink", "nvidia-cusparse"),
        "nvidia-cusparse": ("nvidia-nvjitlink",),
        "nvidia-cufft": ("nvidia-nvjitlink",),
    }
    for name, v in TOOLKIT.values():
        pkgs.append(Pkg(name, v, 5, kind="nvidia", requires=deps.get(name, ())))
    return pkgs


@dataclass(frozen=True)
class Shape:
    """How large a story world's pages are."""

    days: int = 60  # torch nightlies
    pythons: tuple[str, ...] = TORCH_PYTHONS  # torch's CPython tags
    versions: int | None = None  # at most this many releases of each PyPI project (None: the project's own count)
    binary_tags: tuple[str, ...] = ()  # the tags of a native PyPI project's wheels (empty: cp310..cp314 x 5 platforms)
    nvidia_platforms: tuple[str, ...] = ()  # the platforms of NVIDIA's wheels (empty: NVIDIA_PLATFORMS)
    fi_versions: tuple[str, ...] = ()  # FlashInfer releases (empty: FI_VERSIONS)


LARGE = Shape()
SMALL = Shape(
    days=3,
    pythons=("cp312-cp312",),
    versions=2,
    binary_tags=("cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64", "cp312-cp312-manylinux_2_17_aarch64.manylinux2014_aarch64"),
    nvidia_platforms=("manylinux_2_27_x86_64", "manylinux_2_28_aarch64"),
    fi_versions=("0.6.4", "0.6.5"),
)
WIDE = 165  # the wide world's projects besides story 1's (with servekit itself): a closure of 215
FRAMEWORK = "servekit"


def older_versions(newest: str, count: int) -> list[str]:
    """``newest`` and ``count - 1`` plausible older versions (patch, then minor, counted down)."""
    parts = [int(p) for p in newest.split(".")]
    out = []
    while len(out) < count:
        out.append(".".join(map(str, parts)))
        i = len(parts) - 1
        while i > 0 and parts[i] == 0:
            parts[i] = 5
            i -= 1
        parts[i] -= 1
        if parts[0] < 0:
            break
    return out


BINARY_PYTHONS = ("cp310-cp310", "cp311-cp311", "cp312-cp312", "cp313-cp313", "cp314-cp314")
BINARY_PLATFORMS = (
    "manylinux_2_17_x86_64.manylinux2014_x86_64",
    "manylinux_2_17_aarch64.manylinux2014_aarch64",
    "musllinux_1_2_x86_64",
    "macosx_11_0_arm64",
    "win_amd64",
)
NVIDIA_PLATFORMS = ("manylinux_2_27_x86_64", "manylinux_2_28_aarch64", "win_amd64")


def _tags(kind: str, shape: Shape = LARGE) -> list[str]:
    if kind == "binary":
        return list(shape.binary_tags) or [f"{py}-{plat}" for py in BINARY_PYTHONS for plat in BINARY_PLATFORMS]
    if kind == "nvidia":
        return [f"py3-none-{plat}" for plat in shape.nvidia_platforms or NVIDIA_PLATFORMS]
    return ["py3-none-any"]


# The wide world's framework: servekit 1.4.0 needs 24 projects, which need the next level's, six
# levels down; a project needs one parent's worth of new ones plus, now and then, one shared with a
# deeper level or with story 1 (numpy, requests, typing-extensions, packaging). Every requirement is
# a lower bound the newest release meets, so any resolver picks the newest of each: ours and uv's
# closures are the same. One project in eight is native (cp310..cp314 wheels for five platforms).
WIDE_LEVELS = (24, 40, 40, 30, 20, 10)
_SYLLABLES = ("ar", "bel", "cor", "dun", "ex", "fal", "gor", "hal", "ix", "jun", "kel", "lum", "mor", "nix", "ol", "pra", "quo", "ros", "sil", "tor")
_SHARED = ("numpy>=1.26", "requests>=2.28", "typing-extensions>=4.5", "packaging>=23", "tqdm", "click>=8")


def _wide_packages(count: int) -> list[Pkg]:
    import random

    rng = random.Random(23)
    levels: list[list[str]] = []
    made = 0
    for size in WIDE_LEVELS:
        size = min(size, count - 1 - made)
        if size <= 0:
            break
        levels.append([f"svk-{_SYLLABLES[(made + i) % 20]}{_SYLLABLES[(made + i) // 20 % 20]}{made + i:03d}" for i in range(size)])
        made += size
    needs: dict[str, list[str]] = {name: [] for level in levels for name in level}
    for depth in range(1, len(levels)):
        for i, child in enumerate(levels[depth]):  # every project has a parent one level up
            needs[levels[depth - 1][i % len(levels[depth - 1])]].append(f"{child}>=1.0")
    for depth, level in enumerate(levels[:-1]):
        for name in level:
            if rng.random() < 0.3:
                needs[name].append(f"{rng.choice(levels[rng.randrange(depth + 1, len(levels))])}>=1.0")
            if rng.random() < 0.2:
                needs[name].append(rng.choice(_SHARED))
    pkgs = [Pkg(FRAMEWORK, "1.4.0", 6, requires=tuple(f"{n}>=1.0" for n in levels[0]), requires_python=">=3.10")]
    for n, name in enumerate(needs):
        pkgs.append(Pkg(name, f"{1 + n % 3}.{n % 7}.{n % 4}", 4, kind="binary" if n % 8 == 3 else "pure", requires=tuple(dict.fromkeys(needs[name]))))
    return pkgs


# The dependencies the PyTorch nightly index mirrors from PyPI's pages (indexes.md 1.1: its
# PACKAGE_LINKS_ALLOW_LIST, copied verbatim into every variant folder; the real list is longer).
PYTORCH_MIRRORS = ("cuda-toolkit", "cuda-bindings", "numpy", "sympy", "filelock", "networkx", "fsspec", "typing-extensions")


def _html_attr(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


class PypiShapedWorld(World):
    """A ``World`` whose pages have the shape of the real indexes (see the module docstring)."""

    def __init__(self, root: Path, *, pypi_sidecars: bool = True) -> None:
        super().__init__(root)
        self.pypi_sidecars = pypi_sidecars

    def pypi(self, name: str, version: str, **kwargs: Any) -> BuiltWheel:
        wheel = super().pypi(name, version, **kwargs)
        if self.pypi_sidecars:
            entry = self.pages[f"simple/{canonicalize_name(name)}/"][-1]
            entry.sidecar = True
            (self.root / (entry.rel_path + ".metadata")).write_bytes(wheel.metadata)
        return wheel

    def write(self, base: str) -> None:
        if not self.pypi_sidecars:  # the worlds before issue 53
            super().write(base)
            return
        for page, entries in self.pages.items():
            out = self.root / page
            out.mkdir(parents=True, exist_ok=True)
            name = page.rstrip("/").rsplit("/", 1)[-1]
            kind = self.dialect[page]
            if kind == "pytorch":
                (out / "index.html").write_text(_pytorch_page_timed(name, entries))
            elif kind == "flashinfer":
                (out / "index.html").write_text(_flashinfer_page(name, entries, base))
            else:
                html = _pypi_page_html(name, entries, base)
                (out / "index.html").write_text(html)
                (out / "index.json").write_text(_pypi_page_json(name, entries, base))
                if name in PYTORCH_MIRRORS:  # the PyTorch index's verbatim copy (HTML only)
                    mirror = self.root / f"whl/nightly/{CUDA}/{name}"
                    mirror.mkdir(parents=True, exist_ok=True)
                    (mirror / "index.html").write_text(html)


def _upload_time(entry: _Entry) -> str:
    """A nightly's upload time from its date (``.devYYYYMMDD``); a fixed one for the rest."""
    _, _, rest = entry.wheel.filename.partition(".dev")
    day = rest[:8] if rest[:8].isdigit() else "20260301"
    return f"{day[:4]}-{day[4:6]}-{day[6:]}T08:14:51Z"


def _pytorch_page_timed(name: str, entries: list[_Entry]) -> str:
    """PyTorch's template (``world._pytorch_page``) with ``data-upload-time`` after the metadata
    attributes, as manage_v2.py writes it since 2026-04 (indexes.md 1.4)."""
    text = _pytorch_page(name, entries)
    for e in entries:
        text = text.replace(f">{e.wheel.filename}</a>", f' data-upload-time="{_upload_time(e)}">{e.wheel.filename}</a>', 1)
    return text


def _pypi_page_json(name: str, entries: list[_Entry], base: str) -> str:
    """PyPI's PEP 691 page: absolute file URLs, both metadata keys with the sidecar's sha256."""
    files = []
    for e in entries:
        meta = {"sha256": hashlib.sha256(e.wheel.metadata).hexdigest()} if e.sidecar else False
        files.append(
            {
                "core-metadata": meta,
                "data-dist-info-metadata": meta,
                "filename": e.wheel.filename,
                "hashes": {"sha256": e.wheel.sha256},
                "provenance": None,
                "requires-python": e.requires_python,
                "size": e.wheel.size,
                "upload-time": e.upload_time,
                "url": base + e.rel_path,
                "yanked": e.yanked if e.yanked else (True if e.yanked == "" else False),
            }
        )
    versions = list(dict.fromkeys(e.wheel.filename.split("-")[1] for e in entries))
    return json.dumps({"meta": {"api-version": "1.1", "_last-serial": 1}, "name": name, "versions": versions, "files": files})


def _pypi_page_html(name: str, entries: list[_Entry], base: str) -> str:
    """PyPI's PEP 503 page: absolute hrefs with ``#sha256=``, ``data-requires-python`` and both
    metadata attributes."""
    rows = []
    for e in entries:
        attrs = f' data-requires-python="{_html_attr(e.requires_python)}"' if e.requires_python else ""
        if e.yanked is not None:
            attrs += f' data-yanked="{_html_attr(e.yanked)}"'
        if e.sidecar:
            digest = hashlib.sha256(e.wheel.metadata).hexdigest()
            attrs += f' data-dist-info-metadata="sha256={digest}" data-core-metadata="sha256={digest}"'
        rows.append(f'    <a href="{base}{e.rel_path}#sha256={e.wheel.sha256}"{attrs}>{e.wheel.filename}</a><br />')
    return (
        '<!DOCTYPE html>\n<html>\n  <head>\n    <meta name="pypi:repository-version" content="1.1">\n'
        f"    <title>Links for {name}</title>\n  </head>\n  <body>\n    <h1>Links for {name}</h1>\n" + "\n".join(rows) + "\n  </body>\n</html>\n"
    )


@dataclass
class Story:
    world: World
    torch: str  # the newest nightly, installed on the target
    pins: dict[str, str]  # the answer uv is given: torch + the FlashInfer trio (+ servekit in the wide world)
    big: dict[str, int] = field(default_factory=dict)  # rel path -> size of the large wheels
    with_: tuple[str, ...] = ()  # what our resolve adds (--with) for the pins beyond story 1's

    def uv_requirements(self) -> str:
        return "".join(f"{n}=={v}\n" for n, v in self.pins.items())


def torch_dates(days: int) -> list[str]:
    return [(NEWEST - timedelta(days=i)).strftime("%Y%m%d") for i in range(days)]


def build_story(
    root: Path,
    *,
    shape: Shape = LARGE,
    days: int | None = None,
    pythons: tuple[str, ...] | None = None,
    big: int = 0,
    half_sidecars: bool = False,
    wide: int = 0,
    pypi_sidecars: bool = True,
) -> Story:
    """Story 1's world; see the module docstring. ``big`` > 0 makes the metadata world; ``wide`` > 0
    adds that many projects under ``servekit`` (``WIDE``: the 215-package closure)."""
    w = PypiShapedWorld(root, pypi_sidecars=pypi_sidecars)
    sizes: dict[str, int] = {}
    days = shape.days if days is None else days
    pythons = shape.pythons if pythons is None else pythons
    fi_versions = shape.fi_versions or FI_VERSIONS
    for i, day in enumerate(torch_dates(days)):
        v = f"2.12.0.dev{day}+{CUDA}"
        sidecar = not (half_sidecars and i % 2 == 0)  # newest date (i == 0) has none
        for py in pythons:
            for plat in TORCH_PLATFORMS:
                tag = f"{py}-{plat}"
                large = big and py == "cp312-cp312" and plat in (X86, ARM) and i < 3
                if large:
                    wheel = sparse_wheel(root / f"whl/nightly/{CUDA}", "torch", v, tag, TORCH_REQUIRES, big, requires_python=">=3.10")
                    _add_pytorch(w, wheel, f"whl/nightly/{CUDA}/", sidecar)
                    sizes[f"whl/nightly/{CUDA}/{wheel.filename}"] = wheel.size
                else:
                    w.pytorch("torch", v, tag=tag, variant=CUDA, requires=TORCH_REQUIRES, requires_python=">=3.10", sidecar=sidecar)
    for py in ("cp310-cp310", "cp311-cp311", "cp312-cp312", "cp313-cp313", "cp314-cp314"):
        for plat in (X86, ARM):
            w.pytorch("triton", TRITON, tag=f"{py}-{plat}", variant=CUDA, at_root=True, requires_python=">=3.10")

    pypi = _pypi_packages() + (_wide_packages(wide) if wide else [])
    for pkg in pypi:
        versions = list(fi_versions[::-1]) if pkg.name.startswith("flashinfer-") else older_versions(pkg.newest, pkg.count)
        for j, v in enumerate(versions[: shape.versions]):
            rp = pkg.requires_python if j < 2 or pkg.old_requires_python is None else pkg.old_requires_python
            for tag in _tags(pkg.kind, shape):
                w.pypi(pkg.name, v, tag=tag, requires=list(pkg.requires), requires_python=rp, upload_time=f"2026-0{1 + j % 3}-1{j % 10}T08:00:00Z")
    for v in fi_versions:
        for label in ("cu128", "cu129", "cu130"):
            for arch in (X86, ARM):
                page = f"{label}/flashinfer-jit-cache"
                if big and label == CUDA and v in ("0.6.4", "0.6.5"):
                    wheel = sparse_wheel(
                        root / f"releases/download/v{v}", "flashinfer-jit-cache", f"{v}+{label}", f"cp39-abi3-{arch}", [], big // 2, hashed=True
                    )
                    w._add(f"fi/{page}/", "flashinfer", _Entry(wheel, f"releases/download/v{v}/{wheel.filename}", absolute=True))
                    sizes[f"releases/download/v{v}/{wheel.filename}"] = wheel.size
                else:
                    w.flashinfer("flashinfer-jit-cache", f"{v}+{label}", tag=f"cp39-abi3-{arch}", page=page)
    pins = {
        "torch": f"2.12.0.dev{torch_dates(1)[0]}+{CUDA}",
        "flashinfer-python": FI_VERSION,
        "flashinfer-cubin": FI_VERSION,
        "flashinfer-jit-cache": f"{FI_VERSION}+{CUDA}",
    }
    if wide:
        pins[FRAMEWORK] = "1.4.0"
    return Story(world=w, torch=pins["torch"], pins=pins, big=sizes, with_=(FRAMEWORK,) if wide else ())


WORLDS = ("large", "small", "wide")  # the cold-resolve worlds of run.py, ab.py and probe.py


def build_named(name: str, root: Path, *, pypi_sidecars: bool = True) -> Story:
    """One of ``WORLDS``: story 1 on large pages, on small pages, or with the 215-package closure
    (``pypi_sidecars=False``: in the shape before issue 53, for ``reconcile.py``)."""
    if name == "small":
        return build_story(root, shape=SMALL, pypi_sidecars=pypi_sidecars)
    if name == "wide":
        return build_story(root, wide=WIDE, pypi_sidecars=pypi_sidecars)
    if name != "large":
        raise ValueError(f"no world {name!r}: {', '.join(WORLDS)}")
    return build_story(root, pypi_sidecars=pypi_sidecars)


def _add_pytorch(w: World, wheel: BuiltWheel, wheel_dir: str, sidecar: bool) -> None:
    if sidecar:
        (w.root / wheel_dir / (wheel.filename + ".metadata")).write_bytes(wheel.metadata)
    page = f"whl/nightly/{CUDA}/{canonicalize_name('torch')}/"
    w._add(page, "pytorch", _Entry(wheel, wheel_dir + wheel.filename, sidecar=sidecar))


# -- large wheels as sparse files ----------------------------------------------------------------
_ZERO = bytes(16 * 2**20)
_zero_crc: dict[int, int] = {}
_zero_sha: dict[int, str] = {}


def _crc_and_record_hash(size: int) -> tuple[int, str]:
    if size not in _zero_crc:
        crc, h = 0, hashlib.sha256()
        left = size
        while left:
            chunk = _ZERO[: min(left, len(_ZERO))]
            crc = zlib.crc32(chunk, crc)
            h.update(chunk)
            left -= len(chunk)
        import base64

        _zero_crc[size] = crc
        _zero_sha[size] = "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
    return _zero_crc[size], _zero_sha[size]


def sparse_wheel(
    directory: Path, name: str, version: str, tag: str, requires: list[str], size: int, *, requires_python: str | None = None, hashed: bool = False
) -> BuiltWheel:
    """A real wheel of about ``size`` bytes: a stored member of zeros (a hole on disk) first, then
    the package, METADATA, WHEEL and RECORD, then the central directory, so METADATA sits in the
    last few KB, as in real wheels. ``hashed``: compute the file's sha256 (FlashInfer pages show it).
    """
    dist = canonicalize_name(name).replace("-", "_")
    filename = f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = metadata_text(name, version, requires, requires_python)
    pad_name = f"{dist}/_data.bin"
    crc, pad_hash = _crc_and_record_hash(size)
    members = {
        f"{dist}/__init__.py": f'__version__ = "{version}"\n'.encode(),
        f"{info}/METADATA": meta,
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: resolve-gpu-stack-bench\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    import base64

    def rec(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = f"{pad_name},{pad_hash},{size}\n" + "".join(f"{p},{rec(d)},{len(d)}\n" for p, d in members.items()) + f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    central = []
    with open(path, "wb") as fh:
        # the padding member, stored, written as a hole
        name_b = pad_name.encode()
        fh.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, size, size, len(name_b), 0) + name_b)
        central.append((name_b, 0, 0, crc, size, size, 0))
        fh.seek(size, os.SEEK_CUR)
        for member, data in members.items():
            offset = fh.tell()
            comp = zlib.compressobj(6, zlib.DEFLATED, -15)
            packed = comp.compress(data) + comp.flush()
            crc_m = zlib.crc32(data)
            name_b = member.encode()
            fh.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc_m, len(packed), len(data), len(name_b), 0) + name_b + packed)
            central.append((name_b, offset, 8, crc_m, len(packed), len(data), 0))
        cd_start = fh.tell()
        for name_b, offset, method, crc_m, csize, usize, _ in central:
            fh.write(
                struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0x21, crc_m, csize, usize, len(name_b), 0, 0, 0, 0, 0o644 << 16, offset)
                + name_b
            )
        cd_size = fh.tell() - cd_start
        fh.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), cd_size, cd_start, 0))
        total = fh.tell()
    sha = _file_sha256(path) if hashed else ""
    return BuiltWheel(path=path, filename=filename, sha256=sha, size=total, metadata=meta)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(16 * 2**20):
            h.update(chunk)
    return h.hexdigest()


# -- page bodies for the parsing figures -----------------------------------------------------------
def pytorch_page_body(rows: int = 1300) -> bytes:
    """A nightly ``torch/`` page in PyTorch's template (absolute R2-style hrefs, PEP 658 twins)."""
    entries = []
    days = -(-rows // (len(TORCH_PYTHONS) * len(TORCH_PLATFORMS)))
    for day in torch_dates(days):
        v = f"2.12.0.dev{day}+{CUDA}"
        for py in TORCH_PYTHONS:
            for plat in TORCH_PLATFORMS:
                fn = f"torch-{v}-{py}-{plat}.whl"
                meta = f"{fn}\n".encode()
                fake = BuiltWheel(path=Path(fn), filename=fn, sha256="", size=0, metadata=meta)
                entries.append(_Entry(fake, f"whl/nightly/{CUDA}/{fn}"))
    text = _pytorch_page("torch", entries[:rows])
    return text.replace('href="/whl/', 'href="https://download-r2.pytorch.example/whl/').encode()


def pypi_json_body(files: int = 5000) -> bytes:
    """A PEP 691 project page shaped like PyPI's (hashes, requires-python, size, upload-time, yanked,
    core-metadata), ``files`` wheels of a binary project across versions and platforms."""
    out = []
    tags = _tags("binary") + [
        "cp313-cp313t-manylinux_2_17_x86_64.manylinux2014_x86_64",
        "cp314-cp314t-win_amd64",
        "pp310-pypy310_pp73-manylinux_2_17_x86_64.manylinux2014_x86_64",
    ]
    need = files // len(tags) + 1
    versions = [f"{major}.{minor}.{patch}" for major in (2, 1) for minor in range(30, -1, -1) for patch in range(9, -1, -1)][:need]
    for v in versions:
        for tag in tags:
            fn = f"numpy-{v}-{tag}.whl"
            digest = hashlib.sha256(fn.encode()).hexdigest()
            out.append(
                {
                    "core-metadata": {"sha256": hashlib.sha256(digest.encode()).hexdigest()},
                    "data-dist-info-metadata": {"sha256": hashlib.sha256(digest.encode()).hexdigest()},
                    "filename": fn,
                    "hashes": {"sha256": digest},
                    "provenance": None,
                    "requires-python": ">=3.10",
                    "size": 16_000_000 + len(out),
                    "upload-time": "2025-06-07T12:34:56.789012Z",
                    "url": f"https://files.pypi.example/packages/{digest[:2]}/{digest[2:4]}/{digest[4:]}/{fn}",
                    "yanked": False,
                }
            )
            if len(out) == files:
                break
        if len(out) == files:
            break
    return json.dumps({"meta": {"api-version": "1.1", "_last-serial": 1}, "name": "numpy", "versions": versions, "files": out}, indent=1).encode()
