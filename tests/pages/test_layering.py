"""pages/ sits above the layers: it may import any of them, nothing imports it, and no app
imports another app's views or APIs (docs/architecture.md). What a page needs from a layer
comes from that layer's services, selectors, forms and models; a page that needs two layers
lives in pages/."""

import ast
import re
from pathlib import Path

import pytest

from tests.search.test_layering import PROJECT_PACKAGES, ROOT

# The composition root (settings, URLs) and the tests stand outside the layering.
OUTSIDE = {"config", "tests"}
# Shared helpers any app may use, whatever their module is called (lib/api.py).
SHARED = {"lib"}
# A module that answers requests: views, *_views, apis, *_api, urls, api_urls.
HTTP_MODULE = re.compile(r"views|\w+_views|apis|\w+_api|urls|api_urls")


def imported_names(path: Path, root: Path = ROOT) -> set[str]:
    """Every dotted name the file imports, at any depth: `from memory import views` gives
    "memory" and "memory.views"; relative imports are resolved from the file's place."""
    names = set()
    parts = path.relative_to(root).with_suffix("").parts
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(parts[: len(parts) - node.level])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def violations(root: Path = ROOT) -> dict[str, list[str]]:
    """{file: [what it should not import]} for every app's Python files."""
    packages = {path.parent.name for path in root.glob("*/__init__.py")} - OUTSIDE
    found: dict[str, list[str]] = {}
    for package in sorted(packages):
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for name in sorted(imported_names(path, root)):
                target, *rest = name.split(".")
                if target not in packages or target == package:
                    continue
                if target == "pages":
                    why = "imports pages, which sits above every layer"
                elif target not in SHARED and any(HTTP_MODULE.fullmatch(part) for part in rest):
                    why = "imports another app's views or APIs"
                else:
                    continue
                found.setdefault(str(path.relative_to(root)), []).append(f"{name}: {why}")
    return found


def test_the_apps_are_found():
    assert {"pages", "memory", "context", "learning", "work", "activity", "profiles"} <= (
        PROJECT_PACKAGES
    )


def test_no_app_imports_pages_or_another_apps_views():
    assert violations() == {}


def test_pages_holds_no_models():
    """pages/ shows the layers; the data and its rules stay in them."""
    assert not (ROOT / "pages" / "models.py").exists()
    assert not (ROOT / "pages" / "migrations").exists()


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from memory.review_views import inbox_page\n", "memory.review_views"),
        ("from memory import review_views\n", "memory.review_views"),
        ("import work.views\n", "work.views"),
        ("def f():\n    from learning.ask_api import AskMemoryApi\n", "learning.ask_api"),
        ("from pages.views.search import highlight\n", "pages.views.search"),
        ("from pages import context_processors\n", "pages"),
    ],
)
def test_the_check_would_see_one(tmp_path, source, found):
    for package in ("context", "memory", "work", "learning", "pages", "lib", "tests"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "context" / "bad.py").write_text(source)
    # Allowed: its own views, a layer's services, lib's helpers; the tests may import pages.
    (tmp_path / "context" / "good.py").write_text(
        "from context import views\nfrom memory.services import memory_set\n"
        "from lib.api import ToolInput\nfrom . import forms\n"
    )
    (tmp_path / "tests" / "test_x.py").write_text("from pages.views import context\n")
    (tmp_path / "pages" / "views.py").write_text("from memory.services import memory_set\n")

    bad = violations(tmp_path)

    assert list(bad) == ["context/bad.py"]
    assert bad["context/bad.py"][0].split(":")[0] == found
