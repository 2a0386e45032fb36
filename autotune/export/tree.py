"""Writing the exported C++/CUDA tree: kernel sources, the plan table (JSON and C++), a header,
the example and its Makefile."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from autotune import package_path
from autotune.export.cpp_table import cpp_table, fatbins_asm, makefile, readme
from autotune.export.cuda_tree import EARLIER_SCHEMAS, SCHEMA, modules_of, nvcc_source, table
from autotune.export.plans import ExportError, Selection
from autotune.families.base import INCLUDE_DIR
from autotune.families.headers import quoted_headers

STATIC_FILES = {
    "autotune_conv2d.h": "include/autotune_conv2d.h",
    "example.cpp": "example/example.cpp",
}


def write_tree(selection: Selection, output: Path, store_url: str) -> dict[str, object]:
    """Write the tree under `output`: a new or empty directory, or an earlier export, whose
    kernels and build outputs are removed first (another export's modules would linger)."""
    data = table(selection, store_url)
    modules, _ = modules_of(selection)
    _clear(output)
    output.mkdir(parents=True, exist_ok=True)
    for sub in ("kernels", "include", "example", "src"):
        (output / sub).mkdir(exist_ok=True)
    sources = {e.plan.source.name: e for e in selection.plans}
    kernel_hashes = {}
    headers: dict[str, str] = {}
    for name, e in sources.items():
        text = e.plan.source.read_text()
        kernel_hashes[name] = hashlib.sha256(text.encode()).hexdigest()
        (output / "kernels" / name).write_text(nvcc_source(text, e.family.name))
        headers.update(quoted_headers(text, e.plan.source.parent, (INCLUDE_DIR,)))
    data["kernels"] = {
        f"kernels/{name}": {"family": sources[name].family.name, "tuned_source_sha256": h}
        for name, h in kernel_hashes.items()
    }
    # The headers the kernels include (the shared register-tiled loop), under include/, which
    # the Makefile's kernel rules search.
    data["headers"] = {}
    for name, text in sorted(headers.items()):
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise ExportError(f"a kernel includes {name!r}, outside the exported tree")
        (output / "include" / name).parent.mkdir(parents=True, exist_ok=True)
        (output / "include" / name).write_text(text)
        data["headers"][f"include/{name}"] = hashlib.sha256(text.encode()).hexdigest()
    (output / "plans.json").write_text(json.dumps(data, indent=1) + "\n")
    (output / "include" / "autotune_plans.h").write_text(cpp_table(data, modules))
    (output / "src" / "fatbins.S").write_text(fatbins_asm(modules))
    (output / "Makefile").write_text(makefile(modules, selection.arch))
    (output / "README.md").write_text(readme(data))
    for name, target in STATIC_FILES.items():
        shutil.copyfile(package_path("autotune.export", "cpp", name), output / target)
    return data


def _clear(output: Path) -> None:
    if not output.exists() or (output.is_dir() and not any(output.iterdir())):
        return
    try:
        earlier = json.loads((output / "plans.json").read_text()).get("schema")
    except (OSError, ValueError, AttributeError):
        earlier = None
    if earlier not in EARLIER_SCHEMAS:
        raise ExportError(
            f"{output} is neither empty nor an earlier export (no plans.json of {SCHEMA}); "
            "choose a new directory"
        )
    for stale in (output / "kernels").glob("*.cu"):
        stale.unlink()
    shutil.rmtree(output / "build", ignore_errors=True)
