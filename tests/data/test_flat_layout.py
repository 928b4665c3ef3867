"""A mirror layout (routing.toml [layouts]): `--index NAME=flat:URL` reads every page of NAME at
URL/<name>/ (a wheelhouse's simple/), with routing unchanged."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.paths import REPO

from resolve_gpu_stack.data.definitions import load_definitions
from resolve_gpu_stack.data.rules import RouteContext
from resolve_gpu_stack.errors import IndexDefinitionError

HOUSE = "http://127.0.0.1:8000/house/simple/"
CTX = RouteContext(torch_channel="nightly", cuda="cu130", flashinfer_channel="stable", torch_series="2.12")


def _flat(*names: str):
    return load_definitions().with_index_urls({n: f"flat:{HOUSE}" for n in names} | ({} if "pypi" in names else {"pypi": "http://pypi.invalid/simple/"}))


def _pages(defs, name: str, ctx: RouteContext = CTX) -> list[tuple[str, str]]:
    return [(loc.index, loc.url) for loc in defs.pages_for(name, ctx)]


def test_flat_reads_every_page_at_name_below_the_mirror():
    defs = _flat("pytorch", "flashinfer", "pypi")
    assert _pages(defs, "torch") == [("pytorch", HOUSE + "torch/")]
    assert _pages(defs, "flashinfer-jit-cache") == [("flashinfer", HOUSE + "flashinfer-jit-cache/")]  # once, not per CUDA label
    # stable flashinfer-python: PyPI only; the legacy AOT page of flashinfer.ai is not read on a layout
    assert _pages(defs, "flashinfer-python") == [("pypi", HOUSE + "flashinfer-python/")]
    assert _pages(defs, "numpy") == [("pypi", HOUSE + "numpy/")]
    # cubin: both routes still apply, each with its own version range and index
    routes = [(loc.index, str(loc.route.versions)) for loc in defs.pages_for("flashinfer-cubin", CTX)]
    assert routes == [("pypi", "<=0.6.13"), ("flashinfer", ">=0.6.14")]


def test_routing_is_unchanged_on_a_flat_mirror():
    """A flat PyPI mirror never serves torch: torch's pages stay on the PyTorch index."""
    defs = _flat("pypi")
    assert _pages(defs, "torch") == [("pytorch", "https://download.pytorch.org/whl/nightly/cu130/torch/")]
    assert _pages(defs, "torchtriton")[0][0] == "pytorch"
    assert _pages(defs, "numpy") == [("pypi", HOUSE + "numpy/")]
    # the index's own layout without a prefix: the channel/CUDA folders as before
    plain = load_definitions().with_index_urls({"pytorch": "http://127.0.0.1:8000/whl/", "pypi": HOUSE})
    assert _pages(plain, "torch") == [("pytorch", "http://127.0.0.1:8000/whl/nightly/cu130/torch/")]
    assert plain.indexes["pytorch"].layout is None


def test_the_layout_is_recorded_with_the_url():
    defs = load_definitions().with_index_urls({"pytorch": "flat:https://user:tok@mirror.example/simple", "pypi": "https://mirror.example/simple/"})
    urls = defs.recorded_urls()
    assert urls["pytorch"] is not None and urls["pytorch"].startswith("flat:https://") and "tok" not in urls["pytorch"]
    assert urls["pypi"] == "https://mirror.example/simple/"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("flta:https://mirror.example/simple/", "unknown layout 'flta'"),
        ("flat:", "no URL after flat:"),
    ],
)
def test_a_bad_layout_is_a_usage_error(url, message):
    with pytest.raises(IndexDefinitionError, match=message) as err:
        load_definitions().with_index_urls({"pytorch": url})
    assert err.value.exit_code == 2


def test_layouts_are_data(tmp_path: Path):
    src = REPO / "indexes"
    shutil.copytree(src, tmp_path / "indexes")
    routing = tmp_path / "indexes" / "routing.toml"
    routing.write_text(routing.read_text().replace('flat = "{name}/"', 'flat = "{name}/"\nby-cuda = "{cuda}/{name}/"'))
    defs = load_definitions(tmp_path / "indexes").with_index_urls({"pytorch": f"by-cuda:{HOUSE}", "pypi": HOUSE})
    assert _pages(defs, "torch") == [("pytorch", HOUSE + "cu130/torch/")]
    routing.write_text(routing.read_text().replace('by-cuda = "{cuda}/{name}/"', 'by-cuda = "{cudaa}/{name}/"'))
    with pytest.raises(IndexDefinitionError, match=r"routing\.toml: layouts: by-cuda: page .* unknown variable \{cudaa\}"):
        load_definitions(tmp_path / "indexes")
