"""No private Django API in product code (issue 29): what a Django upgrade may change
without notice stays out of the apps, lib/ and config/ (tests, benches and migrations are
not scanned).

Forbidden:
- `._state` (ModelState): a model's own methods in its models.py may read `self._state`
  (Django documents `_state.adding` for exactly that); nothing may assign to it, and
  nothing else may touch it (the ORM sets it: `save()`, `create()`, `from_db()`).
- mutating `_meta`: assigning or deleting anything under it, or calling anything on it but
  its documented readers (`get_field`, `get_fields`). Reading its attributes (`fields`,
  `concrete_fields`, `db_table`, `label`, `pk`, …) is fine.
- calling a field's `pre_save(` outside a models.py: that is `Model.save()`'s step, with
  its `add` flag; outside a model use `save()`, `create()` or `update()`.
"""

import ast
from pathlib import Path

from tests.search.test_layering import ROOT

NOT_PRODUCT = {"tests", "bench"}
META_READERS = {"get_field", "get_fields"}


def product_files(root: Path = ROOT) -> list[Path]:
    """Every .py file of the project's packages (apps, lib/, config/), migrations aside."""
    packages = sorted(
        path.parent for path in root.glob("*/__init__.py") if path.parent.name not in NOT_PRODUCT
    )
    return sorted(
        path
        for package in packages
        for path in package.rglob("*.py")
        if "migrations" not in path.relative_to(root).parts
    )


def _chain(node: ast.expr, *, through_calls: bool) -> list[str]:
    """The attribute names from `node` down to its root (a.b.c -> ["c", "b", "a"]), going
    through subscripts and, with `through_calls`, through calls (a.f(x).b -> ["b", "f", "a"])."""
    names: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif through_calls and isinstance(node, ast.Call):
            node = node.func
        else:
            if isinstance(node, ast.Name):
                names.append(node.id)
            return names


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return [leaf for target in node.targets for leaf in _unpacked(target)]
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def _unpacked(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [leaf for element in target.elts for leaf in _unpacked(element)]
    if isinstance(target, ast.Starred):
        return _unpacked(target.value)
    return [target]


def private_django_uses(source: str, *, models_file: bool) -> list[str]:
    """Each use of private Django API in `source`, as "line N: what". `models_file`: the
    source is a models.py (where `self._state` may be read and `pre_save(` called)."""
    found: list[str] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for target in _targets(node):
            chain = _chain(target, through_calls=True)
            for private in ("_state", "_meta"):
                if private in chain:
                    found.append(f"line {node.lineno}: assigns or deletes under {private}")
        if isinstance(node, ast.Attribute) and node.attr == "_state":
            own = isinstance(node.value, ast.Name) and node.value.id == "self"
            if not (models_file and own and isinstance(node.ctx, ast.Load)):
                found.append(f"line {node.lineno}: ._state")
        if not isinstance(node, ast.Call):
            continue
        chain = _chain(node.func, through_calls=False)
        if "_meta" in chain[1:] and chain[0] not in META_READERS:
            found.append(f"line {node.lineno}: calls _meta...{chain[0]}()")
        pre_save = isinstance(node.func, ast.Attribute) and node.func.attr == "pre_save"
        if pre_save and not models_file:
            found.append(f"line {node.lineno}: .pre_save( outside a models.py")
        if _sets_private(node):
            found.append(f"line {node.lineno}: {node.func.id} on _meta or _state")
    return found


def _sets_private(call: ast.Call) -> bool:
    """setattr(x._meta, …) or delattr(x._state, …) and the like."""
    if not (isinstance(call.func, ast.Name) and call.func.id in ("setattr", "delattr")):
        return False
    return bool(call.args) and bool(
        {"_meta", "_state"} & set(_chain(call.args[0], through_calls=True))
    )


def test_product_code_uses_no_private_django_api():
    found = {
        str(path.relative_to(ROOT)): uses
        for path in product_files()
        if (uses := private_django_uses(path.read_text(), models_file=path.name == "models.py"))
    }
    assert found == {}


def test_the_scan_covers_the_apps_lib_and_config_but_not_tests_or_migrations():
    scanned = {str(path.relative_to(ROOT)) for path in product_files()}
    assert {"memory/services.py", "memory/write_sql.py", "lib/errors.py"} <= scanned
    assert any(name.startswith("config/") for name in scanned)
    assert not any(name.startswith(("tests/", "bench/")) for name in scanned)
    assert not any("/migrations/" in name for name in scanned)


VIOLATIONS = """
instance._state.adding = False
instance._state.db = "default"
row._state
Memory._meta.db_table = "other"
Memory._meta.fields.append(field)
Memory._meta.add_field(field)
del Memory._meta.ordering
Memory._meta.get_field("key").column = "k"
setattr(Memory._meta, "ordering", [])
field.pre_save(instance, add=True)
a, instance._state.adding = 1, False
"""

ALLOWED = """
names = [field.attname for field in Memory._meta.concrete_fields]
table = Memory._meta.db_table
label = Memory._meta.label
column = Memory._meta.get_field("key").column
fields = Memory._meta.get_fields()
value = Memory._meta.get_field("key").get_db_prep_save("x", connection)
pk = Memory._meta.pk.attname
"""

OWN_STATE = """
class Row(models.Model):
    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise AppendOnlyError
        value = self.created.pre_save(self, add=True)
        super().save(*args, **kwargs)
"""


def test_the_scan_finds_every_kind_of_violation(tmp_path):
    sample = tmp_path / "services.py"
    sample.write_text(VIOLATIONS)

    found = private_django_uses(sample.read_text(), models_file=False)

    lines = {int(use.split(":")[0].removeprefix("line ")) for use in found}
    assert lines == set(range(2, 13)), found


def test_the_scan_allows_reading_meta():
    assert private_django_uses(ALLOWED, models_file=False) == []


def test_a_model_may_read_its_own_state_only_in_its_models_file():
    assert private_django_uses(OWN_STATE, models_file=True) == []
    found = private_django_uses(OWN_STATE, models_file=False)
    assert sorted(use.split(": ", 1)[1] for use in found) == [
        "._state",
        ".pre_save( outside a models.py",
    ]
    assignment = OWN_STATE.replace("if not self._state.adding:", "self._state.adding = False")
    assert "assigns or deletes under _state" in " ".join(
        private_django_uses(assignment.replace("raise AppendOnlyError", ""), models_file=True)
    )
