"""docs/configuration.md cannot drift: config/variables.py lists every environment variable
the code reads, with the defaults the code passes, and the page is written from that list.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from pathlib import Path

import environ
import pytest

from config import env as config_env
from config.variables import BY_NAME, DOC, VARIABLES, main, render

ROOT = Path(__file__).resolve().parent.parent
SKIPPED_DIRS = {".venv", ".tools", ".git", ".data", "node_modules", "migrations"}
# Read from the environment but not settings of Mnemo: set by Django, Python or the system.
NOT_SETTINGS = {
    "DJANGO_SETTINGS_MODULE",  # manage.py, wsgi.py, asgi.py, celery.py set it themselves
    "DJANGO_ALLOW_ASYNC_UNSAFE",  # the browser tests' own switch, put back after each
    "HOME",  # lib/stack.py sets it for PostgreSQL's account
    "DATA_GYM_CACHE_DIR",  # tiktoken's older name of TIKTOKEN_CACHE_DIR, honoured as it does
    "OMP_WAIT_POLICY",  # libgomp's own (search/e5_embedder.py leaves it alone when set)
}
# Defaults made from where the data lives (the entry says which, in words).
DEFAULTS_FROM_THE_DATA_DIR = {"MNEMO_DATA_DIR", "MNEMO_STATIC_ROOT", "CELERY_BROKER_URL"}
ENV_FUNCTIONS = re.compile(r"^env(_\w+)?$")


def python_files() -> list[Path]:
    """The project's own Python files (git's, as a checkout has them)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if not SKIPPED_DIRS & set(Path(name).parts)]


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _name(node: ast.AST | None) -> str | None:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"[A-Z][A-Z0-9_]*", node.value)
    ):
        return node.value
    return None


def environment_reads(source: str) -> set[str]:
    """Names a module reads from the environment: env.str("X"), env_int("X", …),
    os.environ.get("X"), os.environ["X"], os.getenv("X"), "X" in env / os.environ, and
    a module constant that names a MNEMO_ variable (e.g. TOKEN_VARIABLE = "MNEMO_MCP_TOKEN")."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            function, first = node.func, _name(node.args[0])
            if first is None:
                continue
            if isinstance(function, ast.Name) and ENV_FUNCTIONS.match(function.id):
                found.add(first)
            elif isinstance(function, ast.Attribute):
                owner = function.value
                owner_name = owner.id if isinstance(owner, ast.Name) else None
                env_method = owner_name == "env"  # env.str, env.bool, env.db, …
                environ_get = _is_os_environ(owner) and function.attr == "get"
                getenv = owner_name == "os" and function.attr == "getenv"
                if env_method or environ_get or getenv:
                    found.add(first)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _is_os_environ(node.value) and (name := _name(node.slice)):
                found.add(name)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            if isinstance(node.ops[0], ast.In | ast.NotIn) and (name := _name(node.left)):
                container = node.comparators[0]
                if _is_os_environ(container) or (
                    isinstance(container, ast.Name) and container.id == "env"
                ):
                    found.add(name)
        elif (
            isinstance(node, ast.Assign)
            and (name := _name(node.value))
            and name.startswith("MNEMO_")
        ):
            found.add(name)
    return found


def make_variables(text: str) -> set[str]:
    """Variables a Makefile reads: `$(NAME)` and `NAME ?=` of MNEMO_ names."""
    return set(re.findall(r"\b(MNEMO_[A-Z0-9_]+)\b", text))


@functools.cache
def code_reads() -> dict[str, list[str]]:
    """{name: [files that read it]} over the project: every read by the application's code,
    and every MNEMO_ variable read by the tests and benchmarks."""
    reads: dict[str, list[str]] = {}
    for path in python_files():
        relative = str(path.relative_to(ROOT))
        names = environment_reads(path.read_text())
        if relative.startswith(("tests/", "bench/", "clients/")):
            names = {name for name in names if name.startswith("MNEMO_")}
        for name in names - NOT_SETTINGS:
            reads.setdefault(name, []).append(relative)
    for name in make_variables((ROOT / "Makefile").read_text()):
        reads.setdefault(name, []).append("Makefile")
    return reads


def test_the_scan_finds_each_kind_of_read():
    source = (
        'A = env.str("ONE", default="")\n'
        'B = env_int("TWO", default=1)\n'
        'C = os.environ.get("THREE", "x")\n'
        'D = os.environ["FOUR"]\n'
        'E = "FIVE" in env\n'
        'F = os.getenv("SIX")\n'
        'G = "MNEMO_SEVEN"\n'
        'os.environ["NOT_A_READ"] = "1"\n'
        'H = "NOT_MNEMO"\n'
    )
    expected = {"ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "MNEMO_SEVEN"}
    assert environment_reads(source) == expected


def test_every_variable_the_code_reads_is_listed():
    missing = {name: files for name, files in code_reads().items() if name not in BY_NAME}
    assert not missing, (
        f"read but not in config/variables.py (add them, then python -m config.variables "
        f"--write): {missing}"
    )


def test_every_listed_variable_is_read_somewhere():
    compose = (ROOT / "docker-compose.yml").read_text()
    unread = {name for name in BY_NAME if name not in code_reads() and f"${{{name}" not in compose}
    assert not unread, f"in config/variables.py but read nowhere: {sorted(unread)}"


def test_there_are_no_two_entries_for_one_variable():
    assert len(BY_NAME) == len(VARIABLES)


def _as_documented(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def test_the_listed_defaults_are_the_ones_the_settings_pass():
    """config/env.py recorded every read of the settings with the default passed."""
    assert len(config_env.READS) > 60  # the settings have been read through it
    wrong = {}
    for name, default in config_env.READS.items():
        if default is environ.Env.NOTSET or default is None or default == "" or default == []:
            continue  # no literal default: the entry says in words what happens
        if name in DEFAULTS_FROM_THE_DATA_DIR:
            continue  # a path in this machine's data dir: the entry names it
        documented = f"`{_as_documented(default)}`"
        if documented not in BY_NAME[name].default:
            wrong[name] = (BY_NAME[name].default, documented)
    assert not wrong, f"config/variables.py states another default than the code: {wrong}"


def test_the_configuration_page_is_current():
    assert DOC.read_text() == render(), "run: python -m config.variables --write"
    assert main(["--check"]) == 0


def test_the_page_lists_every_variable_once():
    text = DOC.read_text()
    rows = re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", text, re.M)
    assert sorted(rows) == sorted(BY_NAME)
    assert "`MNEMO_PORT` | `8000`" in text


def test_env_example_documents_every_listed_variable():
    documented = set(
        re.findall(
            r"^[ \t]*(?:#[ \t]*)?(?:export[ \t]+)?([A-Za-z_]\w*)=",
            (ROOT / ".env.example").read_text(),
            re.M,
        )
    )
    missing = set(BY_NAME) - documented - {"MNEMO_CHROMIUM"}  # a test's switch, not a setting
    assert not missing, f"not in .env.example: {sorted(missing)}"


@pytest.mark.parametrize("stale", ["", "# Configuration\n"])
def test_check_fails_on_a_stale_page(stale, tmp_path, monkeypatch):
    page = tmp_path / "configuration.md"
    page.write_text(stale)
    monkeypatch.setattr("config.variables.DOC", page)
    assert main(["--check"]) == 1
    assert main(["--write"]) == 0
    assert page.read_text() == render()
