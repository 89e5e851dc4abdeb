"""search/ is the lowest layer beside lib/: the engine every layer plugs into imports none of
them. Layers hand it their rows (search/registry.py, a queryset to rank) instead."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCH = ROOT / "search"
# The project's own top-level packages; search/ may import lib/ and itself only.
PROJECT_PACKAGES = {path.parent.name for path in ROOT.glob("*/__init__.py")}
ALLOWED = {"search", "lib"}


def imported_modules(path: Path) -> set[str]:
    """Every module the file imports, at any depth (in functions, under TYPE_CHECKING)."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module)
    return modules


def test_the_project_packages_are_found():
    assert {"memory", "context", "work", "profiles", "activity", "lib", "search"} <= (
        PROJECT_PACKAGES
    )


def test_nothing_under_search_imports_a_domain_app():
    found = {}
    for path in sorted(SEARCH.rglob("*.py")):
        for module in imported_modules(path):
            package = module.split(".")[0]
            if package in PROJECT_PACKAGES - ALLOWED:
                found.setdefault(str(path.relative_to(ROOT)), []).append(module)
    assert found == {}


def test_the_check_sees_imports_at_any_depth(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import memory.models\n"
        "if TYPE_CHECKING:\n    from context.models import DocumentChunk\n"
        "def f():\n    from work import services\n"
        "from . import sibling\n"
    )
    assert imported_modules(source) == {"typing", "memory.models", "context.models", "work"}
