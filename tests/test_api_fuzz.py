"""Fuzz the agent API from its own OpenAPI schema with schemathesis.

The schema is the one the app serves at /api/schema/, fetched through the WSGI app
(config.wsgi.application) when this module is collected. Every operation in it becomes a
test item (`test_api_fuzz[POST /api/v1/tools/create_memory]`, ...) that sends schemathesis'
generated requests through the same WSGI app, as alice's agent with a real bearer token,
inside the test's database transaction (embedded PostgreSQL, no mocks).

Each operation gets the schema's own examples, the coverage phase (boundary values,
missing and wrongly typed fields, unsupported methods, bad content types) and property-based
fuzzing in both positive (schema-valid) and negative (schema-violating) modes. Generation is
derandomized, so a run is reproducible. Each generated request runs in a savepoint that is
rolled back, so every example starts from the same seeded memories.

What a response must satisfy is CHECKS below, plus `error_shape`: no 5xx ever, documented
status codes and content types, bodies that match the documented schema, invalid input
rejected with a 4xx, auth enforced, 405 with an Allow header, and every 4xx in the API's one
error shape. `positive_data_acceptance` is left out on purpose: the schema cannot express the
API's business rules (a `timezone` memory must be an IANA zone, update_memory needs at least
one field besides `key`, `cursor` must be a next_cursor the API issued), so schema-valid
requests are rightly refused with a 400 there.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import hypothesis
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from hypothesis import HealthCheck
from schemathesis import GenerationMode
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from schemathesis.config._checks import NegativeDataRejectionConfig

from activity.actors import Actor
from config.wsgi import application
from context.services import PROFILE_PATH, document_write
from context.well_known import append_agent_memory
from learning.user_memory_doc import empty_profile
from memory.services import memory_upsert

SCHEMA_PATH = "/api/schema/"
MAX_EXAMPLES = 50  # fuzzing-phase examples per operation; examples and coverage come on top

# Memories alice has before every generated request. The keys are the ones the schema's own
# examples use and every profile key, so get/update/delete requests find something to act on
# in the examples phase and whenever fuzzing draws a profile key.
SEEDED = {
    "preference:report-format": "bullet points in reports",
    "fact:tea": "likes green tea",
    "name": "Alice",
    "role": "Head of Growth",
    "company": "YARNNN",
    "timezone": "Europe/Berlin",
    "summary": "Runs growth experiments and writes the weekly report.",
    "tone_slack": "casual",
}

# Alice's documents before every generated request: the paths the schema's examples name.
SEEDED_DOCUMENTS = {
    "MEMORY.md": "- Prefers meetings after 10:00",
    "notes/ideas.md": "# Ideas\n- a weekly digest",
    "notes/old.md": "to be deleted",
    "daily/2026-11-21.md": "- 09:30 Sent the weekly report",
}

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    ignored_auth,
    missing_required_header,
    unsupported_method,
    allow_header_conformance,
]

ERROR_KEYS = {"code", "message", "field"}


def error_shape(ctx: Any, response: Any, case: Any) -> None:
    """Every 4xx the API sends is `{"error": {"code", "message", "field"}}` (lib/api.py)."""
    if not 400 <= response.status_code < 500 or case.method.upper() == "HEAD":
        return
    try:
        body = response.json()
    except ValueError as error:
        raise AssertionError(f"{response.status_code} body is not JSON: {error}") from None
    shape = f"not the API's error shape: {body!r}"
    assert isinstance(body, dict), shape
    assert set(body) == {"error"}, shape
    error = body["error"]
    assert isinstance(error, dict), shape
    assert set(error) == ERROR_KEYS, shape
    assert isinstance(error["code"], str), shape
    assert error["code"], shape
    assert isinstance(error["message"], str), shape
    assert error["message"], shape
    assert error["field"] is None or isinstance(error["field"], str), shape


schema = schemathesis.openapi.from_wsgi(
    SCHEMA_PATH, application, headers={"Accept": "application/vnd.oai.openapi+json"}
)
schema.config.phases.update(phases=["examples", "coverage", "fuzzing"])
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=MAX_EXAMPLES,
    deterministic=True,
    database="none",
    # The bearer token is ours (alice's); don't generate Authorization headers.
    with_security_parameters=False,
)
# A schema-violating body can also be too large to read at all: 413 rejects it as surely as
# a 400 (lib/asgi.py and the API's body limit answer before any field is looked at).
schema.config.checks.negative_data_rejection = NegativeDataRejectionConfig(
    expected_statuses=[*NegativeDataRejectionConfig().expected_statuses, 413]
)
# Show memory keys in failure reports (the default hides anything named like "key");
# tokens and Authorization headers stay hidden.
schema.config.output.sanitization.sensitive_markers = ("token", "secret", "password", "auth")
# The export is a user's (session) download that every agent token is refused (403, tested
# in tests/portability/test_export.py): fuzzing it as an agent could never reach a 2xx.
schema = schema.exclude(operation_id="export_account")


@pytest.fixture
def _keep_test_connection():
    """Requests go through the real WSGI handler, which closes the database connection at
    the start and end of each request; that would end the test's transaction. Django's
    test client disconnects the same signal for the same reason."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_as_alice(settings, alice, alice_agent, alice_token, _keep_test_connection):
    """Alice's seeded memories and documents, an unthrottled API, her agent's auth header."""
    settings.MNEMO_API_RATE = "1000000/s"
    actor = Actor.for_agent(alice_agent)
    for key, value in SEEDED.items():
        memory_upsert(user=alice, key=key, value=value, actor=actor)
    for path, content in SEEDED_DOCUMENTS.items():
        document_write(user=alice, path=path, content=content, actor=actor)
    append_agent_memory(agent=alice_agent, content="Ask before booking.", actor=actor)
    # A consolidated profile, so GET /api/v1/profile-memory answers 200 without an LLM
    # (with neither, it is a 503 llm_not_configured, tested in tests/learning).
    # Written as Mnemo's consolidation does (the system): an agent never writes it.
    document_write(
        user=alice, path=PROFILE_PATH, content=empty_profile(alice), actor=Actor.system()
    )
    return {"Authorization": f"Bearer {alice_token}"}


class Outcomes:
    """What one operation's generated requests got back."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.failed = False


@pytest.fixture
def outcomes():
    """After the run, the operation must have answered both a 2xx and a 4xx: a fuzz run
    where every request bounced off auth (401) or validation would prove nothing."""
    seen = Outcomes()
    yield seen
    if seen.failed:
        return  # the test already fails, with schemathesis' report
    codes = dict(seen.statuses)
    assert any(200 <= code < 300 for code in codes), f"never a 2xx: {codes}"
    assert any(400 <= code < 500 for code in codes), f"never a 4xx: {codes}"


# The eager loader, not schemathesis.pytest.from_fixture: with pytest 9.2 the lazy one fails
# (AttributeError: 'Function' object has no attribute '_nodeid'). Under pytest 9.2 the items
# all share the node id `tests/test_api_fuzz.py::test_api_fuzz`; their names and failure
# headers still carry the operation.
@schema.parametrize()
@hypothesis.settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api_fuzz(case, fuzz_as_alice, outcomes):
    with transaction.atomic():
        # case.call_and_validate() in two steps, to count the statuses in between.
        response = case.call(headers=fuzz_as_alice)
        outcomes.statuses[response.status_code] += 1
        try:
            case.validate_response(
                response,
                checks=[*CHECKS, error_shape],
                headers=fuzz_as_alice,
                transport_kwargs={"headers": fuzz_as_alice},
            )
        except BaseException:
            outcomes.failed = True
            raise
        transaction.set_rollback(True)
