"""Checks on the production deployment files: Dockerfile, .dockerignore, docker-compose.yml.

They read the files as text or YAML; nothing is built or started and no network is used.
"""

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"
# config/settings.py and the modules it takes blocks from: every variable the settings read.
SETTINGS_FILES = [
    ROOT / "config" / name
    for name in ("settings.py", "env.py", "broker.py", "accounts.py", "security.py")
]

APP_SERVICES = ("migrate", "web", "worker", "beat")

# env("X"), env.str("X", ...), env.db("X"), "X" in env
_SETTINGS_ENV_CALL = re.compile(r"""\benv(?:\.\w+|_\w+)?\(\s*["']([A-Z][A-Z0-9_]*)["']""")
_SETTINGS_ENV_IN = re.compile(r"""["']([A-Z][A-Z0-9_]*)["']\s+(?:not\s+)?in\s+env\b""")
# ${X}, ${X:-default}, ${X:?message}, $X; "$$" is an escaped dollar sign.
_COMPOSE_VAR = re.compile(r"(?<!\$)\$(?:\{([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_]*))")
_REQUIRED_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*):\?[^}]+\}$")
_SECRET_NAME = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|PRIVATE", re.IGNORECASE)


def settings_env_vars(source: str) -> set[str]:
    """Names of the environment variables a settings module reads through django-environ."""
    return set(_SETTINGS_ENV_CALL.findall(source)) | set(_SETTINGS_ENV_IN.findall(source))


def compose_vars(text: str) -> set[str]:
    """Names of the variables a compose file interpolates."""
    return {braced or bare for braced, bare in _COMPOSE_VAR.findall(text)}


def documented_vars(text: str) -> set[str]:
    """Variables named at the start of a line of an env file, commented out or not."""
    return set(re.findall(r"^[ \t]*(?:#[ \t]*)?(?:export[ \t]+)?([A-Za-z_]\w*)=", text, re.M))


def as_argv(command: str | list[str]) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(arg) for arg in command]


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    if current:
        logical.append(current)
    pairs = []
    for entry in logical:
        instruction, _, arguments = entry.partition(" ")
        pairs.append((instruction.upper(), " ".join(arguments.split())))
    return pairs


@pytest.fixture(scope="module")
def compose_text() -> str:
    return COMPOSE_FILE.read_text()


@pytest.fixture(scope="module")
def compose(compose_text: str) -> dict[str, Any]:
    return yaml.safe_load(compose_text)


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE.read_text())


# --- the helpers themselves --------------------------------------------------------------


def test_settings_env_vars_finds_every_form_of_read():
    source = """
EMBEDDED = "ONLY_TESTED_FOR_PRESENCE" not in env
if 'SECRET_KEY' in env:
    x = env.str("SECRET_KEY")
DEBUG = env.bool("MNEMO_DEBUG", default=False)
DATABASES = {"default": env.db("DATABASE_URL")}
A = env("PLAIN_CALL")
B = env.list(
    "MULTI_LINE",
    default=[],
)
C = os.environ.get("NOT_THROUGH_ENV")
"""
    assert settings_env_vars(source) == {
        "ONLY_TESTED_FOR_PRESENCE",
        "DATABASE_URL",
        "SECRET_KEY",
        "MNEMO_DEBUG",
        "PLAIN_CALL",
        "MULTI_LINE",
    }


def settings_source() -> str:
    return "\n".join(path.read_text() for path in SETTINGS_FILES)


def test_settings_env_vars_reads_the_real_settings():
    found = settings_env_vars(settings_source())
    assert {
        "DATABASE_URL",
        "SECRET_KEY",
        "ALLOWED_HOSTS",
        "CSRF_TRUSTED_ORIGINS",
        "CELERY_BROKER_URL",
    } <= found


def test_compose_vars_and_documented_vars():
    assert compose_vars("a: ${ONE:?x} b: ${TWO:-d} c: $THREE d: $$NOT e: ${FOUR}") == {
        "ONE",
        "TWO",
        "THREE",
        "FOUR",
    }
    env_file = "# SECRET_KEY=\nDATABASE_URL=postgres://x\n#  MNEMO_DEBUG=false\n# see FOO=1 below\n"
    assert documented_vars(env_file) == {"SECRET_KEY", "DATABASE_URL", "MNEMO_DEBUG"}


