"""Imports point down, over the whole tree: every app and lib/, their management commands,
tasks, admin and migrations included (docs/architecture.md, "Which way imports point").

A package may import the packages of the tiers below its own; within a tier only
profiles/ and activity/ import each other (an event's actor is a user or an agent, and
profiles/ records its own events). config/ (the composition root) and tests/ stand outside.
tests/pages/test_layering.py adds the rules about pages and another app's views or APIs."""

import re
from pathlib import Path

import pytest

from tests.pages.test_layering import imported_names
from tests.search.test_layering import ROOT

# Top to bottom. Placed where their imports say: briefing (the system prompt, the heartbeat,
# ask_memory) reads learning's consolidated USER_MEMORY.md; portability (export and import)
# reads and writes memory, context and work; work needs only profiles and activity;
# mcp_bridge (the stdio MCP server, which calls the tool API over HTTP) needs only
# profiles' tokens.
TIERS: list[set[str]] = [
    {"pages"},
    {"briefing"},
    {"learning", "portability"},
    {"context"},
    {"memory", "work"},
    {"llm", "mcp_bridge"},
    {"profiles", "activity"},
    {"search"},
    {"lib"},
]
MUTUAL = [{"profiles", "activity"}]
OUTSIDE = {"config", "tests"}


def tier_of(package: str) -> int:
    return next(index for index, tier in enumerate(TIERS) if package in tier)


def may_import(importer: str, imported: str) -> bool:
    if importer == imported:
        return True
    below = tier_of(imported) > tier_of(importer)
    return below or any({importer, imported} <= pair for pair in MUTUAL)


def upward_imports(root: Path = ROOT) -> dict[str, list[str]]:
    """{file: [the project modules it may not import]} over every package but OUTSIDE."""
    packages = {path.parent.name for path in root.glob("*/__init__.py")} - OUTSIDE
    found: dict[str, list[str]] = {}
    for package in sorted(packages):
        for path in sorted((root / package).rglob("*.py")):
            for name in sorted(imported_names(path, root)):
                target = name.split(".")[0]
                if target in packages and not may_import(package, target):
                    found.setdefault(str(path.relative_to(root)), []).append(name)
    return found


def test_every_package_has_a_place():
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - OUTSIDE
    placed = set().union(*TIERS)
    assert packages == placed, "put a new package in TIERS and in docs/architecture.md"


def test_no_upward_imports_anywhere():
    assert upward_imports() == {}


def test_the_diagram_names_every_package():
    text = (ROOT / "docs" / "architecture.md").read_text()
    diagram = text.split("## Which way imports point", 1)[1].split("```")[1]
    assert set().union(*TIERS) <= set(re.findall(r"\w+", diagram))


@pytest.mark.parametrize(
    ("path", "source", "bad"),
    [
        ("lib/helper.py", "from activity.actors import Actor\n", "activity.actors"),
        ("lib/sub/deep.py", "def f():\n    import memory.models\n", "memory.models"),
        ("search/fields.py", "from memory.models import Memory\n", "memory.models"),
        (
            "profiles/management/commands/seed.py",
            "from work.services import work_create\n",
            "work.services",
        ),
        ("memory/services.py", "from context.selectors import readable\n", "context.selectors"),
        ("memory/migrations/0002_x.py", "from work.models import WorkItem\n", "work.models"),
        ("memory/tasks.py", "from work import services\n", "work.services"),
        (
            "llm/client.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from briefing.models import HeartbeatRun\n",
            "briefing.models",
        ),
        ("learning/x.py", "from portability.export import export\n", "portability.export"),
        ("context/x.py", "from pages.views import search\n", "pages.views"),
    ],
)
def test_the_check_sees_an_upward_import(tmp_path, path, source, bad):
    for tier in TIERS:
        for package in tier:
            (tmp_path / package).mkdir()
            (tmp_path / package / "__init__.py").write_text("")
    # Allowed beside it: downward, between profiles and activity, from the outside.
    (tmp_path / "memory" / "ok.py").write_text("from profiles.models import Agent\nimport lib\n")
    (tmp_path / "activity" / "ok.py").write_text("from profiles.models import Agent\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("from pages import views\n")
    target = tmp_path / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)

    found = upward_imports(tmp_path)

    assert list(found) == [path]
    assert bad in found[path]
