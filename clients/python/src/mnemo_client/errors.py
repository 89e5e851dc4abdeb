"""The API's one error shape, `{"error": {"code", "message", "field"}}`, as exceptions."""

from __future__ import annotations


class MnemoError(Exception):
    """An answer of 4xx/5xx from Mnemo, or no answer at all (status None).

    `code` is the API's machine-readable code (not_found, invalid, memory_paused,
    version_conflict, secret_refused, rate_limited, …), `field` the argument at fault when
    there is one.
    """

    def __init__(
        self,
        code: str,
        message: str,
        field: str | None = None,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}" + (f" ({field})" if field else ""))
        self.code = code
        self.message = message
        self.field = field
        self.status = status
        self.retry_after = retry_after


class InvalidRequest(MnemoError):
    """400: an argument was wrong; `field` names it."""


class AuthenticationError(MnemoError):
    """401: no token, or one that is unknown or revoked."""


class PermissionDenied(MnemoError):
    """403: the token may not do this (a company document, a system token, …)."""


class NotFound(MnemoError):
    """404: no such memory, document, work item or turn (or not this user's)."""


class Conflict(MnemoError):
    """409: memory is paused, or a document changed since `base_version`."""


class SecretRefused(MnemoError):
    """422: the text looks like a credential (an API key, a password, …); nothing was
    stored. `message` names what it looks like, `field` where it is."""


class RateLimited(MnemoError):
    """429 after the retries ran out; `retry_after` is the server's wait in seconds."""


class ServiceUnavailable(MnemoError):
    """503 after the retries ran out (database unreachable, no LLM configured, …)."""


class MnemoConnectionError(MnemoError):
    """The server could not be reached, or did not answer in time."""


BY_STATUS: dict[int, type[MnemoError]] = {
    400: InvalidRequest,
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    422: SecretRefused,
    429: RateLimited,
    503: ServiceUnavailable,
}
