"""Real builds for ``--build`` tests and the build benchmark: a stand-in torch whose
``torch/lib/libtorch.so`` (compiled here with g++) exports a few C++ symbols and is loaded by
``import torch``, and sdists whose ``setup.py`` imports torch and compiles a C++ extension that
links libtorch and calls into it (its build-system requires setuptools and torch, as real torch
extensions do). setuptools itself is served from a wheel repacked from this test environment's
own installed setuptools (no network, nothing large in the repository).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import platform
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from support.wheels import BuiltWheel, build_wheel, record_hash
from support.world import World, _Entry

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
PLAT = f"manylinux_2_28_{platform.machine()}"
NIGHTLY = "2.12.0.dev20260307+cu130"
CXX = shutil.which("g++") or shutil.which("c++")
ADD_OFFSET = 1000  # the stand-in c10::stand_in_add(a, b) returns a + b + 1000: a call that reached libtorch

LIBTORCH_CPP = (
    "namespace c10 { int stand_in_add(int a, int b) { return a + b + " + str(ADD_OFFSET) + "; } }\n"
    "namespace at { int stand_in_version() { return 212; } }\n"
    "namespace torch { namespace detail { int stand_in_registered = 1; } }\n"
)
TORCH_INIT = '''"""A stand-in torch: loads torch/lib/libtorch.so globally, as the real one does."""
import ctypes as _ctypes
import os as _os

_lib = _ctypes.CDLL(_os.path.join(_os.path.dirname(__file__), "lib", "libtorch.so"), mode=_ctypes.RTLD_GLOBAL)
__version__ = "{version}"
from . import _C, cuda  # noqa: E402,F401 -- as the real torch: torch.cuda.get_arch_list() after import torch
'''
HEADER = "namespace c10 { int stand_in_add(int a, int b); }\n"

SETUP_PY = """import os
import torch  # the build environment's torch: the kept one
from setuptools import Extension, setup

root = os.path.dirname(torch.__file__)
setup(
    name="{name}",
    version="{version}",
    packages=["{module}"],
    ext_modules=[Extension("{module}._C", ["{module}/_C.cpp"], include_dirs=[os.path.join(root, "include")],
                           library_dirs=[os.path.join(root, "lib")], libraries=["torch"], language="c++")],
)
"""
EXT_CPP = """#include <Python.h>
#include "stand_in.h"
BROKEN
static PyObject* add(PyObject*, PyObject* args) {
    int a, b;
    if (!PyArg_ParseTuple(args, "ii", &a, &b)) return NULL;
    return PyLong_FromLong(c10::stand_in_add(a, b));
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "calls c10::stand_in_add in libtorch"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, methods};
PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
"""
PYPROJECT = """[build-system]
requires = [{requires}]
build-backend = "setuptools.build_meta"
"""


def have_cxx() -> bool:
    return CXX is not None and sys.platform == "linux"


TORCH_ARCHS = ("sm_90", "sm_120", "compute_120")  # what the stand-in's torch.cuda.get_arch_list() says


STAND_IN_CUDA = """import torch


def is_available():
    return False  # no GPU, no driver here


def get_arch_list():
    if not is_available():
        return []
    flags = torch._C._cuda_getArchFlags()
    return [] if flags is None else flags.split()
"""


# torch.utils.cpp_extension as the real one behaves where it matters to a build machine: CUDA_HOME is
# $CUDA_HOME, else the folder above the bin/ of the nvcc on PATH (a wrapper script in /usr/local/bin
# gives /usr/local: the tool must set CUDA_HOME); the arch flags come from TORCH_CUDA_ARCH_LIST, and with
# none set and no GPU visible it fails as torch does (IndexError in _get_cuda_arch_flags); .cu sources
# are compiled by $CUDA_HOME/bin/nvcc with those flags.
STAND_IN_CPP_EXTENSION = """import os
import shutil
import subprocess

from setuptools import Extension
from setuptools.command.build_ext import build_ext


def _find_cuda_home():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home is None:
        nvcc = shutil.which("nvcc")
        home = os.path.dirname(os.path.dirname(nvcc)) if nvcc else None
    return home


