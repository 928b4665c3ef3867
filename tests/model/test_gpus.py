"""GPUs and FlashInfer floors: parsing user input, the CUDA compatibility rule, FlashInfer 0.7's
provider scoring, and the floors in indexes/gpus.toml."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from packaging.version import Version
from support.paths import REPO

from resolve_gpu_stack.data.gpus import default_gpu_table, floor_for_api, floor_for_arch, load_gpu_table
from resolve_gpu_stack.data.toml import load_toml
from resolve_gpu_stack.errors import IndexDefinitionError, NoPlanError, UsageError
from resolve_gpu_stack.model.cuda import CudaLabel
from resolve_gpu_stack.model.gpu import (
    ArchVariant,
    GpuArch,
    MatchKind,
    Scoring,
    covers,
    needed_providers,
    parse_gpus,
    parse_variants,
    select_providers,
    variant_of_provider,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GPUS_TOML = REPO / "indexes" / "gpus.toml"

# The provider list a 0.7 shim names (issue 12).
PROVIDERS = [f"flashinfer-jit-cache-{tag}" for tag in ("sm90a", "sm100a", "sm100f", "sm103a", "sm110a", "sm120a", "sm120f", "sm121a")]


# --- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sm120", (12, 0)),
        ("sm_120", (12, 0)),
        ("12.0", (12, 0)),
        ("sm120a", (12, 0)),
        ("sm100f", (10, 0)),
        ("SM90", (9, 0)),
        ("sm_90a", (9, 0)),
        ("9.0", (9, 0)),
        (" sm121 ", (12, 1)),
        ("compute_103a", (10, 3)),
        ("sm75", (7, 5)),
        ("8.6", (8, 6)),
        ("12.0f", (12, 0)),
        ("sm107", (10, 7)),
    ],
)
def test_gpu_arch_parses_every_accepted_spelling(text: str, expected: tuple[int, int]) -> None:
    gpu = GpuArch.parse(text)
    assert (gpu.major, gpu.minor) == expected
    assert str(gpu) == f"sm{expected[0]}{expected[1]}"
    assert gpu.capability == f"{expected[0]}.{expected[1]}"


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "sm",
        "sm1",
        "120",
        "90",
        "sm12x",
        "12",
        "12.",
        ".0",
        "sm120b",
        "sm_1200",
        "sm012",
        "sm0",
        "gfx942",
        "12.0.1",
        "H100",
        "sm-120",
        "12.10",
        "sm120af",
        "cu129",
    ],
)
def test_gpu_arch_refuses_bad_input_with_a_usage_error_and_a_hint(text: str) -> None:
    with pytest.raises(UsageError) as info:
        GpuArch.parse(text, what="--gpu")
    assert repr(text) in str(info.value) and "--gpu" in str(info.value)
    assert info.value.hint is not None and "sm120" in info.value.hint and "12.0" in info.value.hint
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ("sm120", ["sm120"]),
        ("sm120,sm90", ["sm120", "sm90"]),
        ("sm120, sm90 sm100", ["sm120", "sm90", "sm100"]),
        (["sm120", "12.0", "sm_90"], ["sm120", "sm90"]),  # repeated flags, deduplicated in order
        (["sm100,sm120a", "sm100f"], ["sm100", "sm120"]),
        (("12.0", "12.1"), ["sm120", "sm121"]),
    ],
)
def test_parse_gpus_takes_comma_lists_and_repeats(values, expected: list[str]) -> None:
    assert [str(g) for g in parse_gpus(values)] == expected


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ("", "no GPU"),
        (",", "no GPU"),
        ([], "no GPU"),
        (["sm120", "bogus"], "'bogus'"),
        ("sm120,sm12x", "'sm12x'"),
    ],
)
def test_parse_gpus_names_the_bad_entry(values, named: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_gpus(values, what="--gpu")
    assert named in str(info.value) and "--gpu" in str(info.value)


@pytest.mark.parametrize(
    ("text", "tag", "sass", "kind"),
    [
        ("sm120f", "sm120f", "12.0f", MatchKind.FAMILY),
        ("12.0f", "sm120f", "12.0f", MatchKind.FAMILY),
        ("sm_90a", "sm90a", "9.0a", MatchKind.EXACT),
        ("compute_100a", "sm100a", "10.0a", MatchKind.EXACT),
        ("8.0", "sm80", "8.0", MatchKind.BASELINE),
        ("sm89", "sm89", "8.9", MatchKind.BASELINE),
    ],
)
def test_arch_variant_keeps_its_suffix(text: str, tag: str, sass: str, kind: MatchKind) -> None:
    variant = ArchVariant.parse(text)
    assert (str(variant), variant.sass, variant.kind) == (tag, sass, kind)
    assert variant.provider_name() == f"flashinfer-jit-cache-{tag}"


@pytest.mark.parametrize("text", ["sm120x", "9.0+PTX", "", "12", "sm_1", "sm_0a"])
def test_arch_variant_refuses_bad_input(text: str) -> None:
    with pytest.raises(UsageError, match="not an architecture variant"):
        ArchVariant.parse(text)


def test_a_variant_suffix_must_be_known() -> None:
    with pytest.raises(ValueError):
        ArchVariant(12, 0, "x")


# --- the CUDA compatibility rule ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "gpu", "kind"),
    [
        ("sm120a", "sm120", MatchKind.EXACT),
        ("sm120a", "sm121", None),  # arch-specific code is not portable
        ("sm120f", "sm120", MatchKind.FAMILY),
        ("sm120f", "sm121", MatchKind.FAMILY),
        ("sm121a", "sm120", None),
        ("sm100f", "sm103", MatchKind.FAMILY),
        ("sm100f", "sm107", MatchKind.FAMILY),
        ("sm100f", "sm110", None),  # another major
        ("sm103a", "sm100", None),
        ("sm90a", "sm90", MatchKind.EXACT),
        ("sm90a", "sm100", None),  # no PTX: Hopper SASS never runs on Blackwell
        ("sm80", "sm86", MatchKind.BASELINE),
        ("sm80", "sm89", MatchKind.BASELINE),
        ("sm89", "sm80", None),  # baseline runs forward only
        ("sm80", "sm90", None),
    ],
)
def test_variant_serves_gpu(variant: str, gpu: str, kind: MatchKind | None) -> None:
    v, g = ArchVariant.parse(variant), GpuArch.parse(gpu)
    assert v.match(g) is kind
    assert v.serves(g) is (kind is not None)


@pytest.mark.parametrize(
    ("targets", "gpu", "expected"),
    [
        ("9.0a 10.0a 12.0f", "sm120", True),
        ("9.0a 10.0a 12.0f", "sm121", True),
        ("7.5 8.0 8.9 9.0a 10.0a 12.0a", "sm121", False),
        ("7.5 8.0 8.9 9.0a 10.0a 12.0a", "sm120", True),
        ("7.5 8.0 8.9", "sm86", True),
        ("9.0a", "sm100", False),
        ("10.0a 10.3a", "sm107", False),
        ("10.0a,10.3a,10.7a", "sm107", True),
        ("", "sm90", False),
        (["9.0a", "12.0f"], "sm120", True),
        ([ArchVariant(9, 0, "a")], "sm90", True),
    ],
)
def test_covers_reads_an_arch_list(targets, gpu: str, expected: bool) -> None:
    assert covers(targets, GpuArch.parse(gpu)) is expected


def test_parse_variants_keeps_the_list_order() -> None:
    assert [str(v) for v in parse_variants("9.0a 10.0a, 12.0f")] == ["sm90a", "sm100a", "sm120f"]


# --- scoring and provider selection -------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "ranked"),
    [
        ("sm120", ["sm120a", "sm120f"]),
        ("sm121", ["sm121a", "sm120f"]),
        ("sm103", ["sm103a", "sm100f"]),
        ("sm100", ["sm100a", "sm100f"]),
        ("sm107", ["sm107a", "sm100f"]),
        ("sm90", ["sm90a"]),
        ("sm89", ["sm89", "sm80"]),  # both baseline: the closer build first
        ("sm86", ["sm80"]),
    ],
)
def test_table_variants_for_a_gpu_are_scored_exact_family_baseline(gpu: str, ranked: list[str]) -> None:
    scored = default_gpu_table().variants_for(gpu)
    assert [str(s.variant) for s in scored] == ranked
    assert [s.rank for s in scored] == sorted(s.rank for s in scored)


@pytest.mark.parametrize(
    ("gpus", "providers", "picked"),
    [
        (["sm90", "sm100", "sm120"], PROVIDERS, ["sm90a", "sm100a", "sm120a"]),
        (["sm103", "sm121", "sm110"], PROVIDERS, ["sm103a", "sm121a", "sm110a"]),
        (["sm107"], PROVIDERS, ["sm100f"]),  # family when no exact one
        (["sm120"], [p for p in PROVIDERS if not p.endswith("sm120a")], ["sm120f"]),
        (["sm100"], [p for p in PROVIDERS if not p.endswith("sm100a")], ["sm100f"]),
        (["sm121"], ["flashinfer-jit-cache-sm120f"], ["sm120f"]),
        (["sm89"], PROVIDERS, [None]),  # nothing serves Ada: JIT
        (["sm89"], ["flashinfer-jit-cache-sm80", "flashinfer-jit-cache-sm89"], ["sm89"]),
        (["sm120"], ["flashinfer_jit_cache_SM120F", "flashinfer-jit-cache"], ["sm120f"]),  # spelling; shim ignored
    ],
)
def test_select_providers_picks_the_best_scoring_provider_per_gpu(gpus: list[str], providers: list[str], picked: list[str | None]) -> None:
    choices = default_gpu_table().select_providers(parse_gpus(gpus), providers)
    assert [None if c.variant is None else str(c.variant) for c in choices] == picked
    assert [str(c.gpu) for c in choices] == [str(g) for g in parse_gpus(gpus)]
    for c in choices:
        assert (c.provider is None) == (c.variant is None) == (c.kind is None)


def test_selection_for_the_users_machines_needs_three_of_eight_providers() -> None:
    choices = select_providers(parse_gpus("sm90,sm100,sm120,sm100"), PROVIDERS)
    assert needed_providers(choices) == ("flashinfer-jit-cache-sm100a", "flashinfer-jit-cache-sm120a", "flashinfer-jit-cache-sm90a")


def test_scoring_order_is_what_decides() -> None:
    family_first = Scoring((MatchKind.FAMILY, MatchKind.EXACT, MatchKind.BASELINE))
    choices = select_providers(parse_gpus("sm120"), PROVIDERS, family_first)
    assert str(choices[0].variant) == "sm120f"
    with pytest.raises(ValueError):
        Scoring((MatchKind.EXACT, MatchKind.EXACT, MatchKind.BASELINE))


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("flashinfer-jit-cache-sm120f", "sm120f"),
        ("flashinfer_jit_cache_sm90a", "sm90a"),
        ("Flashinfer.Jit.Cache-SM100A", "sm100a"),
        ("flashinfer-jit-cache-sm80", "sm80"),
        ("flashinfer-jit-cache", None),
        ("flashinfer-jit-cache-cu130", None),
        ("flashinfer-jit-cache-sm120x", None),
        ("flashinfer-cubin", None),
        ("flashinfer-jit-cache-sm120f-extra", None),
    ],
)
def test_provider_name_round_trips_to_its_variant(name: str, tag: str | None) -> None:
    variant = variant_of_provider(name)
    assert (None if variant is None else str(variant)) == tag
    if variant is not None:
        assert variant_of_provider(variant.provider_name()) == variant


# --- floors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "gpu", "floor"),
    [
        ("mm_mxfp8", None, "0.6.4"),
        ("mm_mxfp8", "sm100", "0.6.4"),
        ("mm_mxfp8", "sm103", "0.6.4"),
        ("mm_mxfp8", "sm120", "0.6.8rc1"),
        ("mm_mxfp8", "12.1", "0.6.8rc1"),
        ("mm_mxfp8", "sm107", "0.6.16rc1"),
        ("bmm_mxfp8", None, "0.6.0"),
        ("bmm_mxfp8", "sm120", "0.6.8rc1"),
        ("mm_mxfp8:cute-dsl", None, "0.6.6"),
        ("mm_mxfp8:cute-dsl", "sm100", "0.6.6"),
        ("mm_mxfp8:cute-dsl", "sm107", "0.6.18rc10"),  # the first release with SM107 in its requirement (was: no kernels)
        ("mm_mxfp8:cudnn", "sm107", "0.7.2rc3"),
        ("mm_fp4", "sm121", "0.5.0rc2"),
        ("mm_fp4", "sm107", "0.6.16rc1"),
        ("bmm_fp8", "sm107", "0.6.16rc1"),
        ("mm_mxfp8:trtllm", "sm100", "0.6.7"),
        ("mm_mxfp8:cutlass", "sm120", "0.6.8rc1"),
        ("mm_mxfp8:b12x", "sm120", "0.6.18rc2"),
        ("mm_fp4", "sm120", "0.3.1"),
        ("bmm_fp8", "sm90", "0.1.6"),
        ("mm_fp8", "sm90", "0.4.1"),  # no per-GPU data: the API's own floor
    ],
)
def test_floor_for_api(api: str, gpu: str | None, floor: str) -> None:
    version, source = floor_for_api(api, gpu)
    assert version == Version(floor)
    assert source.strip()


def test_the_floor_for_mm_mxfp8_on_sm120_cites_the_sm120_pr() -> None:
    assert "#2902" in floor_for_api("mm_mxfp8", GpuArch(12, 0)).source
    assert "#2464" in floor_for_api("mm_mxfp8").source


@pytest.mark.parametrize(("api", "gpu"), [("mm_mxfp8", "sm90"), ("mm_mxfp8:cute-dsl", "sm120"), ("mm_mxfp8:b12x", "sm100")])
def test_an_api_without_kernels_for_a_gpu_is_no_plan(api: str, gpu: str) -> None:
    with pytest.raises(NoPlanError) as info:
        floor_for_api(api, gpu)
    text = str(info.value)
    assert api in text and gpu in text and "runs on" in text
    assert info.value.exit_code == 1


def test_an_unknown_api_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        floor_for_api("mm_mxfp9")
    assert "mm_mxfp9" in str(info.value)
    assert info.value.hint is not None
    assert "did you mean 'mm_mxfp8'" in info.value.hint
    for known in ("mm_mxfp8", "bmm_mxfp8", "mm_mxfp8:cute-dsl", "mm_mxfp8:trtllm"):
        assert known in info.value.hint


@pytest.mark.parametrize(
    ("gpu", "floor", "cuda"),
    [
        ("sm90", "0.2.0", "cu123"),
        ("sm100", "0.2.6", "cu128"),
        ("sm103", "0.3.1", "cu129"),
        ("sm110", "0.3.1", "cu130"),
        ("sm120", "0.3.1", "cu129"),
        ("12.1", "0.3.1", "cu129"),
        ("sm107", "0.6.16rc1", "cu129"),
    ],
)
def test_floor_for_arch(gpu: str, floor: str, cuda: str) -> None:
    version, label, source = floor_for_arch(gpu)
    assert (version, label) == (Version(floor), CudaLabel.parse(cuda))
    assert source.strip()


def test_an_unknown_gpu_is_a_usage_error_listing_the_known_ones() -> None:
    with pytest.raises(UsageError) as info:
        floor_for_arch("sm130")
    assert "sm130" in str(info.value)
    assert info.value.hint is not None and "sm120" in info.value.hint and "sm90" in info.value.hint


# --- the data file ------------------------------------------------------------------------------


def test_the_data_file_loads_and_every_row_has_a_source() -> None:
    table = load_gpu_table(GPUS_TOML)
    assert table.selection_source.strip()
    assert table.scoring.order == (MatchKind.EXACT, MatchKind.FAMILY, MatchKind.BASELINE)
    rows = [*table.variants, *table.gpus, *table.apis, *(f for a in table.apis for f in a.per_gpu)]
    assert rows and all(row.source.strip() for row in rows)
    raw = tomllib.loads(GPUS_TOML.read_text())
    assert all("source" in row for key in ("variant", "gpu", "api") for row in raw[key])
    assert all("source" in row for api in raw["api"] for row in api.get("gpu", []))


def test_the_users_gpus_and_the_issue_providers_are_in_the_table() -> None:
    table = default_gpu_table()
    for gpu in ("sm90", "sm100", "sm103", "sm120", "sm121"):
        table.gpu(gpu)
    for name in PROVIDERS:
        variant = variant_of_provider(name)
        assert variant is not None and table.variant_row(variant) is not None, name


def test_every_jit_cache_sass_target_in_components_toml_is_a_known_variant() -> None:
    """The monolithic jit-cache arch lists (components.toml) and the variant table agree."""
    table = default_gpu_table()
    components = load_toml(REPO / "indexes" / "components.toml")
    targets = {t for row in components["jit-cache-archs"] for group in ("labels", "aarch64-extra") for ts in row.get(group, {}).values() for t in ts}
    assert targets
    missing = sorted(t for t in targets if table.variant_row(t) is None)
    assert not missing


def test_the_data_file_is_packaged() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    force = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert force["indexes/gpus.toml"] == "resolve_gpu_stack/_indexes/gpus.toml"


# --- the loader refuses a bad file --------------------------------------------------------------

GOOD = """
[provider-selection]
order = ["exact", "family", "baseline"]
provider-prefix = "flashinfer-jit-cache-"
source = "s"

