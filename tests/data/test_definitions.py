"""indexes/*.toml through TomlReader: the [channels] data drives the page templates, and every
problem in a definition file names the file, the table and the key."""

from __future__ import annotations

import fnmatch
import itertools
import shutil
from pathlib import Path

import pytest

from resolve_gpu_stack.data.definitions import RouteContext, data_dir, load_definitions
from resolve_gpu_stack.data.rules import NamePatterns
from resolve_gpu_stack.errors import IndexDefinitionError


@pytest.fixture
def indexes(tmp_path: Path) -> Path:
    out = tmp_path / "indexes"
    out.mkdir()
    for f in data_dir().glob("*.toml"):
        shutil.copy(f, out / f.name)
    return out


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def _urls(directory: Path, name: str, ctx: RouteContext) -> list[str]:
    return [p.url for p in load_definitions(directory).pages_for(name, ctx)]


def test_channel_prefixes_come_from_the_channels_tables(indexes: Path) -> None:
    _edit(indexes / "pytorch.toml", 'test = "test/"', 'test = "rc/"')
    _edit(indexes / "flashinfer.toml", 'nightly = "nightly/"', 'nightly = "dev/"')
    assert _urls(indexes, "torch", RouteContext(torch_channel="test", cuda="cu130")) == ["https://download.pytorch.org/whl/rc/cu130/torch/"]
    assert _urls(indexes, "flashinfer-jit-cache", RouteContext(cuda="cu130", flashinfer_channel="nightly")) == [
        "https://flashinfer.ai/whl/dev/cu130/flashinfer-jit-cache/"
    ]


def test_an_unknown_channel_has_no_page() -> None:
    assert load_definitions().pages_for("torch", RouteContext(torch_channel="weekly", cuda="cu130")) == []


def test_a_channel_the_routes_need_must_have_a_prefix(indexes: Path) -> None:
    _edit(indexes / "pytorch.toml", 'test = "test/"\n', "")
    with pytest.raises(IndexDefinitionError, match=r"pytorch\.toml: channels: no path prefix for channel 'test'"):
        load_definitions(indexes)


