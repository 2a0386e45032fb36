"""No import circles among the package's modules (DESIGN, section 3: data flows one way).

Read from the source with `ast`: the imports a module runs when it is imported (its top level,
including under `if`, `try`, `with` and class bodies), not those inside functions, which run
later, nor those under `if TYPE_CHECKING:`, which never run."""

from __future__ import annotations

import ast
from pathlib import Path

import autotune

PACKAGE = Path(autotune.__file__).parent


def module_files(package_dir: Path) -> dict[str, Path]:
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _runs_at_import(body: list[ast.stmt], in_functions: bool = False):
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if in_functions:
                yield from _runs_at_import(node.body, in_functions)
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _runs_at_import(node.orelse, in_functions)
            continue
        yield node
        # The blocks a statement runs: if/else, try/except/finally, with, for, class bodies.
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _runs_at_import(getattr(node, field, None) or [], in_functions)


def imports_at_import_time(
    name: str, path: Path, modules: dict[str, Path], in_functions: bool = False
) -> set[str]:
    """The package's modules that `name` imports when it is imported (with in_functions, also
    those its functions import when they run)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _runs_at_import(ast.parse(path.read_text()).body, in_functions):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:
                # `from pkg import sub` imports the module pkg.sub; `from pkg import name`, pkg.
                submodule = f"{base}.{alias.name}"
                if submodule in modules:
                    found.add(submodule)
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def import_cycles(package_dir: Path, in_functions: bool = False) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted. With
    in_functions, imports inside functions count too, except the package root's: its lazy
    attributes (autotune.tune_kernel, autotune.conv2d) are the facade every room sits under."""
    modules = module_files(package_dir)
    root = package_dir.name
    graph = {
        m: imports_at_import_time(m, p, modules, in_functions and m != root)
        for m, p in modules.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_circle_among_the_packages_modules():
    assert import_cycles(PACKAGE) == []


def test_no_import_circle_even_through_imports_inside_functions():
    # An import inside a function hides a circle from the interpreter, not from the reader:
    # replay <-> tuning was one (restrict_studies now lives with the studies it cuts).
    assert import_cycles(PACKAGE, in_functions=True) == []


def test_a_circle_is_found(tmp_path):
    # The check itself: cli importing recording_cli at its bottom, which imports cli back (the
    # circle the app module broke), and a benchmark importing its group's package back.
    package = tmp_path / "pkg"
    (package / "bench").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text("import click\n\n\nfrom pkg.recording_cli import export\n")
    (package / "recording_cli.py").write_text("from pkg.cli import friendly_errors\n")
    (package / "later.py").write_text("def f():\n    from pkg import cli\n")
    (package / "lazy_a.py").write_text("def f():\n    from pkg import lazy_b\n")
    (package / "lazy_b.py").write_text("import pkg.lazy_a\n")
    (package / "bench" / "__init__.py").write_text("from pkg.bench import search\n")
    (package / "bench" / "search.py").write_text("from pkg.bench import bench\n")
    expected = [["pkg.bench", "pkg.bench.search"], ["pkg.cli", "pkg.recording_cli"]]
    assert import_cycles(package) == expected
    lazy = ["pkg.lazy_a", "pkg.lazy_b"]
    assert sorted(import_cycles(package, in_functions=True)) == sorted([*expected, lazy])


# DESIGN section 3: which sub-packages each may import when it is imported (its own included).
# families and strategies see only the model; the GPU side sees the families it compiles; the
# store sees the model; replay reads recordings of families' spaces; reports read the store;
# tuning drives them all; export reads the store and the families' plans through the runtime's
# plan choice (and replay's Kernel Tuner names for T4 files); cli and bench wire everything.
ALLOWED = {
    "model": set(),
    "families": {"model"},
    "strategies": {"model"},
    "gpu": {"model", "families"},
    "store": {"model"},
    "replay": {"model", "store", "families"},
    "reports": {"model", "store", "families"},
    "export": {"model", "store", "families", "replay", "runtime"},
    # Kernel Tuner compatibility: tune_kernel drives the tuner and hands the worker its check;
    # T4 files are an export of the store.
    "kt": {"model", "families", "strategies", "gpu", "store", "replay", "tuning", "export"},
    "tuning": {"model", "families", "strategies", "gpu", "store", "replay"},
    # The runtime API: its lookup reads the store; dispatch launches through the GPU side and
    # tunes a miss through the tuner.
    "runtime": {"model", "families", "strategies", "gpu", "store", "tuning"},
    "cli": {
        "model",
        "families",
        "strategies",
        "gpu",
        "store",
        "replay",
        "reports",
        "tuning",
        "runtime",
        "bench",
        "export",
        "kt",
    },
    # The benchmarks are commands too: they share the CLI's option types and one-line errors
    # (cli/options.py); the CLI loads them lazily, by name, never by an import statement.
    "bench": {
        "cli",
        "model",
        "families",
        "strategies",
        "gpu",
        "store",
        "replay",
        "reports",
        "tuning",
        "runtime",
        "kt",
    },
}


def layer_violations(package_dir: Path, in_functions: bool = False) -> list[str]:
    modules = module_files(package_dir)
    root = package_dir.name
    found = []
    for name, path in modules.items():
        parts = name.split(".")
        if len(parts) < 3 or parts[1] not in ALLOWED:
            continue  # the package's own top-level modules
        layer = parts[1]
        for target in sorted(imports_at_import_time(name, path, modules, in_functions)):
            other = target.split(".")[1] if target.count(".") else ""
            if other in ALLOWED and other != layer and other not in ALLOWED[layer]:
                found.append(f"{name} imports {target}")
            if other == "" and target != root:
                found.append(f"{name} imports {target}")
    return found


def test_each_sub_package_imports_only_the_rooms_below_it():
    assert layer_violations(PACKAGE) == []
    assert layer_violations(PACKAGE, in_functions=True) == []


def test_a_layer_violation_is_found(tmp_path):
    package = tmp_path / "pkg"
    for sub in ("model", "store", "reports"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "model" / "problem.py").write_text("from pkg.store import schema\n")
    (package / "store" / "schema.py").write_text("from pkg.model import problem\n")
    (package / "reports" / "tables.py").write_text("def f():\n    from pkg.model import x\n")
    assert layer_violations(package) == ["pkg.model.problem imports pkg.store.schema"]
