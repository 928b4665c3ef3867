"""A loopback world of variant wheels (PEP 825, a draft) beside the today world: releases
published as variant wheels with their ``{name}-{version}-variants.json``, hostile ones included.

Each release is linked from its package's PyPI page (HTML and JSON), as an index that supports the
draft links them: the variant wheels and, beside them, the release's variants.json with its sha256.
"""

from __future__ import annotations

import hashlib
import json
import shutil

from packaging.version import Version

from support.today_world import TORCH
from support.wheels import build_wheel
from support.world import World

NATIVE = "cp39-abi3-manylinux_2_28_x86_64"
SERIES = ".".join(map(str, Version(TORCH).release[:2]))  # the kept torch's series, as abi_dependency :: torch writes it
# the kept torch's CUDA (13.2), a CUDA beyond it, and the kept torch's ABI
CU132 = {"nvidia": {"cuda_version_lower_bound": ["13.2"]}, "abi_dependency": {"torch": [SERIES]}}
CU140 = {"nvidia": {"cuda_version_lower_bound": ["14.0"]}, "abi_dependency": {"torch": [SERIES]}}


# the schema uv 0.13.10's wheel-variants preview reads (it refuses a variants.json without one)
SCHEMA = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json"
PROVIDERS = {
    "nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"], "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"},
    "abi_dependency": {"requires": ["abi-dependency-variant-provider>=0.0.1"], "plugin-api": "abi_dependency_variant_provider.plugin:AbiDependencyPlugin"},
}


def variants_doc(variants: dict[str, object]) -> str:
    """A variants.json in PEP 825's shape as uv 0.13.10's preview parses it: ``$schema``, a provider
    per namespace its variants use, ``default-priorities`` naming exactly those namespaces."""
    used = sorted({ns for props in variants.values() if isinstance(props, dict) for ns in props if ns in PROVIDERS})
    doc = {
        "$schema": SCHEMA,
        "default-priorities": {"namespace": used},
        "providers": {ns: PROVIDERS[ns] for ns in used},
        "variants": variants,
    }
    return json.dumps(doc)


def add_variants(
    w: World,
    name: str,
    version: str,
    labels: tuple[str, ...],
    doc: str,
    *,
    so: bytes | None = None,
    sha256: str | None = None,
    link_json: bool = True,
    json_hash: bool = True,
) -> list[str]:
    """Variant wheels of ``name`` ``version`` (one per label: the same wheel, its file name with the
    label; compiled with ``so`` as its extension, pure without), and ``doc`` as the release's
    variants.json, linked from the written PyPI page of ``name`` (HTML and JSON) with its sha256
    (``sha256`` instead: a page that lies about it; ``json_hash`` False: linked without one;
    ``link_json`` False: not linked at all)."""
    module = name.replace("-", "_")
    files = {f"{module}/__init__.py": b"", f"{module}/_C.abi3.so": so} if so is not None else None
    built = build_wheel(w.root / "variant-build" / name, name, version, NATIVE if so is not None else "py3-none-any", files=files)
    out = w.root / "files"
    names = []
    for label in labels:
        filename = built.filename.removesuffix(".whl") + f"-{label}.whl"
        shutil.copyfile(built.path, out / filename)
        names.append(filename)
    meta = f"{module}-{version}-variants.json"
    (out / meta).write_text(doc)
    page = w.root / "simple" / name
    page.mkdir(parents=True, exist_ok=True)
    rows = [*names, meta] if link_json else names
    digests = {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in rows}
    if sha256 is not None:
        digests[meta] = sha256
    html_path, json_path = page / "index.html", page / "index.json"
    html = html_path.read_text() if html_path.exists() else "<!DOCTYPE html>\n<html>\n  <body>\n  </body>\n</html>\n"
    hashed = {f: digests[f] for f in rows if json_hash or f != meta}
    links = "".join(f'    <a href="../../files/{f}{"#sha256=" + hashed[f] if f in hashed else ""}">{f}</a><br />\n' for f in rows)
    html_path.write_text(html.replace("  </body>", links + "  </body>", 1))
    data = json.loads(json_path.read_text()) if json_path.exists() else {"meta": {"api-version": "1.1"}, "name": name, "files": []}
    data["files"] += [
        {"filename": f, "url": f"../../files/{f}", "hashes": {"sha256": hashed[f]} if f in hashed else {}, "upload-time": "2026-12-05T00:00:00Z"} for f in rows
    ]
    json_path.write_text(json.dumps(data))
    return names


__all__ = ["CU132", "CU140", "NATIVE", "SCHEMA", "SERIES", "add_variants", "variants_doc"]
