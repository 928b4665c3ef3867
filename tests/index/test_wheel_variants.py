"""Issue 50, item 4: wheel variants (PEP 817/825/850, drafts) on an index, planned behind a flag.

A loopback world of variant wheels (``tests/support/variants_world.py``): releases published as variant
wheels (``NAME-V-TAGS-LABEL.whl``) with their ``NAME-V-variants.json``, beside plain releases,
and hostile ones (a variants.json that is not JSON, one whose sha256 the page misstates, labels and
values that try to be options). Through every door:

- without ``--wheel-variants``: a plain wheel is planned (one warning names the variant wheels
  passed over), or the plan says why none fits, naming the flag;
- with it (flag or config key): the release's variants.json is read (hash-checked), each variant
  judged by the data rules against the target's CUDA, ``--gpu`` set and kept torch, the most
  specific match planned and still confirmed by the scan (a variant whose properties lie about its
  torch is refused by its symbols); ``candidates`` lists each variant with its properties and
  whether it matches;
- uv cannot install a variant wheel: ``install`` stops before any change, ``export uv`` writes
  nothing, and a lock naming one (``lock -o``, a config ``lock``) is refused by ``check`` and
  ``install --lock`` with the way out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from support.abi_world import have_cxx
from support.doors import run_cli
from support.server import IndexServer
from support.today_world import TORCH, build_today_world
from support.variants_world import CU132, CU140, SERIES, add_variants, variants_doc
from support.world import World

pytestmark = pytest.mark.skipif(not have_cxx(), reason="needs a C++ compiler to build the shared objects")

VARKERN = "varkern-1.1-cp39-abi3-manylinux_2_28_x86_64-cu132.whl"  # the variant that fits the kept torch 2.15.0 + CUDA 13.2


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, IndexServer, Path]]:
    """The world served, and a venv holding PyPI's torch 2.15.0 stand-in (its CUDA 13.2 by its pins)."""
    root = tmp_path_factory.mktemp("variants")
    w, objects = build_today_world(root)
    for name in ("varkern", "varlie", "varsm", "varbad", "varhash", "varopt", "varnojson", "varnohash"):
        w.pypi(name, "1.0")  # each has a plain release below its variant one
    with IndexServer(w.root) as srv:
        w.write(srv.url)
        ok, bad = objects["locked_ok.so"], objects["locked_bad.so"]
        # compiled variants: one for the kept torch and its CUDA, one for a CUDA beyond it, the null variant
        add_variants(w, "varkern", "1.1", ("cu132", "cu140", "null"), variants_doc({"cu132": CU132, "cu140": CU140, "null": {}}), so=ok)
        # a variant whose properties say the kept torch, whose shared object needs another torch's symbols
        add_variants(w, "varlie", "1.1", ("cu132",), variants_doc({"cu132": CU132}), so=bad)
        # per GPU: planned by the --gpu set; without one, the null variant
        sm = {"sm90": {"nvidia": {"sm_arch": ["9.0"]}}, "sm100": {"nvidia": {"sm_arch": ["10.0"]}}, "null": {}}
        add_variants(w, "varsm", "1.1", tuple(sm), variants_doc(sm))
        add_variants(w, "varonly", "1.0", ("cu140",), variants_doc({"cu140": CU140}))  # variants only, none for CUDA 13.2
        # hostile: not JSON; a sha256 the page misstates; a label and a value that try to be options
        add_variants(w, "varbad", "1.1", ("cu132",), "{")
        add_variants(w, "varhash", "1.1", ("cu132",), variants_doc({"cu132": CU132}), sha256="0" * 64)
        opt = {"cu132": {"abi_dependency": {"torch": ["--index-url=http://127.0.0.1:9/evil"]}}, "--index-url": {}}
        add_variants(w, "varopt", "1.1", ("cu132",), variants_doc(opt))
        add_variants(w, "varnojson", "1.1", ("cu132",), variants_doc({"cu132": CU132}), link_json=False)
        add_variants(w, "varnohash", "1.1", ("cu132",), variants_doc({"cu132": CU132}), json_hash=False)
        venv = root / "venv"
        env = {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--index-url", f"{srv.url}pypi-torch/", f"torch=={TORCH}"]
        subprocess.run(pip, check=True, env=env, capture_output=True)
        yield w, srv, venv


def indexes(w: World, srv: IndexServer, tmp_path: Path) -> list[str]:
    return [*(x for n, u in w.index_urls(srv.url).items() for x in ("--index", f"{n}={u}")), "--cache-dir", str(tmp_path / "c")]


def flags(w: World, srv: IndexServer, tmp_path: Path) -> list[str]:
    """A declared target: Python 3.11 on x86_64 with PyPI's torch 2.15.0 kept."""
    target = ["--python", "3.11", "--platform", "x86_64-manylinux_2_28", "--installed", f"torch=={TORCH}"]
    return [*target, "--torch", "installed", "--flashinfer", "none", *indexes(w, srv, tmp_path)]


def planned(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict[str, object]]:
    code, out, err = run_cli(capsys, "resolve", *argv, "--format", "json")
    assert code == 0, err
    return {p["name"]: p for p in json.loads(out)["packages"]}


def file_of(row: dict[str, object]) -> str:
    return str(row["url"]).rsplit("/", 1)[-1]


def site_files(venv: Path) -> dict[Path, bytes]:
    files = sorted((venv / "lib").glob("python*/site-packages/**/*"))
    return {p: p.read_bytes() for p in files if p.is_file() and "__pycache__" not in p.parts}


# -- without the flag ------------------------------------------------------------------------------


def test_without_the_flag_a_plain_wheel_is_planned_or_the_reason_names_the_flag(world, capsys, caplog, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, _ = world
    base = flags(w, srv, tmp_path)
    got = planned(capsys, *base, "--with", "varkern")
    assert got["varkern"]["version"] == "1.0" and file_of(got["varkern"]) == "varkern-1.0-py3-none-any.whl", got["varkern"]
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "variant wheel" in r.getMessage()]
    assert said == ["varkern: 3 variant wheels (PEP 825, a draft) not planned: judged only with --wheel-variants, and uv cannot install one"], said
    # the lock a plain installer reads names the plain wheel, never a variant
    lock = tmp_path / "pylock.toml"
    code, _, err = run_cli(capsys, "lock", *base, "--with", "varkern", "-o", str(lock))
    assert code == 0, err
    [pkg] = [p for p in tomllib.loads(lock.read_text())["packages"] if p["name"] == "varkern"]
    assert pkg["version"] == "1.0" and [x["name"] for x in pkg["wheels"]] == ["varkern-1.0-py3-none-any.whl"]
    # a package published as variant wheels only: no plan, and the reason names the flag
    code, _, err = run_cli(capsys, "resolve", *base, "--with", "varonly")
    assert code == 1 and "Traceback" not in err
    assert "varonly: its index offers this target only variant wheels (PEP 825, a draft; labels cu140), planned only with --wheel-variants" in err, err
    assert "hint: pass --wheel-variants" in err, err


# -- with the flag: planned at resolve, lock -o, config lock; refused where uv would install it ------


def test_with_the_flag_the_matching_variant_is_planned_and_confirmed_by_the_scan(world, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, _ = world
    base = [*flags(w, srv, tmp_path), "--wheel-variants"]
    code, out, err = run_cli(capsys, "resolve", *base, "--with", "varkern", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    got = {p["name"]: p for p in plan["packages"]}["varkern"]
    # cu132 (CUDA >= 13.2, torch 2.15) over null (fits, less specific) and cu140 (CUDA 14.0)
    assert (got["version"], file_of(got)) == ("1.1", VARKERN), got
    said = f"varkern 1.1: the variant wheel 'cu132' (PEP 825, a draft; abi_dependency :: torch :: {SERIES}; nvidia :: cuda_version_lower_bound :: 13.2)"
    assert any(n.startswith(said) and n.endswith("install, export uv and lock refuse this plan") for n in plan["notes"]), plan["notes"]
    assert got["abi"] is not None and got["abi"]["kind"] == "locked" and got["abi"]["refusal"] is None, got["abi"]  # scanned like any compiled wheel
    # the scan still decides: properties that say torch 2.15 do not let in a build that needs other symbols
    code, _, err = run_cli(capsys, "resolve", *base, "--with", "varlie")
    assert code == 1 and "varlie 1.1" in err and "which torch 2.15.0 does not export" in err, err
    # --gpu picks among sm_arch variants; with no --gpu, only the null variant can be shown to fit
    for gpu, label in (("sm90", "sm90"), ("sm_100", "sm100"), (None, "null")):
        row = planned(capsys, *base, *(("--gpu", gpu) if gpu else ()), "--with", "varsm")["varsm"]
        assert file_of(row) == f"varsm-1.1-py3-none-any-{label}.whl", (gpu, row)
    # none fits: the reason says why each is not planned
    code, _, err = run_cli(capsys, "resolve", *base, "--with", "varonly")
    assert code == 1 and "Traceback" not in err
    assert (
        "varonly: none of its variant wheels (PEP 825, a draft) fits this target: label 'cu140': nvidia :: cuda_version_lower_bound :: 14.0: not the target's CUDA 13.2"
        in err
    ), err


def test_no_lock_names_a_variant_and_check_and_install_lock_refuse_one_named_by_hand(world, capsys, tmp_path, monkeypatch, uv_env) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, venv = world
    lock = tmp_path / "pylock.toml"
    # lock -o: the plan is made (resolve shows it), but no lock is written: PEP 751 names plain wheels
    code, _, err = run_cli(capsys, "lock", *flags(w, srv, tmp_path), "--wheel-variants", "--with", "varkern", "-o", str(lock))
    assert code == 1 and "Traceback" not in err, err
    assert f"cannot write pylock.toml: the plan holds variant wheel: varkern ({VARKERN}); a lock names plain wheels only" in err, err
    assert "hint: drop --wheel-variants" in err and not lock.exists(), err
    # the config door: the key in a target's table; the same refusal, nothing written
    urls = ", ".join(f'{n} = "{u}"' for n, u in w.index_urls(srv.url).items())
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.resolve-gpu-stack]\nindexes = {{ {urls} }}\n\n"
        f'[[tool.resolve-gpu-stack.target]]\nname = "node"\npython = "3.11"\nplatform = "x86_64-manylinux_2_28"\n'
        f'installed = ["torch=={TORCH}"]\ntorch = "installed"\nflashinfer = "none"\nwith = ["varkern"]\nwheel-variants = true\n'
        f'output = ["pylock.node.toml"]\n'
    )
    code, _, err = run_cli(capsys, "lock", "--cache-dir", str(tmp_path / "c"))
    assert code == 1 and "cannot write pylock.node.toml: the plan holds variant wheel" in err, err
    assert not (tmp_path / "pylock.node.toml").exists()
    # a lock naming one by hand (the plain lock, its wheel swapped): check and install --lock refuse it
    code, _, err = run_cli(capsys, "lock", *flags(w, srv, tmp_path), "--with", "varkern", "-o", str(lock))
    assert code == 0, err
    text = lock.read_text()
    assert "varkern-1.0-py3-none-any.whl" in text
    lock.write_text(text.replace("varkern-1.0-py3-none-any.whl", VARKERN).replace('version = "1.0"', 'version = "1.1"'))
    code, out, err = run_cli(capsys, "check", str(lock))
    assert code == 1 and "Traceback" not in err, (out, err)
    assert f"Invalid wheel filename '{VARKERN}'" in out + err and "a variant wheel (PEP 825, a draft); a lock names plain wheels only" in out + err, (out, err)
    before = site_files(venv)
    python = str(venv / "bin" / "python")
    code, out, err = run_cli(capsys, "install", "--lock", str(lock), "--python", python, "--force-target", "--cache-dir", str(tmp_path / "c"))
    assert code == 1 and "Traceback" not in err, err
    assert "refused before anything was installed" in err and f"Invalid wheel filename '{VARKERN}'" in err and "a variant wheel (PEP 825, a draft)" in err, err
    assert site_files(venv) == before


@pytest.mark.slow
def test_install_dry_run_shows_the_variant_and_install_refuses_it_before_any_change(world, capsys, tmp_path, monkeypatch, uv_env) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, venv = world
    python = str(venv / "bin" / "python")
    base = ["--python", python, "--torch", "installed", "--flashinfer", "none", *indexes(w, srv, tmp_path), "--with", "varkern"]
    before = site_files(venv)
    code, out, err = run_cli(capsys, "install", *base, "--wheel-variants", "--dry-run", "--format", "json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["packages"]}
    assert rows["varkern"]["version"] == "1.1", rows["varkern"]
    assert "install (not a dry run) will refuse this plan" in err and VARKERN in err, err
    code, out, err = run_cli(capsys, "install", *base, "--wheel-variants")
    assert code == 1 and "Traceback" not in err, err
    assert f"cannot install: the plan holds variant wheel: varkern ({VARKERN})" in err and "uv" in err, err
    assert "hint: drop --wheel-variants" in err, err
    assert site_files(venv) == before
    # without the flag, the plain release installs
    code, out, err = run_cli(capsys, "install", *base, "--format", "json")
    assert code == 0, err
    assert any("varkern-1.0.dist-info" in str(p) for p in site_files(venv)), "varkern 1.0 not installed"


def test_export_uv_refuses_a_plan_holding_a_variant_and_writes_nothing(world, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, _ = world
    project = tmp_path / "proj"
    project.mkdir()
    text = '[project]\nname = "app"\nversion = "0"\nrequires-python = ">=3.11"\n'
    (project / "pyproject.toml").write_text(text)
    code, _, err = run_cli(capsys, "export", "uv", *flags(w, srv, tmp_path), "--wheel-variants", "--with", "varkern", "--project", str(project))
    assert code == 1 and "Traceback" not in err, err
    assert f"cannot export uv: the plan holds variant wheel: varkern ({VARKERN})" in err, err
    assert (project / "pyproject.toml").read_text() == text


@pytest.mark.slow
def test_real_uv_refuses_the_variant_wheels_without_its_preview(world, uv_env) -> None:
    """Why the doors refuse: the uv the tool drives cannot install a variant wheel; its hidden
    preview reads the world's variants.json (the shape uv parses), and judges by its own providers."""
    from resolve_gpu_stack.env.install import find_uv

    w, srv, venv = world
    uv = find_uv(uv_env)
    base = [uv, "pip", "install", "--dry-run", "--python", str(venv / "bin" / "python"), "--index-url", f"{srv.url}simple/", "varkern==1.1"]
    plain = subprocess.run(base, capture_output=True, text=True, env=uv_env)
    assert plain.returncode != 0 and "only unsupported wheel variants" in plain.stderr, plain.stderr
    preview = subprocess.run([*base[:3], "--preview-features", "wheel-variants", *base[3:], "-v"], capture_output=True, text=True, env=uv_env)
    assert "varkern-1.1-variants.json" in preview.stderr and "Failed to parse variant metadata" not in preview.stderr, preview.stderr


def test_a_snapshot_records_the_variants_json_and_replays_the_variant_plan_offline(world, capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, _ = world
    snap = tmp_path / "snap"
    # varbad's variants.json is not JSON: recorded as served (not read as a page), judged on replay
    base = [*flags(w, srv, tmp_path), "--wheel-variants", "--with", "varkern", "--with", "varbad", "--format", "json"]
    code, out, err = run_cli(capsys, "snapshot", "--output", str(snap), *base)
    assert code == 0, err
    live = {p["name"]: p for p in json.loads(out)["packages"]}
    assert file_of(live["varkern"]) == VARKERN and file_of(live["varbad"]) == "varbad-1.0-py3-none-any.whl", live
    before = len(srv.log)
    got = planned(capsys, "--snapshot", str(snap), *base[:-2])
    assert (file_of(got["varkern"]), got["varkern"]["sha256"], got["varkern"]["abi"]) == (VARKERN, live["varkern"]["sha256"], live["varkern"]["abi"])
    assert file_of(got["varbad"]) == "varbad-1.0-py3-none-any.whl"
    assert len(srv.log) == before  # replayed: nothing was asked of the server, the variants.json included


# -- candidates ------------------------------------------------------------------------------------


def test_candidates_lists_each_variant_with_its_properties_and_whether_it_matches(world, capsys, tmp_path) -> None:
    w, srv, _ = world
    code, out, err = run_cli(capsys, "candidates", "varkern", *flags(w, srv, tmp_path), "--wheel-variants", "--format", "json")
    assert code == 0, err
    rows = {r["filename"]: r for r in json.loads(out)["files"]}
    stem = "varkern-1.1-cp39-abi3-manylinux_2_28_x86_64"
    cu132, cu140, null = (rows[f"{stem}-{label}.whl"] for label in ("cu132", "cu140", "null"))
    assert (cu132["variant"], cu132["fits_target"]) == ("cu132", True), cu132
    assert cu132["variant_properties"] == f"abi_dependency :: torch :: {SERIES}; nvidia :: cuda_version_lower_bound :: 13.2"
    assert cu132["abi"].startswith("locked"), cu132  # the scan's verdict beside the properties'
    assert cu140["fits_target"] is False and "not the target's CUDA 13.2" in cu140["why_not"], cu140
    assert (null["variant"], null["variant_properties"], null["fits_target"]) == ("null", "(none)", True), null
    assert rows["varkern-1.0-py3-none-any.whl"]["variant"] is None
    # without the flag: each listed with its label, none fits, the flag named
    code, out, err = run_cli(capsys, "candidates", "varkern", *flags(w, srv, tmp_path), "--format", "json")
    assert code == 0, err
    rows = {r["filename"]: r for r in json.loads(out)["files"]}
    for label in ("cu132", "cu140", "null"):
        row = rows[f"{stem}-{label}.whl"]
        assert row["variant"] == label and row["fits_target"] is False, row
        assert row["why_not"] == f"a variant wheel (PEP 825, a draft): label '{label}': judged and planned only with --wheel-variants", row
    # --gpu decides among sm_arch variants here too
    code, out, err = run_cli(capsys, "candidates", "varsm", *flags(w, srv, tmp_path), "--wheel-variants", "--gpu", "sm90", "--format", "json")
    assert code == 0, err
    fits = {r["variant"]: (r["fits_target"], r["why_not"]) for r in json.loads(out)["files"] if r["variant"]}
    assert fits["sm90"] == (True, None) and fits["null"] == (True, None), fits
    assert fits["sm100"][0] is False and "nvidia :: sm_arch :: 10.0: does not serve sm90" in fits["sm100"][1], fits
    # the table says it too
    code, out, err = run_cli(capsys, "candidates", "varkern", *flags(w, srv, tmp_path), "--wheel-variants", "--format", "table")
    assert code == 0, err
    assert "variant cu140: abi_dependency :: torch" in " ".join(out.split()), out


# -- hostile variants.json -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("varbad", "varbad-1.1-variants.json is not PEP 825's shape: not JSON"),
        ("varhash", "varhash-1.1-variants.json does not match the sha256 its page gives"),
        ("varopt", "varopt-1.1-variants.json is not PEP 825's shape: variant '--index-url': a label of 1 to 16 of [0-9a-z._]"),
        ("varnojson", "its release links no varnojson-1.1-variants.json (PEP 825): its properties are not known"),
        ("varnohash", "varnohash-1.1-variants.json is linked without a sha256: not trusted"),
    ],
)
def test_a_hostile_variants_json_plans_no_variant_and_says_why(world, capsys, caplog, tmp_path, monkeypatch, name, said) -> None:
    monkeypatch.chdir(tmp_path)
    w, srv, _ = world
    base = [*flags(w, srv, tmp_path), "--wheel-variants"]
    got = planned(capsys, *base, "--with", name)[name]
    assert (got["version"], file_of(got)) == ("1.0", f"{name}-1.0-py3-none-any.whl"), got
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.getMessage().startswith(f"{name}: ")]
    assert any(said in m and m.endswith("its variant wheels are not planned") for m in warned), warned
    code, out, err = run_cli(capsys, "candidates", name, *base, "--format", "json")
    assert code == 0, err
    [row] = [r for r in json.loads(out)["files"] if r["variant"] is not None]
    assert row["fits_target"] is False and said in row["why_not"], row


def test_a_property_value_that_tries_to_be_an_option_is_not_read_as_one() -> None:
    from resolve_gpu_stack.index.variants import judge_variant, read_variants_json

    doc = read_variants_json(variants_doc({"cu132": {"abi_dependency": {"torch": ["--index-url=http://127.0.0.1:9/evil"]}}}))
    why = judge_variant(doc["cu132"], _target(), _rules())
    assert why is not None and "not read as torch-series expects" in why, why


# -- the page and the names, read ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["html", "json"])
def test_both_page_dialects_give_each_variant_its_releases_variants_json(world, kind) -> None:
    from resolve_gpu_stack.index.parse import RowFilter, parse_page
    from resolve_gpu_stack.model import IndexPage

    w, srv, _ = world
    body = (w.root / "simple" / "varkern" / f"index.{kind}").read_bytes()
    ctype = "application/vnd.pypi.simple.v1+json" if kind == "json" else "text/html"
    page = IndexPage(url=f"{srv.url}simple/varkern/", content=body, content_type=ctype)
    for keep in (None, RowFilter(frozenset(), sdists=False)):  # a target's filter keeps the variants.json row
        parsed = parse_page(page, index="pypi", keep=keep)
        refs = {f.variant.label: f.variant for f in parsed.variants if f.variant is not None}
        if keep is None:
            assert [f.filename for f in parsed.files] == ["varkern-1.0-py3-none-any.whl"]
            assert set(refs) == {"cu132", "cu140", "null"}, parsed
        for ref in refs.values():
            assert ref.json_url == f"{srv.url}files/varkern-1.1-variants.json" and ref.json_sha256 is not None, ref
        assert not any("variants.json" in x for x in parsed.warnings), parsed.warnings


def test_variant_file_names_are_read_by_the_draft_grammar() -> None:
    from packaging.version import Version

    from resolve_gpu_stack.index.variants import is_variant_filename, is_variants_json, variant_wheel, variants_json_release

    found = variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-cu132.whl")
    assert found is not None and (str(found.version), found.label) == ("2.15.0", "cu132")
    assert variant_wheel("torch-2.15.0-1-cp312-cp312-manylinux_2_28_x86_64-null.whl") is not None  # with a build tag
    assert variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-CU132.whl") is None  # labels are lower case
    assert variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-a23456789abcdefgh.whl") is None  # 17 characters
    assert variant_wheel("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl") is None  # a plain wheel
    assert is_variants_json("torch-2.15.0-variants.json") and not is_variants_json("torch-2.15.0.json")
    assert variants_json_release("Flash_Infer-0.7.4-variants.json") == ("flash-infer", Version("0.7.4"))
    assert variants_json_release("torch-two-variants.json") is None  # not a version
    # a plain wheel with a build tag has as many parts as a variant wheel: it is no variant
    assert is_variant_filename("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64-cu132.whl")
    assert not is_variant_filename("torch-2.15.0-1-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert not is_variant_filename("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl")


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