@pytest.mark.parametrize(
    ("file", "old", "new", "message"),
    [
        ("pytorch.toml", 'dialect = "html"', "dialect = 1", r"pytorch\.toml: top level: 'dialect' must be a string, not an integer"),
        ("pytorch.toml", 'dialect = "html"', 'dialect = "xml"', r"pytorch\.toml: top level: 'dialect' 'xml' is not one of html, json-or-html"),
        ("pytorch.toml", 'dialect = "html"', 'dialect = "html"\nhashes = "all"', r"pytorch\.toml: top level: unknown key 'hashes'"),
        ("pytorch.toml", "retention-days = 60", 'retention-days = "60"', r"'retention-days' must be an integer, not a string"),
        ("flashinfer.toml", 'name = "flashinfer"', 'name = "pypi"', r"flashinfer\.toml: top level: 'name' is 'pypi', expected 'flashinfer'"),
        (
            "routing.toml",
            'page = "{torch_channel}{cuda}/{name}/"',
            'page = "{channel}{cuda}/{name}/"',
            r"routing\.toml: route #1: page .* uses unknown variable \{channel\}",
        ),
        ("routing.toml", 'index = "pytorch"', 'index = "conda"', r"routing\.toml: route #1: unknown index 'conda'"),
        (
            "routing.toml",
            'when = { flashinfer = "stable" }',
            'when = { flashinfer = "weekly" }',
            r"routing\.toml: route #6 when: 'flashinfer' 'weekly' is not one of",
        ),
        (
            "routing.toml",
            'when = { torch = "pypi" }',
            'when = { torch = "conda" }',
            r"routing\.toml: route #3 when: 'torch' 'conda' is not one of pytorch, pypi",
        ),
        ("routing.toml", '"{name}/"\nkept = true', '"{name}/"\nkept = "yes"', r"routing\.toml: route #4: 'kept' must be"),
        ("routing.toml", 'when = { flashinfer = "stable" }', 'wehn = { flashinfer = "stable" }', r"routing\.toml: route #6: unknown key 'wehn'"),
        ("routing.toml", 'versions = "<=0.6.13"', 'versions = "<=0.6.13!"', r"routing\.toml: route #9: bad version specifier"),
        ("components.toml", 'coupling = "torch-abi"', 'coupling = "abi"', r"components\.toml: coupling #2: 'abi' is not one of"),
        ("components.toml", 'packages = ["torch"]', "packages = []", r"components\.toml: coupling #1: 'packages' must be a non-empty array"),
        (
            "components.toml",
            'agnostic-since = "0.4.0rc4"',
            'agnostic-since = "soon"',
            r"components\.toml: flashinfer 'agnostic-since': 'soon' is not a version",
        ),
        ("components.toml", 'providers = "flashinfer-jit-cache-sm*"\n', "", r"components\.toml: flashinfer: missing 'providers'"),
        ("components.toml", 'versions = ">=0.4.0,<0.5.3"', "", r"components\.toml: jit-cache-archs #1: missing 'versions'"),
        ("components.toml", 'stable-since = "2.9"', 'stable-since = "soon"', r"components\.toml: abi 'stable-since': 'soon' is not a version"),
        ("components.toml", 'stable-since = "2.9"\n', "", r"components\.toml: abi: missing 'stable-since'"),
        ("components.toml", 'shim-prefixes = ["aoti_torch_", "torch_"]', "shim-prefixes = []", r"abi: 'shim-prefixes' must be a non-empty array"),
        ("components.toml", 'cxx-namespaces = ["c10", "at", "torch", "caffe2"]', 'cxx-namespaces = "c10"', r"abi: 'cxx-namespaces' must be an array"),
        (
            "components.toml",
            "build-members = ['_torch(?P<major>",
            "build-members = ['_torch(?P<maj>",
            r"abi: 'build-members' .* has no groups named 'major' and 'minor'",
        ),
        (
            "components.toml",
            "build-members = ['_torch(?P<major>",
            "build-members = ['_torch((?P<major>",
            r"abi: 'build-members' .* is not a regular expression",
        ),
        ("components.toml", 'python-prefixes = ["THP"]', 'python-prefix = ["THP"]', r"components\.toml: abi: unknown key 'python-prefix'"),
        (
            "components.toml",
            'package = "torch-c-dlpack-ext"\ntorch = "2.10"',
            'package = "torch-c-dlpack-ext"\ntorch = "2.x"',
            r"abi\.no-builds-from #1 'torch': '2\.x' is not a version",
        ),
        ("components.toml", 'package = "torch-c-dlpack-ext"\n', "", r"components\.toml: abi\.no-builds-from #1: missing 'package'"),
    ],
)
def test_a_bad_definition_names_file_table_and_key(indexes: Path, file: str, old: str, new: str, message: str) -> None:
    _edit(indexes / file, old, new)
    with pytest.raises(IndexDefinitionError, match=message):
        load_definitions(indexes)


def test_flashinfer_extras_are_loaded_and_a_bad_row_is_named(indexes: Path) -> None:
    # [flashinfer.extras] (issue 50): the extra of torch's CUDA major, read and checked
    assert [e.name for e in load_definitions(indexes).flashinfer.extras_for(13, "pypi")] == ["cu13"]
    _edit(indexes / "components.toml", 'cu13 = { when-cuda-major = 13, since = "0.6.8rc1", when-torch = "pypi" }', 'anything = "goes"')
    with pytest.raises(IndexDefinitionError, match="flashinfer.extras"):
        load_definitions(indexes)


def test_the_bundled_definitions_load() -> None:
    defs = load_definitions()
    assert dict(defs.indexes["pytorch"].channels) == {"nightly": "nightly/", "test": "test/", "stable": ""}
    assert defs.indexes["flashinfer"].cuda_labels == ("cu128", "cu129", "cu130", "cu134")
    from packaging.version import Version

    assert defs.flashinfer.jit_cache_archs(Version("0.6.12"), "cu130", "aarch64") == ("7.5", "8.0", "8.9", "9.0a", "10.0a", "10.3a", "12.0f", "11.0a")
    assert defs.flashinfer.jit_cache_archs(Version("0.7.0"), "cu130", "x86_64") is None