CUDA_HOME = _find_cuda_home()


def _get_cuda_arch_flags():
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if not archs:
        arch_list = []  # torch: the archs of the visible GPUs; none here
        return ["-gencode=arch=compute_%s,code=sm_%s" % (arch_list[-1], arch_list[-1])]
    flags = []
    for arch in archs.replace(" ", ";").split(";"):
        num = arch.replace("+PTX", "").replace(".", "")
        flags.append("-gencode=arch=compute_%s,code=sm_%s" % (num, num))
        if arch.endswith("+PTX"):
            flags.append("-gencode=arch=compute_%s,code=compute_%s" % (num, num))
    return flags


def CUDAExtension(name, sources, *args, **kwargs):
    lib = "lib64" if os.path.exists(os.path.join(CUDA_HOME, "lib64")) or not os.path.exists(os.path.join(CUDA_HOME, "lib")) else "lib"  # as torch's
    kwargs["library_dirs"] = kwargs.get("library_dirs", []) + [os.path.join(CUDA_HOME, lib)]
    kwargs["libraries"] = kwargs.get("libraries", []) + ["cudart_static", "rt", "pthread", "dl"]
    kwargs.setdefault("language", "c++")
    return Extension(name, sources, *args, **kwargs)


class BuildExtension(build_ext):
    def build_extensions(self):
        compiler = self.compiler
        compiler.src_extensions += [".cu"]
        original = compiler._compile

        def _compile(obj, src, ext, cc_args, extra_postargs, pp_opts):
            if not src.endswith(".cu"):
                return original(obj, src, ext, cc_args, extra_postargs, pp_opts)
            command = [os.path.join(CUDA_HOME, "bin", "nvcc"), "-c", src, "-o", obj, "-Xcompiler", "-fPIC", *pp_opts, *_get_cuda_arch_flags()]
            print(" ".join(command), flush=True)
            subprocess.check_call(command)

        compiler._compile = _compile
        super().build_extensions()
