"""The resolver's own pieces: one judge for candidates (resolver and `candidates` command alike),
structured identifiers, requirements that decide for themselves, a preference that ranks, and the
knowledge read from indexes/*.toml."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from resolve_gpu_stack.data.definitions import PageLocation, Route, RouteContext, load_definitions
from resolve_gpu_stack.errors import IndexDefinitionError
from resolve_gpu_stack.index.finder import Offer, PageVisit
from resolve_gpu_stack.model import CudaLabel, IndexFile
from resolve_gpu_stack.model.declared import declared_target
from resolve_gpu_stack.model.request import ResolveRequest
from resolve_gpu_stack.resolver.candidates import list_candidates
from resolve_gpu_stack.resolver.dependencies import Dependencies
from resolve_gpu_stack.resolver.factory import CandidateFactory, Judge, Policy
from resolve_gpu_stack.resolver.provider import Preference, StackProvider, backtrack_focus
from resolve_gpu_stack.resolver.requirement import Cand, Key, Req
from resolve_gpu_stack.resolver.resolve import _prerelease_packages
from resolve_gpu_stack.resolver.torch_selection import select_torch, torch_cuda
from resolve_gpu_stack.rules.fit import RejectReason
from resolve_gpu_stack.rules.invariants import Misalignment, jit_cache_misalignment

DEFS = load_definitions()
NIGHTLY = "2.12.0.dev20260307+cu130"
X86 = Tag("cp312", "cp312", "manylinux_2_28_x86_64")
ANY = Tag("py3", "none", "any")


def target(*installed: str):
    return declared_target("3.12", "x86_64-manylinux_2_28", list(installed))


def wheel(name: str, version: str, tag: Tag = ANY, **kw) -> IndexFile:
    fn = f"{name.replace('-', '_')}-{version}-{tag.interpreter}-{tag.abi}-{tag.platform}.whl"
    return IndexFile(filename=fn, url=f"https://files.example/{fn}", name=canonicalize_name(name), version=Version(version), tags=frozenset({tag}), **kw)


# -- one judge -------------------------------------------------------------------------------------


def test_judge_rejects_another_torch_abi_and_another_cuda():
    judge = Judge(defs=DEFS, target=target(f"torch=={NIGHTLY}"), torch=Version("2.11.0+cu130"), cuda=CudaLabel(13, 0))
    assert judge("flashinfer-python", wheel("flashinfer-python", "0.2.5+cu124torch2.5")).reason is RejectReason.TORCH_ABI
    assert judge("torch", wheel("torch", "2.11.0+cu128", X86)).reason is RejectReason.CUDA
    assert judge("torch", wheel("torch", "2.11.0+cu130", X86)) is None
    assert judge("flashinfer-jit-cache", wheel("flashinfer-jit-cache", "0.6.5+cu129", X86)).reason is RejectReason.CUDA  # 12.x under 13.0
    assert judge("flashinfer-jit-cache", wheel("flashinfer-jit-cache", "0.6.5+cu130", X86)) is None
    assert judge("flashinfer-jit-cache", wheel("flashinfer-jit-cache", "0.6.5", X86)).reason is RejectReason.CUDA  # no label
    older = replace(judge, cuda=CudaLabel(12, 9))
    assert older("flashinfer-jit-cache", wheel("flashinfer-jit-cache", "0.6.5+cu128", X86)) is None  # 12.8 runs under 12.9
    assert older("flashinfer-jit-cache", wheel("flashinfer-jit-cache", "0.6.5+cu130", X86)).reason is RejectReason.CUDA
    assert judge("numpy", wheel("numpy", "2.0.0", Tag("cp312", "cp312", "win_amd64"))).reason is RejectReason.TAGS


class OfferingFinder:
    """A finder stand-in that offers fixed files for any package."""

    def __init__(self, files):
        route = Route(patterns=("*",), index="flashinfer", page="{name}/")
        self.location = PageLocation(index="flashinfer", url="https://flashinfer.example/whl/x/", route=route)
        self.files = files

    def offers(self, name, ctx, tags=None, sdists=True):  # the factory judges every file anyway
        return [Offer(file=f, location=self.location) for f in self.files], [PageVisit(location=self.location, found=True, files=len(self.files))]


class CountingFinder(OfferingFinder):
    def __init__(self, files):
        super().__init__(files)
        self.asked: list[str] = []

    def offers(self, name, ctx, tags=None, sdists=True):
        self.asked.append(name)
        return super().offers(name, ctx, tags, sdists)


def test_a_rebased_factory_shares_verdicts_only_when_they_cannot_differ():
    """The second wiring (a kept torch's pins joined the target) reuses the files read and judged
    by the first; a target with other tags is judged afresh, and what is installed still comes
    first in the rebuilt candidate lists."""
    files = [wheel("numpy", "2.1.0", X86), wheel("numpy", "2.0.0", X86), wheel("numpy", "2.1.0", Tag("cp312", "cp312", "win_amd64"))]
    finder = CountingFinder(files)
    judge = Judge(defs=DEFS, target=target(), torch=None, cuda=None)
    first = CandidateFactory(finder, judge, RouteContext())
    assert [str(c.version) for c in first.candidates(canonicalize_name("numpy"))] == ["2.1.0", "2.0.0"]
    assert len(first.rejections["numpy"]) == 1

    kept = replace(judge, target=replace(judge.target, installed={canonicalize_name("numpy"): Version("2.0.0")}))
    second = first.rebased(kept)
    cands = second.candidates(canonicalize_name("numpy"))
    assert [(str(c.version), c.installed) for c in cands] == [("2.0.0", True), ("2.1.0", False)]  # installed first, rebuilt
    assert finder.asked == ["numpy"]  # the offers were not asked for again

    other = Judge(defs=DEFS, target=declared_target("3.12", "x86_64-manylinux_2_28", []), torch=None, cuda=None)  # its own tag list
    third = first.rebased(other)
    assert third.rejections == {}  # nothing shared: judged afresh
    third.candidates(canonicalize_name("numpy"))
    assert finder.asked == ["numpy", "numpy"]


def test_candidates_command_uses_the_resolvers_torch_abi_and_cuda_rules():
    files = [
        wheel("flashinfer-python", "0.6.5"),
        wheel("flashinfer-python", "0.2.5+cu124torch2.5", X86),
        wheel("flashinfer-python", "0.6.4", yanked=""),
    ]
    rows, visits = list_candidates(OfferingFinder(files), DEFS, target(f"torch=={NIGHTLY}"), "flashinfer-python")
    by_version = {r.version: r for r in rows}
    assert by_version["0.6.5"].fits and by_version["0.6.5"].why_not is None
    assert not by_version["0.2.5+cu124torch2.5"].fits and by_version["0.2.5+cu124torch2.5"].why_not == RejectReason.TORCH_ABI.value
    assert not by_version["0.6.4"].fits and by_version["0.6.4"].why_not == "yanked"
    assert len(visits) == 1

    jit = [wheel("flashinfer-jit-cache", "0.6.5+cu130", X86), wheel("flashinfer-jit-cache", "0.6.5+cu129", X86)]
    rows, _ = list_candidates(OfferingFinder(jit), DEFS, target(), "flashinfer-jit-cache", cuda=CudaLabel(13, 0))
    assert [(r.version, r.fits, r.why_not) for r in rows] == [("0.6.5+cu130", True, None), ("0.6.5+cu129", False, RejectReason.CUDA.value)]


# -- identifiers, requirements, preference -----------------------------------------------------------


def test_identifiers_are_structured_keys():
    req = Req(name=NormalizedName("cuda-toolkit"), specifier=SpecifierSet(), extras=frozenset({"nvrtc", "cudart"}))
    assert req.key == Key(NormalizedName("cuda-toolkit"), frozenset({"cudart", "nvrtc"}))
    assert req.key.name == "cuda-toolkit" and str(req.key) == "cuda-toolkit[cudart,nvrtc]"
    cand = Cand(name=NormalizedName("cuda-toolkit"), version=Version("13.0.2"), file=None)
    assert cand.key == Key(NormalizedName("cuda-toolkit")) and cand.with_extras(req.extras).key == req.key


def test_requirement_decides_satisfaction_and_yanked_needs_an_exact_pin():
    yanked = Cand(name=NormalizedName("numpy"), version=Version("2.0.0"), file=wheel("numpy", "2.0.0", yanked="broken"))
    ranged = Req(name=NormalizedName("numpy"), specifier=SpecifierSet(">=1.26"))
    pinned = Req(name=NormalizedName("numpy"), specifier=SpecifierSet("==2.0.0"))
    assert not ranged.is_satisfied_by(yanked) and pinned.is_satisfied_by(yanked) and pinned.pinned and not ranged.pinned
    assert not Req(name=NormalizedName("scipy"), specifier=SpecifierSet()).is_satisfied_by(yanked)
    assert not Req(name=NormalizedName("numpy"), specifier=SpecifierSet("==2.0.*")).pinned
    assert str(ranged) == "numpy>=1.26"


def _preference(provider: StackProvider, key: Key, reqs: list[Req], count: int) -> Preference:
    information = {key: iter([SimpleNamespace(requirement=r, parent=None) for r in reqs])}
    candidates = {key: iter([object()] * count)}
    return provider.get_preference(key, {}, candidates, information, [])


def _provider(files) -> StackProvider:
    """A provider over a fixed finder, as resolve() wires one (no prefetcher: nothing to read ahead)."""
    judge = Judge(defs=DEFS, target=target(), torch=None, cuda=None)
    factory = CandidateFactory(OfferingFinder(files), judge, RouteContext())
    policy = Policy(flashinfer_python=DEFS.flashinfer.python)
    return StackProvider(factory, Dependencies(factory.finder, judge.target, DEFS.flashinfer, policy), policy)


def test_preference_ranks_pinned_then_torch_then_fewest_candidates_then_name():
    provider = _provider([])
    name = NormalizedName
    pinned = _preference(provider, Key(name("zlib")), [Req(name=name("zlib"), specifier=SpecifierSet("==1.0"))], 9)
    torch = _preference(provider, Key(name("torch")), [Req(name=name("torch"), specifier=SpecifierSet())], 40)
    few = _preference(provider, Key(name("numpy")), [Req(name=name("numpy"), specifier=SpecifierSet(">=1"))], 2)
    many = _preference(provider, Key(name("attrs")), [Req(name=name("attrs"), specifier=SpecifierSet())], 7)
    also_many = _preference(provider, Key(name("six")), [Req(name=name("six"), specifier=SpecifierSet())], 7)
    assert sorted([also_many, many, few, torch, pinned]) == [pinned, torch, few, many, also_many]
    assert few.candidate_count == 2 and many.candidate_count == 7


def test_the_preference_counts_what_find_matches_gave_without_counting_again():
    provider = _provider([wheel("numpy", v, X86) for v in ("2.2.0", "2.1.0", "2.0.0", "1.26.4")])
    key = Key(NormalizedName("numpy"))
    req = Req(name=key.name, specifier=SpecifierSet(">=2"))
    found = provider.find_matches(key, {key: iter([req])}, {key: iter([])})
    assert [str(c.version) for c in found] == ["2.2.0", "2.1.0", "2.0.0"]

    class Uncountable:
        def __getitem__(self, key):
            raise AssertionError("the candidates were counted again")

    info = SimpleNamespace(requirement=req, parent=None)
    assert provider.get_preference(key, {}, Uncountable(), {key: iter([info])}, []).candidate_count == 3
    other = Req(name=key.name, specifier=SpecifierSet("<2"))  # asked with other requirements: counted from resolvelib's list
    assert provider.get_preference(key, {}, {key: iter([object()])}, {key: iter([SimpleNamespace(requirement=other, parent=None)])}, []).candidate_count == 1


def test_a_criterion_asked_again_is_answered_until_find_matches_asks_again():
    """``preference_of`` (what ``rounds`` asks, ~30 times a round) answers the same criterion's
    information list from memory; once find_matches is asked again for the name (after a
    backtrack, with a candidate ruled out), the count is the new one, as ``get_preference`` says."""
    provider = _provider([wheel("numpy", v, X86) for v in ("2.2.0", "2.1.0", "2.0.0", "1.26.4")])
    key = Key(NormalizedName("numpy"))
    req = Req(name=key.name, specifier=SpecifierSet(">=2"))
    provider.find_matches(key, {key: iter([req])}, {key: iter([])})
    information = [SimpleNamespace(requirement=req, parent=None)]

    def uncounted() -> list[Cand]:
        raise AssertionError("the candidates were counted again")

    assert provider.preference_of(key, information, uncounted).candidate_count == 3
    assert provider.preference_of(key, information, uncounted).candidate_count == 3
    two = provider.find_matches(key, {key: iter([req])}, {key: iter([Cand(name=key.name, version=Version("2.2.0"), file=None)])})
    assert [str(c.version) for c in two] == ["2.1.0", "2.0.0"]
    assert provider.preference_of(key, information, uncounted).candidate_count == 2
    assert provider.get_preference(key, {}, {}, {key: iter(information)}, []).candidate_count == 2


def test_after_a_conflict_the_selection_narrows_to_what_it_was_about():
    name = NormalizedName
    keys = [Key(name("attrs")), Key(name("numpy")), Key(name("scipy")), Key(name("torch"))]
    scipy = Cand(name=name("scipy"), version=Version("1.14.0"), file=None)
    causes = [SimpleNamespace(requirement=Req(name=name("numpy"), specifier=SpecifierSet("<2")), parent=scipy)]
    assert backtrack_focus(keys, causes) == [Key(name("numpy")), Key(name("scipy"))]  # the requirement's and its parent's
    assert backtrack_focus(keys, []) == keys  # no conflict: every identifier stays
    unrelated = [SimpleNamespace(requirement=Req(name=name("zlib"), specifier=SpecifierSet()), parent=None)]
    assert backtrack_focus(keys, unrelated) == keys  # a conflict about what is settled already: never an empty selection
    assert _provider([]).narrow_requirement_selection(iter(keys), {}, {}, {}, causes) == [Key(name("numpy")), Key(name("scipy"))]


# -- knowledge from indexes/*.toml --------------------------------------------------------------------


def test_pytorch_family_and_flashinfer_components_come_from_components_toml():
    assert DEFS.pytorch_family == {"torch", "torchvision", "torchaudio", "torchao", "torchcodec", "triton", "pytorch-triton"}
    assert DEFS.family_built_for == {"torchao": "date", "torchcodec": "date"}
    assert DEFS.flashinfer.requested(cubin=True, jit_cache=True) == ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
    assert DEFS.flashinfer.requested(cubin=False, jit_cache=True) == ("flashinfer-python", "flashinfer-jit-cache")
    request = ResolveRequest.build(target=target(f"torch=={NIGHTLY}"), torch="nightly", flashinfer="nightly")
    torch = select_torch(request, torch_cuda(request), [], [])
    assert _prerelease_packages(request, torch, DEFS) == DEFS.pytorch_family | set(DEFS.flashinfer.components)
    fewer = replace(DEFS, pytorch_family=frozenset({NormalizedName("torch")}))
    assert "torchvision" not in _prerelease_packages(request, torch, fewer)


def test_components_list_must_name_each_component_once(tmp_path: Path):
    src = DEFS.source
    assert src is not None
    for f in src.glob("*.toml"):
        (tmp_path / f.name).write_text(f.read_text())
    comp = tmp_path / "components.toml"
    comp.write_text(
        comp.read_text().replace(
            'components = ["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"]', 'components = ["flashinfer-python", "flashinfer-cubin"]'
        )
    )
    with pytest.raises(IndexDefinitionError, match="components"):
        load_definitions(tmp_path)


# -- the alignment rule shared with doctor ------------------------------------------------------------


@pytest.mark.parametrize(
    ("jit", "python", "torch", "want"),
    [
        ("0.6.5+cu130", "0.6.5", "cu130", None),
        ("0.6.5+cu128", "0.6.5", "cu129", None),
        ("0.6.4+cu130", "0.6.5", "cu130", Misalignment.OTHER_RELEASE),
        ("0.6.5", "0.6.5", "cu130", Misalignment.NO_LABEL),
        ("0.6.5+cu129", "0.6.5", "cu130", Misalignment.OTHER_MAJOR),
        ("0.6.5+cu130", "0.6.5", "cu129", Misalignment.OTHER_MAJOR),
        ("0.6.5+cu129", "0.6.5", "cu128", Misalignment.NEWER_LABEL),
        ("0.6.5+cu129", "0.6.5", None, None),
    ],
)
def test_jit_cache_misalignment(jit, python, torch, want):
    assert jit_cache_misalignment(Version(jit), Version(python), CudaLabel.parse(torch)) is want