# --- docker-compose.yml ----------------------------------------------------------------


def test_compose_has_no_version_key(compose):
    assert "version" not in compose


def test_compose_has_every_service(services):
    assert set(services) == {"db", "redis", "migrate", "web", "worker", "beat"}


def test_db_is_pgvector_with_a_named_volume_and_pg_isready(compose, services):
    db = services["db"]
    assert db["image"].startswith("pgvector/pgvector:")
    volume_names = [volume.split(":")[0] for volume in db["volumes"]]
    assert any(name in (compose.get("volumes") or {}) for name in volume_names)
    assert "pg_isready" in " ".join(as_argv(db["healthcheck"]["test"]))


def test_redis_has_a_healthcheck(services):
    redis = services["redis"]
    assert redis["image"] == "redis:7-alpine"
    assert "ping" in as_argv(redis["healthcheck"]["test"])


@pytest.mark.parametrize(
    ("service", "argv"),
    [
        ("migrate", ["python", "manage.py", "migrate", "--noinput"]),
        ("worker", ["celery", "-A", "config", "worker"]),
        ("beat", ["celery", "-A", "config", "beat"]),
    ],
)
def test_app_service_commands(services, service, argv):
    assert as_argv(services[service]["command"])[: len(argv)] == argv


def test_web_runs_gunicorn_on_port_8000(services):
    web = services["web"]
    argv = as_argv(web.get("command", []))
    assert argv[:3] == ["gunicorn", "-c", "config/gunicorn.conf.py"]
    assert "0.0.0.0:8000" in argv
    assert any(str(port).endswith("8000") for port in web["ports"])


def test_app_services_share_one_image_built_from_this_repo(services):
    images = {services[name].get("image") for name in APP_SERVICES}
    builds = [services[name].get("build") for name in APP_SERVICES]
    assert len(images) == 1
    assert all(build in (".", {"context": "."}) for build in builds)


def test_startup_order(services):
    migrate_deps = services["migrate"]["depends_on"]
    assert migrate_deps["db"]["condition"] == "service_healthy"
    assert services["migrate"].get("restart") in ("no", None)
    for name in ("web", "worker", "beat"):
        deps = services[name]["depends_on"]
        assert deps["migrate"]["condition"] == "service_completed_successfully"
        assert deps["redis"]["condition"] == "service_healthy"