"""


def stand_in_torch(
    directory: Path,
    version: str = NIGHTLY,
    *,
    requires: tuple[str, ...] = (),
    archs: tuple[str, ...] = TORCH_ARCHS,
    arch_flags: str | None = None,
    abi: str = "",
) -> BuiltWheel:
    """A torch wheel for this interpreter whose ``torch/lib/libtorch.so`` is real (g++), and
    whose ``torch._C._cuda_getArchFlags()`` gives ``archs`` (or the text ``arch_flags``; "": none,
    as a CPU torch), its ``torch.cuda.get_arch_list()`` [] as a real torch's without a GPU. ``abi``:
    an inline namespace around its C++ symbols (another torch's ABI: an extension built against it
    fails to load on the others with an undefined symbol)."""
    assert CXX is not None
    work = directory / f"torch-src-{version}"
    work.mkdir(parents=True, exist_ok=True)
    (work / "lib.cpp").write_text(_in_abi(LIBTORCH_CPP, abi))
    subprocess.run([CXX, "-shared", "-fPIC", "-Wl,-soname,libtorch.so", "-o", str(work / "libtorch.so"), str(work / "lib.cpp")], check=True)
    files = {
        "torch/__init__.py": TORCH_INIT.format(version=version).encode(),
        "torch/lib/libtorch.so": (work / "libtorch.so").read_bytes(),
        "torch/include/stand_in.h": _in_abi(HEADER, abi).encode(),
        # as a real torch < 2.10 on a machine without a GPU or driver: get_arch_list() is [] (it asks
        # is_available() first); the flags it was compiled with are in torch._C._cuda_getArchFlags()
        "torch/cuda/__init__.py": STAND_IN_CUDA.encode(),
        "torch/utils/__init__.py": b"",
        "torch/utils/cpp_extension.py": STAND_IN_CPP_EXTENSION.encode(),
        "torch/_C/__init__.py": f"def _cuda_getArchFlags():\n    return {arch_flags if arch_flags is not None else ' '.join(archs)!r} or None\n".encode(),
    }
    return build_wheel(directory, "torch", version, f"{PY}-{PY}-{PLAT}", list(requires), files=files)


def _in_abi(cpp: str, abi: str) -> str:
    """``cpp``'s ``namespace c10 {`` in an inline namespace ``abi`` (its symbols' names change, its source not)."""
    return cpp.replace("namespace c10 { ", f"namespace c10 {{ inline namespace {abi} {{ ", 1).replace("}\n", "} }\n", 1) if abi else cpp


@dataclass(frozen=True)
class Sdist:
    path: Path
    filename: str
    sha256: str
    size: int
    name: str
    version: str
    module: str


def extension_sdist(
    directory: Path,
    name: str = "ext-kernel",
    version: str = "1.0",
    *,
    requires: tuple[str, ...] = ("setuptools>=70.1", "torch"),
    broken: bool = False,
    sleep: float = 0.0,
    install_requires: tuple[str, ...] = (),
    filler: int = 0,
    prelude: str = "",
    backend: str | None = None,
    files: dict[str, str] | None = None,
) -> Sdist:
    """``<name>-<version>.tar.gz``: setup.py imports torch and compiles ``<module>/_C`` against
    ``libtorch`` (``broken``: a C++ error; ``sleep``: setup.py waits that long first; ``filler``:
    that many more template instantiations to compile, for a build that takes a while;
    ``prelude``: code setup.py runs first; ``backend``: an in-tree build backend (backend-path
    ".") among ``files``, more files of the sdist)."""
    module, members = _extension_members(name, version, requires=requires, broken=broken, sleep=sleep, install_requires=install_requires, filler=filler)
    if prelude:
        members["setup.py"] = prelude + "\n" + members["setup.py"]
    if backend is not None:
        members["pyproject.toml"] = members["pyproject.toml"].replace(
            'build-backend = "setuptools.build_meta"', f'build-backend = "{backend}"\nbackend-path = ["."]'
        )
    members.update(files or {})
    root = f"{module}-{version}"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{module}-{version}.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for member, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{member}")
            info.size, info.mtime, info.mode = len(data), 1767225600, 0o644
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(buf.getvalue())
    data = path.read_bytes()
    return Sdist(path=path, filename=path.name, sha256=hashlib.sha256(data).hexdigest(), size=len(data), name=name, version=version, module=module)


def _extension_members(
    name: str, version: str, *, requires: tuple[str, ...], broken: bool, sleep: float, install_requires: tuple[str, ...], filler: int
) -> tuple[str, dict[str, str]]:
    module = canonicalize_name(name).replace("-", "_")
    setup = SETUP_PY.format(name=name, version=version, module=module)
    if install_requires:
        setup = setup.replace("    packages=", f"    install_requires={list(install_requires)!r},\n    packages=")
    if sleep:
        setup = f"import sys, time\nif 'bdist_wheel' in sys.argv:\n    time.sleep({sleep})\n" + setup  # the build itself, not the PEP 517 questions before it
    pkg_info = f"Metadata-Version: 2.2\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in install_requires) + "\n"
    members = {
        "PKG-INFO": pkg_info,
        "setup.py": setup,
        "pyproject.toml": PYPROJECT.format(requires=", ".join(f'"{r}"' for r in requires)),
        f"{module}/__init__.py": "import torch  # loads libtorch.so, as a real extension does\nfrom ._C import add  # noqa: E402\n",
        f"{module}/_C.cpp": EXT_CPP.replace("BROKEN", ("this is not C++;" if broken else "") + _filler(filler)),
    }
    return module, members


@dataclass(frozen=True)
class SourceRepo:
    repo: Path  # a git repository whose ``subdirectory`` holds the project (no sdist anywhere)
    subdirectory: str
    tag: str
    name: str
    version: str
    module: str

    @property
    def tree(self) -> Path:
        return self.repo / self.subdirectory

    def reference(self, rev: str | None = None) -> str:
        sub = f"#subdirectory={self.subdirectory}" if self.subdirectory else ""
        return f"{self.name} @ git+file://{self.repo}@{rev or self.tag}{sub}"


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


def extension_repo(directory: Path, name: str = "src-kernel", version: str = "1.0", *, subdirectory: str = "kernel", tag: str = "v1.0") -> SourceRepo:
    """A git repository (``git init``, one commit, tag ``tag``) whose ``subdirectory`` is the
    extension project of ``extension_sdist`` with static ``[project]`` metadata (PEP 621)."""
    module, members = _extension_members(name, version, requires=("setuptools>=70.1", "torch"), broken=False, sleep=0.0, install_requires=(), filler=0)
    del members["PKG-INFO"]
    members["pyproject.toml"] += f'\n[project]\nname = "{name}"\nversion = "{version}"\ndependencies = []\n'
    members["setup.py"] = members["setup.py"].replace(f'    name="{name}",\n    version="{version}",\n', "")
    root = directory / "repo"
    for member, text in members.items():
        (root / subdirectory / member).parent.mkdir(parents=True, exist_ok=True)
        (root / subdirectory / member).write_text(text)
    (root / "README").write_text("a repository with the project in a folder\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    git(root, "tag", tag)
    return SourceRepo(repo=root, subdirectory=subdirectory, tag=tag, name=name, version=version, module=module)


SETUP_PY_COMPUTED = """import os
import torch  # the build environment's torch: the kept one, for the metadata too
from setuptools import Extension, setup

