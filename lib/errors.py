"""Errors the services raise; pages and the API turn them into messages and 4xx answers."""


class ServiceError(Exception):
    code = "error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(ServiceError):
    code = "invalid"


class NotFound(ServiceError):
    code = "not_found"


class MemoryPaused(ServiceError):
    code = "memory_paused"


class Conflict(ServiceError):
    """The thing changed since the caller last read it; nothing was written."""

    code = "conflict"


class Forbidden(ServiceError):
    """The caller may see this but not change it (or may not use this at all)."""

    code = "forbidden"


class VersionConflict(Conflict):
    """A change made from a version of a document that is no longer its newest (or from no
    document, where one now exists); nothing was written. current_version is the newest
    version's id when the conflict was found (None if there is no document), so the caller
    can re-read and retry."""

    code = "version_conflict"

    def __init__(
        self, message: str, *, field: str | None = None, current_version: int | None = None
    ) -> None:
        super().__init__(message, field=field)
        self.current_version = current_version


class SecretRefused(ServiceError):
    """An agent's (or the system's) write holds what looks like a credential (found by
    lib/credentials.py); nothing was written (422). `kind` names what it looks like
    ("openai_api_key"), `label` says it for people ("an OpenAI API key")."""

    code = "secret_refused"

    def __init__(self, *, kind: str, label: str, field: str, where: str = "as memories") -> None:
        super().__init__(
            f"This looks like {label}; Mnemo does not store credentials {where}.", field=field
        )
        self.kind = kind
        self.label = label


class LLMNotConfigured(ServiceError):
    """An LLM feature was asked for and no model server is configured (503)."""

    code = "llm_not_configured"

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(
            message
            or "No LLM is configured: set MNEMO_LLM_MODEL and MNEMO_LLM_BASE_URL (a local "
            "OpenAI-compatible server) or MNEMO_LLM_API_KEY (api.openai.com), then restart.",
            field=field,
        )