def test_app_services_are_configured_for_postgres_and_redis(services):
    for name in APP_SERVICES:
        environment = services[name]["environment"]
        assert environment["DATABASE_URL"].startswith("postgres://mnemo:")
        assert environment["DATABASE_URL"].endswith("@db:5432/mnemo")
        assert environment["CELERY_BROKER_URL"] == "redis://redis:6379/0"
        for variable in ("SECRET_KEY", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS"):
            assert variable in environment


def test_required_secrets_come_from_the_environment(services):
    for name in APP_SERVICES:
        environment = services[name]["environment"]
        assert _REQUIRED_REF.match(environment["SECRET_KEY"])[1] == "SECRET_KEY"
        password = re.match(r"^postgres://mnemo:(.*)@db:", environment["DATABASE_URL"])[1]
        assert _REQUIRED_REF.match(password)[1] == "POSTGRES_PASSWORD"
    assert _REQUIRED_REF.match(services["db"]["environment"]["POSTGRES_PASSWORD"])[1] == (
        "POSTGRES_PASSWORD"
    )


def test_no_secret_literals_in_compose(services):
    for name, service in services.items():
        environment = service.get("environment") or {}
        if isinstance(environment, list):
            environment = dict(item.partition("=")[::2] for item in environment)
        for key, value in environment.items():
            text = "" if value is None else str(value)
            if _SECRET_NAME.search(key):
                assert _REQUIRED_REF.match(text), f"{name}.{key} must be ${{{key}:?...}}"
            for userinfo_password in re.findall(r"://[^:/@\s]+:([^@\s]*)@", text):
                assert _REQUIRED_REF.match(userinfo_password), f"{name}.{key} has a password"


# --- .env.example ------------------------------------------------------------------------


def _env_example_vars() -> set[str]:
    assert ENV_EXAMPLE.exists(), ".env.example must document the configuration"
    return documented_vars(ENV_EXAMPLE.read_text())


def test_env_example_documents_every_compose_variable(compose_text):
    missing = compose_vars(compose_text) - _env_example_vars()
    assert not missing, f"not in .env.example: {sorted(missing)}"


def test_env_example_documents_every_settings_variable():
    missing = settings_env_vars(settings_source()) - _env_example_vars()
    assert not missing, f"not in .env.example: {sorted(missing)}"


# --- Dockerfile and .dockerignore --------------------------------------------------------


def test_dockerfile_base_image(dockerfile):
    froms = [arguments for instruction, arguments in dockerfile if instruction == "FROM"]
    assert froms == ["python:3.12-slim"]


def test_dockerfile_installs_pinned_uv_and_syncs_from_the_lock(dockerfile):
    runs = [arguments for instruction, arguments in dockerfile if instruction == "RUN"]
    pins = [m[1] for run in runs if (m := re.search(r"pip install \"?uv==(\d+\.\d+\.\d+)", run))]
    assert len(pins) == 1
    makefile = ROOT / "Makefile"
    if makefile.exists() and (
        m := re.search(r"^UV_VERSION\s*:?=\s*(\S+)", makefile.read_text(), re.M)
    ):
        assert pins[0] == m[1], "the image and `make install` must use the same uv"
    syncs = [run for run in runs if "uv sync" in run]
    assert syncs
    assert all("--frozen" in run and "--no-dev" in run for run in syncs)


def test_dockerfile_copies_the_lock_before_the_app(dockerfile):
    copies = [arguments.split() for instruction, arguments in dockerfile if instruction == "COPY"]
    lock_copy = next(i for i, args in enumerate(copies) if "uv.lock" in args)
    app_copy = next(i for i, args in enumerate(copies) if args[0] == ".")
    assert "pyproject.toml" in copies[lock_copy]
    assert lock_copy < app_copy
    sync = next(i for i, (ins, args) in enumerate(dockerfile) if "uv sync" in args)
    app = next(i for i, (ins, args) in enumerate(dockerfile) if ins == "COPY" and args[0] == ".")
    assert sync < app


def test_dockerfile_does_not_ship_env_files(dockerfile):
    for instruction, arguments in dockerfile:
        if instruction in ("COPY", "ADD"):
            assert not re.search(r"(^|[\s/])\.env\b", arguments), arguments
    ignored = DOCKERIGNORE.read_text().splitlines()
    assert ".env" in ignored


def test_dockerignore_excludes_local_state():
    ignored = {line.strip().rstrip("/") for line in DOCKERIGNORE.read_text().splitlines()}
    assert {".venv", ".tools", ".data", ".git", "test-artifacts", "__pycache__"} <= ignored


def test_dockerfile_keeps_no_secrets_in_env_or_arg(dockerfile):
    for instruction, arguments in dockerfile:
        if instruction in ("ENV", "ARG"):
            assert "SECRET_KEY" not in arguments
            assert "DATABASE_URL" not in arguments
            assert "PASSWORD" not in arguments


def test_dockerfile_collects_static_without_the_embedded_database(dockerfile):
    runs = [arguments for instruction, arguments in dockerfile if instruction == "RUN"]
    collect = next(run for run in runs if "collectstatic" in run)
    assert "--noinput" in collect
    assert "SECRET_KEY=" in collect
    assert "DATABASE_URL=" in collect


def test_dockerfile_runs_gunicorn_as_a_non_root_user(dockerfile):
    users = [arguments for instruction, arguments in dockerfile if instruction == "USER"]
    assert users
    assert users[-1].split(":")[0] not in ("root", "0")
    assert ("EXPOSE", "8000") in dockerfile
    cmd = [arguments for instruction, arguments in dockerfile if instruction == "CMD"][-1]
    assert cmd.startswith('["gunicorn", "-c", "config/gunicorn.conf.py"')
    assert "0.0.0.0:8000" in cmd
    assert "--workers" not in cmd  # gunicorn reads WEB_CONCURRENCY


def test_dockerfile_has_no_placeholders():
    assert not re.search(r"TODO|FIXME|XXX", DOCKERFILE.read_text())