root = os.path.dirname(torch.__file__)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "{module}", "VERSION.txt")) as fh:
    base = fh.read().strip()
setup(
    name="{name}",
    version=base + ".post" + str(6 * 7),  # computed here: no static metadata anywhere
    install_requires=[],
    packages=["{module}"],
    ext_modules=[Extension("{module}._C", ["{module}/_C.cpp"], include_dirs=[os.path.join(root, "include")],
                           library_dirs=[os.path.join(root, "lib")], libraries=["torch"], language="c++")],
)
"""


def setup_py_repo(directory: Path, name: str = "dyn-kernel", base: str = "2.1", *, tag: str = "v2.1") -> SourceRepo:
    """A git repository (tag ``tag``) at the root of which is a setup.py project whose version is
    computed in setup.py (``<base>.post42``): no PKG-INFO, no [project] table, only [build-system]."""
    module, members = _extension_members(name, base, requires=("setuptools>=70.1", "torch"), broken=False, sleep=0.0, install_requires=(), filler=0)
    del members["PKG-INFO"]
    members["setup.py"] = SETUP_PY_COMPUTED.format(name=name, module=module)
    members[f"{module}/VERSION.txt"] = base + "\n"
    members["MANIFEST.in"] = f"include {module}/VERSION.txt\n"
    root = directory / "repo"
    for member, text in members.items():
        (root / member).parent.mkdir(parents=True, exist_ok=True)
        (root / member).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    git(root, "tag", tag)
    return SourceRepo(repo=root, subdirectory="", tag=tag, name=name, version=f"{base}.post42", module=module)


# setup.py reads its version as setuptools-scm does in an archive: from .git_archival.txt's describe-name
SETUP_PY_SCM = """import os
from setuptools import setup

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, ".git_archival.txt")) as fh:
    fields = dict(line.split(": ", 1) for line in fh.read().splitlines() if ": " in line)
