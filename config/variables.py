"""Every environment variable Mnemo reads, in one place: its name, its default as the
documentation states it, and what it does.

docs/configuration.md is written from this list (`python -m config.variables --write`), and
tests/test_configuration_doc.py fails when a variable read anywhere in the code is missing
here, when an entry here is read nowhere, when a default here differs from the one the code
passes (config/env.py records each read), or when docs/configuration.md is stale.

Plain data, importing nothing of Django: lib/stack.py and gunicorn read some of these
before any settings exist.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


@dataclass(frozen=True)
class Variable:
    name: str
    default: str  # Markdown, as the table shows it; a literal default in backticks
    description: str  # Markdown, one line in the table
    section: str


_S = "Storage and database"
_W = "Web server"
_A = "Accounts and sign-in"
_H = "Proxies and HTTPS"
_I = "The agent API, MCP and imports"
_M = "Memory and the working memory"
_R = "Search"
_E = "Embeddings"
_L = "The LLM"
_B = "The heartbeat and outbound requests"
_T = "Tests and compose"

VARIABLES: tuple[Variable, ...] = (
    # --- storage and database
    Variable(
        "MNEMO_DATA_DIR",
        "`.data/`",
        "embedded PostgreSQL and its generated password, Valkey's files, logs, static files, "
        "the generated secret key",
        _S,
    ),
    Variable(
        "DATABASE_URL",
        "unset (embedded)",
        "an external PostgreSQL with pgvector; turns off embedded mode and the demo account",
        _S,
    ),
    Variable("DATABASE_CONN_MAX_AGE", "`60`", "seconds a database connection is reused", _S),
    Variable(
        "CELERY_BROKER_URL",
        "the supervised Valkey in the data dir (embedded); `redis://localhost:6379/0` with "
        "`DATABASE_URL`",
        "Celery's broker, e.g. `redis://redis:6379/0` in compose",
        _S,
    ),
    Variable(
        "CACHE_URL",
        "the supervised Valkey (embedded); per process with `DATABASE_URL`",
        "shared by every process: rate-limit counters and embedding requests; "
        "`redis://redis:6379/1` in compose",
        _S,
    ),
    Variable(
        "MNEMO_STATIC_ROOT", "`$MNEMO_DATA_DIR/staticfiles`", "where `collectstatic` writes", _S
    ),
    # --- web server
    Variable(
        "SECRET_KEY",
        "generated per data dir in embedded mode",
        "required when `DATABASE_URL` is set",
        _W,
    ),
    Variable("MNEMO_DEBUG", "`false`", "Django's debug pages; never in production", _W),
    Variable("ALLOWED_HOSTS", "`127.0.0.1,localhost`", "host names the server answers to", _W),
    Variable(
        "CSRF_TRUSTED_ORIGINS",
        "none",
        "origins allowed to post forms, e.g. `https://mnemo.example.com`",
        _W,
    ),
    Variable(
        "MNEMO_HOST",
        "`127.0.0.1`",
        "the address `make run` listens on (compose and the image bind `0.0.0.0:8000`)",
        _W,
    ),
    Variable(
        "MNEMO_PORT",
        "`8000`",
        "the port `make run` listens on; the URL and the demo login are printed once the page "
        "answers there",
        _W,
    ),
    Variable(
        "WEB_CONCURRENCY",
        "`1` under `make run`, `2` otherwise",
        "gunicorn worker processes; each holds Django and the models (~230 MB)",
        _W,
    ),
    Variable(
        "MNEMO_WEB_THREADS",
        "`4`",
        "threads per web process that run Django once a request is read whole",
        _W,
    ),
    Variable("MNEMO_LOG_LEVEL", "`INFO`", "root log level", _W),
    # --- accounts
    Variable(
        "MNEMO_OPEN_SIGNUP",
        "`false`",
        "adds a sign-up page; otherwise accounts are made by an admin",
        _A,
    ),
    Variable(
        "MNEMO_LOGIN_FAILURE_LIMIT",
        "`5`",
        "failed sign-ins from one client address before sign-in from it is locked; also reset "
        "emails per address and per email address ([pages.md](pages.md#accounts))",
        _A,
    ),
    Variable(
        "MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT",
        "five times `MNEMO_LOGIN_FAILURE_LIMIT` (`25`)",
        "failed sign-ins at one account, from all addresses together, before it is locked for "
        "addresses it has not signed in from in 90 days; more than `MNEMO_LOGIN_FAILURE_LIMIT`",
        _A,
    ),
    Variable(
        "MNEMO_LOGIN_LOCKOUT_MINUTES",
        "`15`",
        "how long that lock lasts after the failures; also the window for reset emails",
        _A,
    ),
    Variable(
        "EMAIL_URL",
        "unset (no email)",
        "mail server for password reset links, e.g. "
        "`smtp://user:password@mail.example.com:587?tls=true` (`?ssl=true` for port 465)",
        _A,
    ),
    Variable("DEFAULT_FROM_EMAIL", "`webmaster@localhost`", "sender of those emails", _A),
    # --- proxies and HTTPS
    Variable(
        "MNEMO_BEHIND_PROXY",
        "`false`",
        "a TLS proxy in front sets `X-Forwarded-For`/`-Proto`/`-Host`; on connections from "
        "`MNEMO_TRUSTED_PROXIES`, the client's address is the right-most `X-Forwarded-For` "
        "entry that is not one of them, and a request is HTTPS when `X-Forwarded-Proto` says "
        "so ([Running behind TLS](deployment.md#running-behind-tls))",
        _H,
    ),
    Variable(
        "MNEMO_TRUSTED_PROXIES",
        "loopback (`127.0.0.0/8,::1`) with `MNEMO_BEHIND_PROXY=true`",
        "the proxies' addresses or networks, comma-separated, e.g. `172.16.0.0/12` for a proxy "
        "in another container; forwarded headers from any other peer are removed. Needs "
        "`MNEMO_BEHIND_PROXY=true`",
        _H,
    ),
    Variable(
        "MNEMO_SECURE_COOKIES",
        "`false` (`true` in compose)",
        "HTTPS-only session and CSRF cookies",
        _H,
    ),
    Variable(
        "MNEMO_SSL_REDIRECT",
        "`false`",
        "redirect plain HTTP to HTTPS (behind a proxy, with `MNEMO_BEHIND_PROXY=true` and the "
        "proxy in `MNEMO_TRUSTED_PROXIES`)",
        _H,
    ),
    Variable(
        "MNEMO_HSTS_SECONDS",
        "`0` (off)",
        "HSTS: seconds browsers use only HTTPS for this host, e.g. `31536000`; turn on once "
        "HTTPS works",
        _H,
    ),
    Variable("MNEMO_HSTS_INCLUDE_SUBDOMAINS", "`true`", "HSTS covers subdomains too", _H),
    Variable(
        "MNEMO_HSTS_PRELOAD",
        "`false`",
        "mark HSTS for the browsers' preload list (only for a domain you submit there)",
        _H,
    ),
    # --- API, MCP, imports
    Variable(
        "MNEMO_API_RATE",
        "`600/min`",
        "requests per API token (`<n>/<s|min|hour|day>`); over it, 429 with `Retry-After`",
        _I,
    ),
    Variable(
        "MNEMO_API_RATE_FAIL_OPEN",
        "`reads`",
        "while the cache that counts the rate is unreachable, which API requests pass "
        "uncounted: `reads` (GET and the read-only tools; every other call is a 503 "
        "`unavailable` with `Retry-After: 5`, before anything is written), `all` (fail open) "
        "or `none` (fail closed)",
        _I,
    ),
    Variable(
        "MNEMO_MCP_TOKEN",
        "unset",
        "the agent token `manage.py mcp` (stdio) uses when `--token` is not given",
        _I,
    ),
    Variable(
        "MNEMO_GLOBAL_READABLE",
        "`false`",
        "users' agents and pages may read global (company) documents, never write them",
        _I,
    ),
    Variable(
        "MNEMO_IMPORT_MAX_MB",
        "`256`",
        "the largest archive the import page takes (held in memory while it uploads)",
        _I,
    ),
    Variable(
        "MNEMO_IMPORT_MAX_UNPACKED_MB",
        "`512`",
        "the most one import may unpack into an account, all its files together; a larger "
        "archive is refused before anything is written",
        _I,
    ),
    # --- memory and the working memory
    Variable(
        "MNEMO_PROPOSAL_TTL_DAYS",
        "`14`",
        "days before a proposal in the review inbox (a memory's or an identity file's) that "
        "nobody decided on expires (recorded in Activity)",
        _M,
    ),
    Variable(
        "MNEMO_UNDO_DAYS",
        "`30`",
        "days Recently deleted lists deleted memories and a bulk action (delete, re-tag, pin, "
        "delete all) can be undone as one; history itself is kept",
        _M,
    ),
    Variable(
        "MNEMO_MERGE_NEAR_DUPLICATES",
        "`true`",
        "compare agents' new entries with the user's entries of the same kind "
        "([Who can change what](security.md#who-can-change-what)); `false` keeps every one, "
        "e.g. when agents ingest transcripts",
        _M,
    ),
    Variable(
        "MNEMO_DUPLICATE_THRESHOLD",
        "`0.66` (calibrated)",
        "WordLlama similarity at which an agent's new entry is near an existing one sharing "
        "half its words",
        _M,
    ),
    Variable(
        "MNEMO_TOKENIZER",
        "`o200k_base`",
        "tiktoken encoding for working-memory token counts",
        _M,
    ),
    Variable(
        "TIKTOKEN_CACHE_DIR",
        "tiktoken's default",
        "where tiktoken looks for encoding files (pre-filled in the Docker image)",
        _M,
    ),
    Variable(
        "MNEMO_WORKING_MEMORY_LINE_CHARS",
        "`300`",
        'the longest line a value makes in the working memory; a longer one ends with "…" '
        "(at least 100)",
        _M,
    ),
    # --- search
    Variable(
        "MNEMO_SEARCH_VECTOR_WEIGHT",
        "`0.7`",
        "the meaning side's share of a fused score (each side's scores brought to 0–1 first; "
        "[search.md](search.md))",
        _R,
    ),
    Variable("MNEMO_SEARCH_KEYWORD_WEIGHT", "`0.3`", "the words side's share of a fused score", _R),
    Variable(
        "MNEMO_SEARCH_FLOOR_QUERY",
        "`-1` (no floor)",
        "for an embedding model Mnemo has not calibrated (an OpenAI-compatible server's): "
        "cosine similarity of the best row below which only words answer a query",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_FLOOR_ROW",
        "`-1` (no floor)",
        "for such a model: similarity of a row below which it is no meaning match",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_USE_NUDGE",
        "`0.05`",
        "how far use lifts a memory's fused score (0 to 0.1; grows with log(1 + uses), full "
        "at 100)",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_AGE_NUDGE",
        "`0.05`",
        "how far age lowers a memory's or document's fused score (0 to 0.1; never what the "
        "user stated)",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_AGE_HALF_LIFE_DAYS",
        "`180`",
        "days after which half of the age nudge applies",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_AGE_BAR",
        "`0.03`",
        "how much closer than the model's row floor an agent-noted memory "
        "`MNEMO_SEARCH_AGE_BAR_DAYS` old must be to be returned by meaning (less when younger)",
        _R,
    ),
    Variable("MNEMO_SEARCH_AGE_BAR_DAYS", "`365`", "the age at which the full age bar applies", _R),
    Variable(
        "MNEMO_SEARCH_OWN_INDEX_ROWS",
        "`20000`",
        "an owner with more rows of a model than this gets its own HNSW index (built by beat, "
        "or `manage.py vector_indexes`); `0`: none",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_EMBED_TIMEOUT",
        "`2`",
        "a search embeds its query in one try of at most this many seconds",
        _R,
    ),
    Variable(
        "MNEMO_SEARCH_EMBED_COOLDOWN",
        "`30`",
        "after such a try fails, that process searches by keywords only for this many seconds",
        _R,
    ),
    # --- embeddings
    Variable(
        "MNEMO_EMBEDDING_PROVIDER",
        "`auto`",
        "memories: `e5` (multilingual-e5-small, offline, 384 dimensions), `wordllama` "
        "(offline, 256 dimensions; `local` is its old name), `openai` (any OpenAI-compatible "
        "server), or `auto`: `openai` when `OPENAI_API_KEY` is set, else `e5`; after a change "
        "run `manage.py reindex` ([search.md](search.md#embedding-models))",
        _E,
    ),
    Variable(
        "MNEMO_DOCUMENT_EMBEDDING_PROVIDER",
        "`auto`",
        "documents: the same choices, or `same` (as memories); `auto` is `openai` when "
        "memories use it, else `wordllama`",
        _E,
    ),
    Variable(
        "OPENAI_API_KEY",
        "unset",
        "key for the OpenAI-compatible server (any non-empty value for a server without keys)",
        _E,
    ),
    Variable(
        "OPENAI_BASE_URL",
        "OpenAI's",
        "an OpenAI-compatible server, e.g. `http://127.0.0.1:11434/v1`",
        _E,
    ),
    Variable(
        "MNEMO_EMBEDDING_MODEL",
        "`text-embedding-3-small`",
        "embedding model on that server",
        _E,
    ),
    Variable("MNEMO_EMBEDDING_DIMENSIONS", "`256`", "length of its vectors", _E),
    Variable(
        "MNEMO_EMBEDDING_SEND_DIMENSIONS",
        "`auto`",
        "send `dimensions` so the server shortens vectors: `auto` for `text-embedding-3*` "
        "only, or `true`/`false`",
        _E,
    ),
    Variable("MNEMO_EMBEDDING_BATCH_SIZE", "`64`", "texts per embeddings request", _E),
    Variable("MNEMO_EMBEDDING_CONNECT_TIMEOUT", "`5`", "seconds to connect to that server", _E),
    Variable("MNEMO_EMBEDDING_TIMEOUT", "`30`", "seconds to wait for its answer", _E),
    Variable(
        "MNEMO_EMBEDDING_RETRIES",
        "`3`",
        "retries after 408/409/429/5xx, timeouts and connection errors",
        _E,
    ),
    Variable(
        "MNEMO_EMBEDDING_BACKOFF",
        "`0.5`",
        "first wait before a retry in seconds, doubling up to `MNEMO_EMBEDDING_BACKOFF_MAX`; "
        "the server's `Retry-After` wins",
        _E,
    ),
    Variable(
        "MNEMO_EMBEDDING_BACKOFF_MAX",
        "`8`",
        "the longest wait; a `Retry-After` above it leaves the retry to the background task",
        _E,
    ),
    # --- the LLM
    Variable(
        "MNEMO_LLM_BASE_URL",
        "unset",
        "an OpenAI-compatible chat server for the LLM features, e.g. "
        "`http://127.0.0.1:11434/v1`; unset with a key: api.openai.com "
        "([learning.md](learning.md#the-model-server))",
        _L,
    ),
    Variable(
        "MNEMO_LLM_MODEL",
        "unset (LLM features off)",
        "the chat model, e.g. `gpt-4o-mini` or `llama3.2`",
        _L,
    ),
    Variable(
        "MNEMO_LLM_API_KEY",
        "`OPENAI_API_KEY`",
        "its key (a local server needs none)",
        _L,
    ),
    Variable("MNEMO_LLM_CONNECT_TIMEOUT", "`5`", "seconds to connect to the model server", _L),
    Variable("MNEMO_LLM_TIMEOUT", "`60`", "seconds to wait for its answer", _L),
    Variable(
        "MNEMO_LLM_RETRIES",
        "`1`",
        "more tries after a timeout, a connection error, 429 or 5xx",
        _L,
    ),
    Variable(
        "MNEMO_LLM_TOKENIZER",
        "the model's, by tiktoken",
        "tiktoken encoding that counts the model's tokens (the profile budget)",
        _L,
    ),
    Variable(
        "MNEMO_LLM_TURN_CHARS",
        "`8000`",
        "the most of each part of a turn (message, reply, each tool output) sent to the model",
        _L,
    ),
    # --- heartbeat and outbound
    Variable(
        "MNEMO_HEARTBEAT_INTERVAL",
        "`1800`",
        "seconds between a user's heartbeat runs (at least 60)",
        _B,
    ),
    Variable(
        "MNEMO_HEARTBEAT_WEBHOOK_ATTEMPTS",
        "`3`",
        "tries of a finding's webhook POST (1–10)",
        _B,
    ),
    Variable(
        "MNEMO_HEARTBEAT_WEBHOOK_TIMEOUT",
        "`5`",
        "seconds each try may take in all (lookup to answer)",
        _B,
    ),
    Variable(
        "MNEMO_HEARTBEAT_WEBHOOK_BACKOFF",
        "`1`",
        "first wait between tries, in seconds (doubling)",
        _B,
    ),
    Variable(
        "MNEMO_OUTBOUND_ALLOW",
        "empty",
        "where URLs that users and imports set (the webhook) may point besides public "
        "addresses: comma-separated addresses or CIDR ranges (`127.0.0.1`, `10.0.0.0/8`, "
        "`fd00::/8`), an address with a port (`127.0.0.1:9000`, `[::1]:9000`), host names with "
        "or without a port (`hooks.corp:8443`; their addresses are trusted); a cloud metadata "
        "address only by an entry naming it exactly. URLs set in the environment (LLM, "
        "embeddings, email) are not checked",
        _B,
    ),
    # --- tests and compose
    Variable(
        "MNEMO_EMBEDDED_THROWAWAY",
        "`false`",
        "tests: delete the embedded data dir when the last process exits",
        _T,
    ),
    Variable(
        "MNEMO_CHROMIUM",
        "`/usr/bin/chromium`",
        "tests: the chromium binary the browser tests drive",
        _T,
    ),
    Variable(
        "POSTGRES_PASSWORD",
        "none",
        "docker-compose only: the bundled PostgreSQL's password",
        _T,
    ),
)

BY_NAME = {variable.name: variable for variable in VARIABLES}
SECTIONS = tuple(dict.fromkeys(variable.section for variable in VARIABLES))

INTRO = """\
# Configuration

Only environment variables (or a `.env` file, never committed); a value that cannot be read
(e.g. `MNEMO_DEBUG=maybe`) stops the process with a message.
[`.env.example`](../.env.example) lists them all with comments. With nothing set, Mnemo runs
the embedded default (`make run`: [deployment.md](deployment.md)).

This page is generated from `config/variables.py`, the one list the code's settings are
checked against (`tests/test_configuration_doc.py`); after changing that list, run
`python -m config.variables --write`.
"""


def render() -> str:
    """docs/configuration.md, whole."""
    parts = [INTRO]
    for section in SECTIONS:
        parts += [f"\n## {section}\n", "\n| variable | default | meaning |\n|---|---|---|\n"]
        for variable in VARIABLES:
            if variable.section == section:
                cells = (f"`{variable.name}`", variable.default, variable.description)
                parts.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        DOC.write_text(render())
        print(f"Wrote {DOC} ({len(VARIABLES)} variables).")
        return 0
    if argv == ["--check"]:
        if DOC.read_text() == render():
            return 0
        print(f"{DOC} is stale: run python -m config.variables --write", file=sys.stderr)
        return 1
    print("usage: python -m config.variables --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
