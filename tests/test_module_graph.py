"""The package's module graph: no import cycle, and no module that needs most of the
package (at most about 8 of its modules, 9 for the few that wire things together)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "commentsvc"
MOST_IMPORTS = 9


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(part for part in parts if part != "__init__")


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports_of(path: Path) -> set[str]:
    """The package's modules ``path`` imports when it runs (not those named for type
    checking only), wherever the import statement is."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("commentsvc"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else str(node.module))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("commentsvc."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {name for name in found if name in MODULES and name != "commentsvc"}


GRAPH = {name: imports_of(path) - {name} for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                strong(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            strong(node)
    return found


def test_the_package_has_no_import_cycle():
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_most_of_the_package(name):
    assert len(GRAPH[name]) <= MOST_IMPORTS, sorted(GRAPH[name])


def test_the_layers_are_sub_packages():
    layers = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").exists()}
    assert {"web", "rules", "storage", "interchange", "operations", "standalone"} <= layers
