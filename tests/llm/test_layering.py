"""llm/ sits below the layers (a memory, a proposal, a document version link to a Turn),
and profiles/ sits below llm/: neither may import upward (docs/architecture.md)."""

from pathlib import Path

import pytest

from tests.search.test_layering import PROJECT_PACKAGES, ROOT, imported_modules

# What each package may import among the project's own; the rest is upward (its management
# commands included: the demo seeding lives in pages/). tests/test_layering.py checks every app.
ALLOWED = {
    "llm": {"llm", "lib", "profiles", "activity", "search"},
    "profiles": {"profiles", "lib", "activity", "search"},
}


def upward_imports(package: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        for module in imported_modules(path):
            if module.split(".")[0] in PROJECT_PACKAGES - ALLOWED[package]:
                found.setdefault(str(path.relative_to(ROOT)), []).append(module)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_upward_imports(package):
    assert {"learning", "llm"} <= PROJECT_PACKAGES
    assert upward_imports(package) == {}


def test_the_check_would_see_one(tmp_path, monkeypatch):
    package = tmp_path / "llm"
    package.mkdir()
    (package / "bad.py").write_text("from learning.pipeline import process_turn\n")
    monkeypatch.setattr("tests.llm.test_layering.ROOT", Path(tmp_path))

    assert upward_imports("llm") == {"llm/bad.py": ["learning.pipeline"]}
