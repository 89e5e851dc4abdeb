"""The import's validation stays apart from its application (docs/architecture.md,
"Import"): portability/validation/ reads and checks an archive and imports nothing that
writes it into an account (portability/applying.py, portability/replaying.py, the job in
portability/importing.py)."""

from tests.pages.test_layering import imported_names
from tests.search.test_layering import ROOT

APPLICATION = ("portability.applying", "portability.replaying", "portability.importing")


def test_validation_imports_nothing_of_the_application():
    found = {
        str(path.relative_to(ROOT)): sorted(
            name for name in imported_names(path) if name.startswith(APPLICATION)
        )
        for path in sorted((ROOT / "portability" / "validation").glob("*.py"))
    }
    assert len(found) >= 5
    assert {path: names for path, names in found.items() if names} == {}