def test_the_abi_rules_load_with_their_rows() -> None:
    from packaging.version import Version

    abi = load_definitions().abi
    assert (abi.stable_since, abi.shim_versioned_since) == (Version("2.9"), Version("2.10"))
    assert abi.is_shim("aoti_torch_empty_strided") and abi.is_shim("torch_call_dispatcher") and not abi.is_shim("_ZN5torch3fooEv")
    assert abi.build_of("torch_c_dlpack_ext/libtorch_c_dlpack_addon_torch24-cpu.so") == "2.4"
    row = abi.loads_no_builds("torch-c-dlpack-ext", Version("0.1.5"), Version("2.12.0.dev20260307+cu130"))
    assert row is not None and row.torch == Version("2.10") and "DLPack" in row.why
    assert abi.loads_no_builds("torch-c-dlpack-ext", Version("0.1.5"), Version("2.9.1")) is None
    assert abi.loads_no_builds("xformers", Version("0.0.35"), Version("2.12")) is None


def test_a_no_builds_row_may_cover_some_versions_only(indexes: Path) -> None:
    from packaging.version import Version

    _edit(indexes / "components.toml", 'torch = "2.10"\n', 'torch = "2.10"\nversions = "<0.2"\n')
    abi = load_definitions(indexes).abi
    assert abi.loads_no_builds("torch-c-dlpack-ext", Version("0.1.5"), Version("2.11")) is not None
    assert abi.loads_no_builds("torch-c-dlpack-ext", Version("0.2.0"), Version("2.11")) is None


# -- the digest of their data (the reuse key's part) and the GPU table that comes with them ---------


def test_the_digest_is_of_the_data_only_never_of_a_memo():
    from packaging.version import Version

    from resolve_gpu_stack.model.declared import declared_target
    from resolve_gpu_stack.model.request import ResolveRequest
    from resolve_gpu_stack.resolver.reuse import result_key

    untouched, asked = load_definitions(), load_definitions()
    assert asked.coupling_rule("flashinfer-python", Version("0.2.5+cu124torch2.5")) is not None  # fills the per-name rule memo
    assert asked.coupling_rule("sgl-kernel", Version("0.3.21")) is None
    assert asked.coupling("numpy", Version("2.2.0"))
    asked.gpu_table()  # parses the GPU table
    assert asked.digest == untouched.digest
    request = ResolveRequest.build(target=declared_target("3.12", "x86_64-manylinux_2_28", []), cuda="cu130")
    assert result_key(request, asked) == result_key(request, untouched)  # the next run's reuse key is the same
    assert load_definitions().with_index_urls({"pypi": "https://mirror.example/simple/"}).digest != untouched.digest  # data counts


def test_the_gpu_table_comes_with_the_definitions_and_is_part_of_their_data(indexes: Path):
    from resolve_gpu_stack.data.gpus import load_gpu_table

    assert load_definitions(indexes).gpu_table() == load_gpu_table(indexes / "gpus.toml")
    before = load_definitions(indexes).digest
    _edit(indexes / "gpus.toml", "[[gpu]]", "# a comment\n[[gpu]]")
    assert load_definitions(indexes).digest != before  # another gpus.toml: another reuse key
    (indexes / "gpus.toml").write_text("[[gpu]]\narch = 1\n")
    with pytest.raises(IndexDefinitionError, match="gpus.toml"):
        load_definitions(indexes).gpu_table()  # read with the definitions, parsed when first asked for


def test_name_patterns_match_as_fnmatch_does() -> None:
    """A route's, a coupling rule's and the providers' patterns, compiled once, name exactly the
    packages ``fnmatch.fnmatchcase`` over each pattern names (case-sensitive; ``[``, ``?`` and ``*``)."""
    d = load_definitions()
    shipped = {p for r in d.routes for p in r.patterns} | {p for c in d.couplings for p in c.patterns} | {d.flashinfer.providers}
    patterns = sorted(shipped | {"a[bc]*", "x?y", "[", "foo[", "a\\b", "*", "[!a]*"})
    names = [
        "torch",
        "Torch",
        "numpy",
        "flashinfer-jit-cache",
        "flashinfer-jit-cache-sm90",
        "nvidia-cublas-cu12",
        "abc",
        "ab",
        "xzy",
        "[",
        "foo[",
        "a\\b",
        "",
        "x\ny",
        "b",
    ]
    for k in (1, 2, 3):
        for combo in itertools.combinations(patterns, k):
            match = NamePatterns.of(combo)
            for name in names:
                assert match(name) == any(fnmatch.fnmatchcase(name, p) for p in combo), (combo, name)
