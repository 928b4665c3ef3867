"""``index_file`` (the page parsers' builder of an ``IndexFile``) gives the very value
``IndexFile(...)`` gives, field for field, and follows the class when a field is added."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import Version

from resolve_gpu_stack.model import IndexFile, VariantRef, index_file

FIELDS = [f.name for f in dataclasses.fields(IndexFile)]

ROWS = [
    (
        "torch-2.12.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        "https://download.example/whl/torch-2.12.0%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl",
        canonicalize_name("torch"),
        Version("2.12.0+cu130"),
        frozenset({Tag("cp312", "cp312", "manylinux_2_28_x86_64")}),
        True,
        "pytorch",
        "a" * 64,
        None,
        ">=3.10",
        None,
        "b" * 64,
        True,
        "2026-03-07T10:00:00Z",
        False,
        None,
    ),
    (
        "x-1.0.tar.gz",
        "https://h/x-1.0.tar.gz",
        canonicalize_name("x"),
        Version("1.0"),
        frozenset(),
        False,
        "pypi",
        None,
        1234,
        None,
        "",
        None,
        False,
        None,
        True,
        None,
    ),
    (
        "x-1.0-cuda12-py3-none-any.whl",
        "https://h/x-1.0-cuda12-py3-none-any.whl",
        canonicalize_name("x"),
        Version("1.0"),
        frozenset({Tag("py3", "none", "any")}),
        True,
        "pypi",
        None,
        0,
        None,
        "broken build",
        None,
        False,
        None,
        False,
        VariantRef(label="cuda12", json_url="https://h/x-1.0-variants.json", json_sha256=None),
    ),
]


def test_the_builder_takes_every_field_in_order():
    assert list(inspect.signature(index_file).parameters) == FIELDS


@pytest.mark.parametrize("values", ROWS)
def test_the_builder_makes_what_the_class_makes(values):
    built, made = index_file(*values), IndexFile(**dict(zip(FIELDS, values, strict=True)))
    assert built == made
    assert hash(built) == hash(made)
    assert repr(built) == repr(made)
    assert [getattr(built, name) for name in FIELDS] == list(values)
    assert built.is_yanked == made.is_yanked
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.url = "https://elsewhere/"  # type: ignore[misc]