tag, distance, _ = fields["describe-name"].rsplit("-", 2)
base = tag.lstrip("v")
setup(name="{name}", version=base if distance == "0" else base + ".post" + distance, packages=["{module}"])
"""


def scm_repo(directory: Path, name: str = "scm-kernel", *, tag: str = "v3.0") -> SourceRepo:
    """A git repository of a pure setup.py project whose version comes from git history as
    setuptools-scm reads it in an archive (``.git_archival.txt``; the repository has none: the tool
    keeps what the version needs): tag ``tag``, then one more commit on ``main``."""
    module = canonicalize_name(name).replace("-", "_")
    root = directory / "repo"
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text("")
    (root / "setup.py").write_text(SETUP_PY_SCM.format(name=name, module=module))
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n')
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    git(root, "tag", tag)
    (root / "NEWS").write_text("after the tag\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "second")
    return SourceRepo(repo=root, subdirectory="", tag=tag, name=name, version=tag.lstrip("v"), module=module)


def _filler(n: int) -> str:
    """C++ that takes the compiler a while: ``n`` instantiations of a recursive template."""
    if not n:
        return ""
    head = "template <int N> struct Fill { static int get(int x) { return Fill<N - 1>::get(x * 3 + N) ^ N; } };\n"
    head += "template <> struct Fill<0> { static int get(int x) { return x; } };\n"
    return head + "".join(f"int filler_{i}(int x) {{ return Fill<{40 + i % 60}>::get(x + {i}); }}\n" for i in range(n))


def serve_sdist(world: World, sdist: Sdist, page: str = "simple") -> None:
    """List ``sdist`` on the world's PyPI-style page ``<page>/<name>/`` (its file under ``files/``)."""
    target = world.root / "files" / sdist.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sdist.path, target)
    entry = _Entry(
        BuiltWheel(path=target, filename=sdist.filename, sha256=sdist.sha256, size=sdist.size, metadata=b""),
        "files/" + sdist.filename,
        sidecar=False,
        upload_time="2026-01-01T00:00:00Z",
    )
    world._add(f"{page}/{canonicalize_name(sdist.name)}/", "pypi", entry)


def repacked_setuptools(out: Path) -> Path:
    """The wheel this test environment's setuptools was installed from, rebuilt from its RECORD
    (the build backend the loopback PyPI serves: no network)."""
    dist = importlib.metadata.distribution("setuptools")
    info = next(f for f in dist.files or () if f.name == "WHEEL" and f.parent.name.endswith(".dist-info"))
    dist_info = info.parent.name
    stem = dist_info[: -len(".dist-info")]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{stem}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in dist.files or ():
            name = file.as_posix()
            if name.startswith("../") or "__pycache__" in name or name.endswith(".pyc"):
                continue
            if file.parent.name == dist_info and file.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
            record.append(f"{name},{record_hash(data)},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        zf.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return path


def serve_wheel_file(world: World, path: Path, page: str = "simple") -> BuiltWheel:
    """List an existing wheel file on ``<page>/<name>/`` (PyPI style)."""
    data = path.read_bytes()
    name = canonicalize_name(path.name.split("-", 1)[0])
    with zipfile.ZipFile(path) as zf:
        metadata = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
    target = world.root / "files" / path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)
    wheel = BuiltWheel(path=target, filename=path.name, sha256=hashlib.sha256(data).hexdigest(), size=len(data), metadata=metadata)
    world._add(f"{page}/{name}/", "pypi", _Entry(wheel, "files/" + path.name, sidecar=False, upload_time="2026-01-01T00:00:00Z"))
    return wheel


def build_world(root: Path, *, sdists: tuple[Sdist, ...] = (), torch_version: str = NIGHTLY, arch_flags: str | None = None) -> World:
    """The PyTorch nightly index with the stand-in torch, a PyPI with setuptools, the sdists, and a
    PyPI torch of another version that must never be used."""
    w = World(root / "www")
    torch = stand_in_torch(w.root / "whl" / "nightly" / "cu130", torch_version, arch_flags=arch_flags)
    (torch.path.parent / (torch.filename + ".metadata")).write_bytes(torch.metadata)
    w._add("whl/nightly/cu130/torch/", "pytorch", _Entry(torch, f"whl/nightly/cu130/{torch.filename}", sidecar=True))
    serve_wheel_file(w, repacked_setuptools(root / "setuptools"))
    decoy = stand_in_torch(root / "decoy", "2.5.0", abi="v250")  # a PyPI torch of another ABI: routing must never read its page
    serve_wheel_file(w, decoy.path)
    for sdist in sdists:
        serve_sdist(w, sdist)
    return w


def torch_wheel(world: World) -> Path:
    [path] = (world.root / "whl" / "nightly" / "cu130").glob("torch-*.whl")
    return path


def run_in(python: str, code: str) -> str:
    return subprocess.run([python, "-c", textwrap.dedent(code)], check=True, capture_output=True, text=True).stdout.strip()
