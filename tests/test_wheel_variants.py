"""Issue 50, item 4 (the part without the flag): wheel variants (PEP 817/825, drafts) on an index.

A release published as variant wheels (``NAME-V-py3-none-any-LABEL.whl``) with its
``NAME-V-variants.json`` is read for what it is: no installer the tool hands a plan to can install
those files without a preview (pip has none; uv has them behind ``wheel-variants``), so a plan
never names one: each is set aside with that reason, said once per page as a warning, and the
newest release with a plain wheel is planned. ``candidates`` shows the reason on the page; the
lock names the plain wheel.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from abi_world import have_cxx
from server import IndexServer
from today_world import TORCH, build_today_world
from wheels import build_wheel
from world import World

from resolve_gpu_stack.cli.app import main

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

LABELS = ("cu132", "null")


def add_variants(w: World, name: str, version: str) -> list[str]:
    """Variant wheels of ``name`` ``version`` and their variants.json (PEP 825's shape), linked
    from the written PyPI page of ``name`` (HTML and JSON)."""
    built = build_wheel(w.root / "variant-build", name, version)
    files = w.root / "files"
    names = []
    for label in LABELS:
        filename = built.filename.removesuffix(".whl") + f"-{label}.whl"
        shutil.copyfile(built.path, files / filename)
        names.append(filename)
    variants = {
        "default-priorities": {"namespace": ["nvidia"]},
        "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"], "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"}},
        "variants": {"cu132": {"nvidia": {"cuda_version_lower_bound": ["13.2"]}}, "null": {}},
    }
    meta = f"{name}-{version}-variants.json"
    (files / meta).write_text(json.dumps(variants))
    page = w.root / "simple" / name
    rows = [*names, meta]
    digests = {f: hashlib.sha256((files / f).read_bytes()).hexdigest() for f in rows}
    html = (page / "index.html").read_text()
    links = "".join(f'    <a href="../../files/{f}#sha256={digests[f]}">{f}</a><br />\n' for f in rows)
    (page / "index.html").write_text(html.replace("  </body>", links + "  </body>", 1))
    data = json.loads((page / "index.json").read_text())
    data["files"] += [{"filename": f, "url": f"../../files/{f}", "hashes": {"sha256": digests[f]}, "upload-time": "2026-12-05T00:00:00Z"} for f in rows]
    (page / "index.json").write_text(json.dumps(data))
    return names


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, IndexServer, list[str]]]:
    root = tmp_path_factory.mktemp("variants")
    w, _ = build_today_world(root)
    w.pypi("varkern", "1.0")
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        names = add_variants(w, "varkern", "1.1")
        yield w, srv, names


def flags(w: World, srv: IndexServer, tmp_path: Path) -> list[str]:
    urls = w.index_urls(srv.url)
    return [
        "--python",
        "3.11",
        "--platform",
        "x86_64-manylinux_2_28",
        "--installed",
        f"torch=={TORCH}",
        *(x for n, u in urls.items() for x in ("--index", f"{n}={u}")),
        "--cache-dir",
        str(tmp_path / "c"),
    ]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_release_of_variant_wheels_only_is_passed_over_for_the_plain_one_with_the_reason(world, capsys, caplog, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, names = world
    base = ["--torch", "installed", "--flashinfer", "none", "--with", "varkern", *flags(w, srv, tmp_path)]
    code, out, err = cli(capsys, "resolve", *base, "--format", "json")
    assert code == 0, err
    got = {p["name"]: p for p in json.loads(out)["packages"]}
    assert got["varkern"]["version"] == "1.0" and got["varkern"]["url"].endswith("varkern-1.0-py3-none-any.whl"), got["varkern"]
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "variant wheel" in r.getMessage()]
    assert len(said) == 1, said
    assert "2 variant wheels (PEP 825, a draft) set aside: pip and uv without its wheel-variants preview cannot install a variant wheel" in said[0]
    # the lock a plain installer reads names the plain wheel, never a variant
    lock = tmp_path / "pylock.toml"
    code, _, err = cli(capsys, "lock", *base, "-o", str(lock))
    assert code == 0, err
    text = lock.read_text()
    [pkg] = [p for p in tomllib.loads(text)["packages"] if p["name"] == "varkern"]
    assert pkg["version"] == "1.0" and all(n not in text for n in names)


def test_candidates_shows_each_variant_wheel_set_aside_and_why(world, capsys, tmp_path) -> None:
    w, srv, names = world
    code, out, err = cli(capsys, "candidates", "varkern", *flags(w, srv, tmp_path), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert {r["version"] for r in report["files"]} == {"1.0"}
    warnings = [x for p in report["pages"] for x in p["warnings"]]
    for name, label in zip(names, ("cu132", "null")):
        assert any(x.startswith(f"{name}: a variant wheel (label '{label}'; PEP 825, a draft): set aside") for x in warnings), warnings
    assert any(x.startswith("varkern-1.1-variants.json: the variant metadata of a release (PEP 825, a draft): not read") for x in warnings), warnings


def test_variant_file_names_are_read_by_the_draft_grammar() -> None:
    from resolve_gpu_stack.index.variants import is_variants_json, variant_wheel

    found = variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-cu132.whl")
    assert found is not None and (str(found.version), found.label) == ("2.15.0", "cu132")
    assert variant_wheel("torch-2.15.0-1-cp312-cp312-manylinux_2_28_x86_64-null.whl") is not None  # with a build tag
    assert variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-CU132.whl") is None  # labels are lower case
    assert variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-a23456789abcdefgh.whl") is None  # 17 characters
    assert variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl") is None  # a plain wheel
    assert is_variants_json("torch-2.15.0-variants.json") and not is_variants_json("torch-2.15.0.json")


def _rules():  # type: ignore[no-untyped-def]
    from resolve_gpu_stack.data.definitions import load_definitions

    rules = load_definitions().variants
    assert rules is not None
    return rules


def _target(cuda: str = "cu132", gpus: tuple[str, ...] = ("sm90", "sm120"), torch: str | None = TORCH):  # type: ignore[no-untyped-def]
    from packaging.version import Version

    from resolve_gpu_stack.index.variants import VariantTarget
    from resolve_gpu_stack.model.cuda import CudaLabel
    from resolve_gpu_stack.model.gpu import GpuArch

    return VariantTarget(CudaLabel.parse(cuda), tuple(GpuArch.parse(g) for g in gpus), None if torch is None else Version(torch))


def test_the_variant_matching_the_targets_cuda_gpus_and_torch_is_picked_by_the_bundled_rules() -> None:
    from packaging.version import Version

    from resolve_gpu_stack.index.variants import pick_variant, read_variants_json

    series = ".".join(map(str, Version(TORCH).release[:2]))
    doc = {
        "variants": {
            "cu132": {"nvidia": {"cuda_version_lower_bound": ["13.2"], "sm_arch": ["9.0", "12.0"]}, "abi_dependency": {"torch": [series]}},
            "cu140": {"nvidia": {"cuda_version_lower_bound": ["14.0"]}, "abi_dependency": {"torch": [series]}},
            "torch01": {"nvidia": {"cuda_version_lower_bound": ["13.0"]}, "abi_dependency": {"torch": ["0.1"]}},
            "sm100": {"nvidia": {"sm_arch": ["100"]}},
            "tpu": {"tpu": {"version": ["v5"]}},
            "null": {},
        }
    }
    variants = read_variants_json(json.dumps(doc))
    label, why = pick_variant(variants, _target(), _rules())
    assert label == "cu132", why
    assert "not the target's CUDA 13.2" in why["cu140"]
    assert "not the kept torch" in why["torch01"]
    assert "does not serve sm90, sm120" in why["sm100"]
    assert "does not judge" in why["tpu"]
    assert "more specific" in why["null"]
    # an older CUDA on the target: the cu132 build is not for it; null (no properties) is what fits
    label, why = pick_variant(variants, _target(cuda="cu128"), _rules())
    assert label == "null" and "not the target's CUDA 12.8" in why["cu132"]
    # one --gpu the build does not serve: not planned for that set
    label, why = pick_variant({k: variants[k] for k in ("cu132", "sm100")}, _target(gpus=("sm100",)), _rules())
    assert label == "sm100" and "does not serve sm100" in why["cu132"]
    # nothing fits: no label, every reason said
    label, why = pick_variant({"cu140": variants["cu140"]}, _target(), _rules())
    assert label is None and set(why) == {"cu140"}


def test_a_variants_json_that_is_not_pep_825s_shape_is_a_clear_error() -> None:
    from resolve_gpu_stack.index.variants import VariantsJsonError, read_variants_json

    for bad, said in (
        ("{", "not JSON"),
        ("[]", "no 'variants' object"),
        ('{"variants": {"CU132": {}}}', "a label of 1 to 16"),
        ('{"variants": {"cu132": {"nvidia": []}}}', "is not an object"),
        ('{"variants": {"cu132": {"nvidia": {"sm_arch": "90"}}}}', "not a non-empty list of strings"),
    ):
        with pytest.raises(VariantsJsonError, match=said):
            read_variants_json(bad)


def test_a_variants_rule_that_is_not_well_formed_is_refused_naming_the_row(tmp_path: Path) -> None:
    from resolve_gpu_stack.data.definitions import load_definitions
    from resolve_gpu_stack.data.toml import data_dir
    from resolve_gpu_stack.errors import IndexDefinitionError

    shutil.copytree(data_dir(), tmp_path / "d")
    comp = tmp_path / "d" / "components.toml"
    comp.write_text(comp.read_text() + '\n[[variants.property]]\nnamespace = "x"\nfeature = "y"\njudge = "guess"\nvalue = "."\n')
    with pytest.raises(IndexDefinitionError, match=r"variants.property #5.*'judge' 'guess' is not one of"):
        load_definitions(tmp_path / "d")