[[variant]]
name = "sm120f"
serves = ["sm120", "sm121"]
cuda = "cu129"
source = "s"

[[gpu]]
arch = "sm120"
flashinfer = "0.3.1"
cuda = "cu129"
source = "s"

[[gpu]]
arch = "sm121"
flashinfer = "0.3.1"
cuda = "cu129"
source = "s"

[[api]]
name = "mm_mxfp8"
symbol = "mm_mxfp8"
flashinfer = "0.6.4"
runs-on = ["sm120"]
source = "s"

[[api.gpu]]
archs = ["sm120"]
flashinfer = "0.6.8rc1"
source = "s"
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('serves = ["sm120", "sm121"]', 'serves = ["sm120"]', "runs on sm120, sm121"),
        ('serves = ["sm120", "sm121"]', 'serves = ["sm120", "sm121", "sm110"]', "'serves' lists"),
        ('name = "sm120f"', 'name = "sm120x"', "not an architecture variant"),
        ('cuda = "cu129"\nsource = "s"\n\n[[gpu]]', 'cuda = "12.9"\nsource = "s"\n\n[[gpu]]', "not a CUDA label"),
        ('arch = "sm120"', 'arch = "blackwell"', "not a GPU architecture"),
        ('flashinfer = "0.3.1"', 'flashinfer = "soon"', "not a version"),
        ('flashinfer = "0.6.8rc1"', 'flashinfer = "0.6.3"', "below the API's own floor"),
        ('archs = ["sm120"]', 'archs = ["sm90"]', "not in the API's 'runs-on'"),
        ('order = ["exact", "family", "baseline"]', 'order = ["exact", "exact", "baseline"]', "each of"),
        ('order = ["exact", "family", "baseline"]', 'order = ["exact", "family", "best"]', "not one of"),
        ('symbol = "mm_mxfp8"\n', 'symbol = "mm_mxfp8"\nsymbols = "x"\n', "unknown key 'symbols'"),
        ('runs-on = ["sm120"]\nsource = "s"', 'runs-on = ["sm120"]\nsource = " "', "must not be empty"),
        ('runs-on = ["sm120"]\nsource = "s"', 'runs-on = ["sm120"]', "missing 'source'"),
        ('[[gpu]]\narch = "sm120"', '[[gpu]]\narch = "sm120"\nflashinfer = "0.3.1"\ncuda = "cu129"\nsource = "s"\n[[gpu]]\narch = "sm120"', "listed twice"),
    ],
)
def test_the_loader_refuses_a_bad_row_naming_the_file(tmp_path: Path, old: str, new: str, message: str) -> None:
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    assert load_gpu_table(good).floor_for_api("mm_mxfp8", "sm120").version == Version("0.6.8rc1")
    assert old in GOOD
    bad = tmp_path / "gpus.toml"
    bad.write_text(GOOD.replace(old, new, 1))
    with pytest.raises(IndexDefinitionError) as info:
        load_gpu_table(bad)
    assert str(bad) in str(info.value)
    assert message in str(info.value) + str(info.value.hint or "")
