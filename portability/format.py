"""The Mnemo export format, version 1: what `portability/export.py` writes and the import
reads (`portability/validation/`, `portability/applying.py`). One zip archive (deflated),
its members:

- `profile.json`: the account's settings, an object with `token_budget`,
  `memory_paused`, `review_agent_memories`, `auto_learn`, `profile_budget`,
  `llm_daily_tokens`, `heartbeat_enabled`, `notify_webhook_url`, and `agents`: a list of
  `{"name", "display_name", "description", "learns_from_turns"}` ordered by name
  (`display_name` may be absent in older archives). Never a token, a token
  hash, the webhook secret or the password.
- `memories.jsonl`: one JSON object per line per memory, ordered by key, with the
  fields of MEMORY_FIELDS. Times are ISO 8601 with their UTC offset, or null.
  `occurred_at` (when what it says happened or was said) and `session` (the conversation
  it came from, or "") are absent from archives made before issue 26: a memory imported
  from one is said when it is imported, in no conversation. `audience` (issue 27) is
  `"user"` for the user's memory or `{"agent": <agent name>}` for that agent's own note
  (a key is unique per audience); absent (an older archive), the user's memory.
- `memory_history.jsonl`: one line per history row, ordered by created_at then id, with
  MEMORY_HISTORY_FIELDS; `before` and `after` exactly as stored (memory/snapshots.py:
  since issue 26 with `occurred_at` and `session`); `audience` as a memory's.
- `documents/<path>`: each of the user's own documents at its path; each agent's private
  documents at `documents/agents/<agent name>/<path>`. The member's bytes are the body,
  UTF-8, nothing added. The manifest's entry for a document also names its scope
  (`"agent"`: the agent's name or null) and its `"path"`, so a reader never has to guess
  whether `documents/agents/…` is an agent's folder or a user folder called "agents":
  the manifest is authoritative. Should the two ever give the same member name, the
  later document is written as `documents/~<n>/<path>` (n = 2, 3, …), its manifest entry
  still naming its agent and path.
- `document_versions.jsonl`: one line per version of the user's own and their agents'
  documents, ordered by created_at then id, with DOCUMENT_VERSION_FIELDS.
- `work/<id>-<slug>.md`: one work item per file, ordered by created_at then id: a front
  matter block between two lines of `---`, one `name: value` line per WORK_FRONT_MATTER
  key in that order, each value JSON-encoded (strings quoted, lists as JSON arrays, null
  for no agent), then the Markdown body exactly as stored after the closing `---\\n`.
- `activity.jsonl`: one line per activity event, ordered by created_at then id, with
  ACTIVITY_FIELDS.
- `proposals.jsonl`: one line per review-inbox proposal, ordered by created_at then id,
  with PROPOSAL_FIELDS.
- `manifest.json`, written last: `{"format": "mnemo-export", "format_version": 1,
  "exported_at", "user", "counts", "files"}`. `counts` maps each file (and the folders
  `documents/` and `work/`) to its number of lines or members; `files` maps every other
  member's name to `{"sha256": hex digest of its bytes, "bytes": its length}` (plus
  `agent` and `path` for documents). An archive holds these members and nothing else:
  the import refuses one the manifest does not list (portability/validation/archive.py).

An actor everywhere is `{"type": "user" | "agent" | "system", "agent": name or null}`.
No ids, embeddings or search columns are exported; the work file name's id is only there
to keep names unique.
"""

from __future__ import annotations

FORMAT = "mnemo-export"
FORMAT_VERSION = 1

MANIFEST = "manifest.json"
PROFILE = "profile.json"
MEMORIES = "memories.jsonl"
MEMORY_HISTORY = "memory_history.jsonl"
DOCUMENTS_DIR = "documents/"
AGENT_DOCUMENTS_DIR = "documents/agents/"
DOCUMENT_VERSIONS = "document_versions.jsonl"
WORK_DIR = "work/"
ACTIVITY = "activity.jsonl"
PROPOSALS = "proposals.jsonl"

PROFILE_FIELDS = (
    "token_budget",
    "memory_paused",
    "review_agent_memories",
    "auto_learn",
    "profile_budget",
    "llm_daily_tokens",
    "heartbeat_enabled",
    "notify_webhook_url",
)
AGENT_FIELDS = ("name", "display_name", "description", "learns_from_turns")

MEMORY_FIELDS = (
    "key",
    "value",
    "source",
    "confidence",
    "tags",
    "pinned",
    "access_count",
    "last_accessed_at",
    "occurred_at",
    "session",
    "created_at",
    "updated_at",
    "audience",
)
MEMORY_HISTORY_FIELDS = (
    "key",
    "action",
    "source",
    "before",
    "after",
    "actor",
    "created_at",
    "audience",
)
# A memory's audience in an archive: the user's memory, or {"agent": name} for a note.
USER_AUDIENCE = "user"
DOCUMENT_VERSION_FIELDS = ("path", "agent", "action", "body", "actor", "created_at")
WORK_FRONT_MATTER = (
    "title",
    "kind",
    "status",
    "tags",
    "agent",
    "metadata",
    "created_at",
    "updated_at",
)
WORK_FRONT_MATTER_FENCE = "---"
ACTIVITY_FIELDS = ("event_type", "payload", "actor", "created_at")
PROPOSAL_FIELDS = (
    "key",
    "action",
    "trigger",
    "status",
    "before",
    "after",
    "reason",
    "requested_key",
    "actor",
    "created_at",
    "expires_at",
    "decided_at",
)
