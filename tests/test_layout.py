"""The floor plan of docs/architecture.md, checked: who imports whom, module and function sizes, no cycles.

Imports are read from the source (every ``import`` and ``from ... import``, also inside functions),
so a lazy import counts the same as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / "pipeline"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
# The stages of a rebuild: none imports another (shared data models live in their own modules).
STAGES = {
    "search", "download", "tasks", "mturk", "annotate", "ingest", "selection_frequency",
    "near_duplicates", "sample", "review", "build_set",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def python_files(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def imports_of(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text("utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for p in python_files("pipeline", "imagenetv2", "cifar10_1")}


def stage_of(module: str):
    """The rebuild stage a module belongs to (``pipeline.rebuild.<stage>`` or a subpackage of it)."""
    parts = module.split(".")
    if parts[:2] == ["pipeline", "rebuild"] and len(parts) > 2 and parts[2] in STAGES:
        return parts[2]
    return None


def test_dataset_packages_import_only_pipeline_core():
    for path in python_files("imagenetv2", "cifar10_1"):
        bad = sorted(m for m in imports_of(path) if m.startswith("pipeline") and not (m == "pipeline" or m.startswith("pipeline.core")))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}: the dataset packages may import pipeline.core only"


def test_core_imports_nothing_else_of_the_project():
    for path in python_files("pipeline/core"):
        bad = sorted(m for m in imports_of(path) if m.split(".")[0] in ("imagenetv2", "cifar10_1") or (m.startswith("pipeline.") and not m.startswith("pipeline.core")))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}: pipeline.core imports no other part"


def test_no_stage_imports_another_stage():
    for name, path in project_modules().items():
        own = stage_of(name)
        if own is None:
            continue
        others = sorted({stage_of(m) for m in imports_of(path)} - {None, own})
        assert not others, f"{name} (stage {own}) imports the stage(s) {others}; move what they share into a data-model module"


def test_publish_does_not_import_the_rebuild():
    for path in python_files("pipeline/publish"):
        bad = sorted(m for m in imports_of(path) if m.startswith("pipeline.rebuild") or m.startswith("pipeline.toys"))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_no_import_cycle():
    modules = project_modules()
    graph = {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}
    # a package's __init__ importing its own submodules is not a cycle of concern; drop parent -> child edges
    graph = {n: {m for m in deps if not m.startswith(n + ".")} for n, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


@pytest.mark.parametrize("path", python_files("pipeline"), ids=lambda p: str(p.relative_to(ROOT)))
def test_module_and_function_sizes(path):
    lines = path.read_text("utf-8").splitlines()
    assert len(lines) <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)} has {len(lines)} lines (at most {MAX_MODULE_LINES}): split it"
    tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, (
                f"{path.relative_to(ROOT)}:{node.lineno} {node.name}() has {length} lines (at most {MAX_FUNCTION_LINES})"
            )


def test_every_part_says_what_it_may_import():
    for part in ("core", "rebuild", "publish", "evaluation", "toys", "commands"):
        doc = ast.get_docstring(ast.parse((PIPELINE / part / "__init__.py").read_text("utf-8"))) or ""
        assert "import" in doc.lower(), f"pipeline/{part}/__init__.py's docstring must say what the part may import"
