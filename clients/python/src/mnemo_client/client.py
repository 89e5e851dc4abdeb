"""MnemoClient: Mnemo's agent API, one method per tool, over the standard library's HTTP.

No dependencies: urllib speaks HTTP/1.1 with a new connection per call, which a memory
service's few calls per turn do not notice; it honours the usual *_PROXY variables."""

from __future__ import annotations

import email.utils
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from email.message import Message
from typing import Any, Literal, overload

from mnemo_client._tools import (
    Profile,
    ProfileMemory,
    SystemPrompt,
    Tool,
    Tools,
    Turn,
    WorkingMemory,
)
from mnemo_client.errors import BY_STATUS, MnemoConnectionError, MnemoError

RETRY_STATUSES = (429, 503)


class MnemoClient(Tools):
    """A Mnemo server, seen with one agent token.

        client = MnemoClient("https://mnemo.example.com", token="mnemo_…")
        client.create_memory("preference:report-format", "Short bullet points")

    Tool results are the API's JSON as TypedDicts; a 202 (a change waiting for the user's
    review) is a result too, with `status == "pending_review"` and the `proposal`. Errors
    raise MnemoError (or a subclass by status). 429 and 503 answers are retried after
    their Retry-After, at most `max_retries` times, each wait capped at `max_retry_wait`
    seconds; a longer wait raises at once.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 2,
        max_retry_wait: float = 60.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self._headers = {"Authorization": f"Bearer {token}", "User-Agent": "mnemo-client"}
        self._opener = urllib.request.build_opener()

    # The GET endpoints.

    def list_tools(self) -> list[Tool]:
        """The tool manifest, in OpenAI function-calling format (GET /api/v1/tools)."""
        return self._get("/api/v1/tools")

    @overload
    def working_memory(
        self,
        *,
        budget: int | None = None,
        format: Literal["markdown", "scratchpad"] = "markdown",
        as_of: datetime | str | None = None,
    ) -> str: ...

    @overload
    def working_memory(
        self,
        *,
        budget: int | None = None,
        format: Literal["json"],
        as_of: datetime | str | None = None,
    ) -> WorkingMemory: ...

    def working_memory(
        self,
        *,
        budget: int | None = None,
        format: Literal["json", "markdown", "scratchpad"] = "markdown",
        as_of: datetime | str | None = None,
    ) -> WorkingMemory | str:
        """The working-memory block for the system prompt (GET /api/v1/working-memory).

        Markdown (or the scratchpad) as text by default; format="json" gives the block
        with its token count, the keys included and those omitted. budget: 500 to 8000
        tokens; as_of: the block as it was at that time.
        """
        if isinstance(as_of, datetime):
            as_of = as_of.isoformat()
        params = {"budget": budget, "format": format, "as_of": as_of}
        return self._get("/api/v1/working-memory", params)

    def profile(self) -> Profile:
        """The user's settings that shape what you may do (GET /api/v1/profile)."""
        return self._get("/api/v1/profile")

    def profile_memory(self, *, format: Literal["json", "markdown"] = "json") -> ProfileMemory:
        """The user's consolidated profile, to load before each turn (GET
        /api/v1/profile-memory). A 503 llm_not_configured when there is none."""
        return self._get("/api/v1/profile-memory", {"format": format})

    def system_prompt(
        self, *, budget: int | None = None, format: Literal["json", "markdown"] = "json"
    ) -> SystemPrompt:
        """The system prompt for this agent's session (GET /api/v1/system-prompt);
        budget: 1000 to 32000 tokens."""
        return self._get("/api/v1/system-prompt", {"budget": budget, "format": format})

    def get_turn(self, turn_id: int) -> Turn:
        """What came of a reported turn (GET /api/v1/turns/<id>); `turn_id` is the `id`
        report_turn answered with."""
        return self._get(f"/api/v1/turns/{int(turn_id)}")

    # The transport.

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        query = {name: value for name, value in (params or {}).items() if value is not None}
        if query:
            path = f"{path}?{urllib.parse.urlencode(query)}"
        return self._request("GET", path, None)

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        arguments = {name: value for name, value in body.items() if value is not None}
        return self._request("POST", path, json.dumps(arguments).encode())

    def _request(self, method: str, path: str, data: bytes | None) -> Any:
        headers = dict(self._headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(self.max_retries + 1):
            url = self.base_url + path  # http(s) only: __init__ checks base_url
            request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    return decode(response.headers, response.read())
            except urllib.error.HTTPError as answer:
                with answer:
                    status, body = answer.code, answer.read()
                wait = retry_after(answer.headers)
                retry = status in RETRY_STATUSES and attempt < self.max_retries
                if retry and wait is not None and wait <= self.max_retry_wait:
                    time.sleep(wait)
                    continue
                raise error_from(status, answer.headers, body, wait) from None
            except TimeoutError as exc:
                raise MnemoConnectionError("timeout", f"{method} {path}: {exc}") from exc
            except (urllib.error.URLError, ConnectionError) as exc:
                raise MnemoConnectionError("connection_error", f"{method} {path}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover


def decode(headers: Message, body: bytes) -> Any:
    """A success's body: parsed JSON, or text (the markdown formats)."""
    charset = headers.get_content_charset() or "utf-8"
    if headers.get_content_type() == "application/json":
        return json.loads(body.decode(charset))
    return body.decode(charset)


def retry_after(headers: Message) -> float | None:
    """The Retry-After header in seconds (it may be a number or an HTTP date)."""
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_from(status: int, headers: Message, body: bytes, wait: float | None) -> MnemoError:
    """The API's error shape as a MnemoError; any other answer (a proxy's page) as http_<n>."""
    try:
        detail = json.loads(body)["error"]
        code, message, field = detail["code"], detail["message"], detail.get("field")
    except (ValueError, KeyError, TypeError):
        text = body.decode(headers.get_content_charset() or "utf-8", "replace").strip()
        code, message, field = f"http_{status}", text[:500] or f"HTTP {status}", None
    error_class = BY_STATUS.get(status, MnemoError)
    return error_class(code, message, field, status=status, retry_after=wait)
