"""Time and conversation on every memory (issue 26, point 1): the rules of occurred_at and
session (memory/occurrence.py), through the write path and the memory tools."""

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from activity.actors import Actor
from lib.errors import InvalidInput, SecretRefused
from memory import services
from memory.entries import entry_create, memory_store
from memory.models import Memory, MemoryHistory
from memory.occurrence import clean_session, parse_occurred_at
from tests.factories import MemoryFactory

SINGAPORE = ZoneInfo("Asia/Singapore")


def _in_singapore():
    return SINGAPORE


def _no_zone_needed():
    raise AssertionError("the zone was asked for a value with its own offset")


# --- parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A date alone is the start of that day in the user's zone.
        ("2023-05-08", datetime(2023, 5, 7, 16, 0, tzinfo=UTC)),
        # A naive date-time is the user's local time.
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 5, 56, tzinfo=UTC)),
        ("2023-05-08T13:56", datetime(2023, 5, 8, 5, 56, tzinfo=UTC)),
        ("2023-05-08 13:56:00.250000", datetime(2023, 5, 8, 5, 56, 0, 250000, tzinfo=UTC)),
        ("  2023-05-08T13:56:00  ", datetime(2023, 5, 8, 5, 56, tzinfo=UTC)),
    ],
)
def test_a_value_without_an_offset_is_in_the_users_zone(text, expected):
    parsed = parse_occurred_at(text, zone=_in_singapore)

    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T13:56:00+02:00", datetime(2023, 5, 8, 11, 56, tzinfo=UTC)),
        ("2023-05-08T13:56:00-0500", datetime(2023, 5, 8, 18, 56, tzinfo=UTC)),
    ],
)
def test_a_value_with_an_offset_keeps_it_and_never_reads_the_zone(text, expected):
    assert parse_occurred_at(text, zone=_no_zone_needed) == expected


def test_dates_and_datetimes_given_as_objects():
    assert parse_occurred_at(date(2023, 5, 8), zone=_in_singapore) == datetime(
        2023, 5, 7, 16, tzinfo=UTC
    )
    aware = datetime(2023, 5, 8, 9, tzinfo=ZoneInfo("Europe/Paris"))
    assert parse_occurred_at(aware, zone=_no_zone_needed) == datetime(2023, 5, 8, 7, tzinfo=UTC)


def test_the_future_is_allowed_for_a_planned_event():
    assert parse_occurred_at("2031-01-15", zone=lambda: UTC) == datetime(2031, 1, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("May 8th", "occurred_at 'May 8th' is not an ISO 8601 date or date-time"),
        ("", "occurred_at '' is not an ISO 8601 date or date-time"),
        ("2023-5-8", "occurred_at '2023-5-8' is not an ISO 8601 date or date-time"),
        ("20230508", "occurred_at '20230508' is not an ISO 8601 date or date-time"),
        ("2023-W19", "occurred_at '2023-W19' is not an ISO 8601 date or date-time"),
        ("2023-05-08T13:56:00+02:00[Europe/Paris]", "is not an ISO 8601 date or date-time"),
        ("2023-02-30", "occurred_at '2023-02-30' is not a real date or time."),
        ("2023-05-08T25:00", "occurred_at '2023-05-08T25:00' is not a real date or time."),
        ("1899-12-31", "occurred_at must fall between the years 1900 and 2200."),
        ("2201-01-01T00:00Z", "occurred_at must fall between the years 1900 and 2200."),
        ("0001-01-01T00:00:00+05:00", "occurred_at must fall between the years 1900 and 2200."),
        (20230508, "occurred_at must be an ISO 8601 date or date-time"),
        (["2023-05-08"], "occurred_at must be an ISO 8601 date or date-time"),
    ],
)
def test_bad_times_are_refused_naming_the_field(value, message):
    with pytest.raises(InvalidInput) as refused:
        parse_occurred_at(value, zone=lambda: UTC)

    assert refused.value.field == "occurred_at"
    assert message in refused.value.message


def test_a_session_is_trimmed():
    assert clean_session("  chat-42 ") == "chat-42"
    assert clean_session("") == ""
    assert clean_session("x" * 100) == "x" * 100


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("x" * 101, "session is 101 characters long; the longest allowed is 100."),
        ("chat\n42", "session must be one line, without control characters."),
        ("chat\t42", "session must be one line, without control characters."),
        ("chat\x0042", "session must be one line, without control characters."),
        ("chat\u202842", "session must be one line, without control characters."),
        (42, "session must be text."),
        (None, "session must be text."),
    ],
)
def test_bad_sessions_are_refused_naming_the_field(value, message):
    with pytest.raises(InvalidInput) as refused:
        clean_session(value)

    assert (refused.value.field, refused.value.message) == ("session", message)


# --- the write path ---------------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_memory_without_a_time_takes_now_and_no_session(alice, agent):
    before = timezone.now()
    write = services.memory_upsert(user=alice, key="fact:tea", value="green tea", actor=agent)

    memory = Memory.objects.get(pk=write.memory.pk)
    assert before <= memory.occurred_at <= timezone.now()
    assert memory.session == ""


@pytest.mark.django_db
def test_a_naive_time_is_read_in_the_users_zone(alice, agent):
    MemoryFactory(user=alice, key="timezone", value="Asia/Singapore")

    services.memory_upsert(
        user=alice,
        key="fact:moved",
        value="moved to Lisbon",
        actor=agent,
        occurred_at="2023-05-08T13:56:00",
        session=" chat-42 ",
    )

    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert memory.occurred_at == datetime(2023, 5, 8, 5, 56, tzinfo=UTC)
    assert memory.session == "chat-42"
    history = MemoryHistory.objects.get(user=alice, key="fact:moved")
    assert history.after["occurred_at"] == "2023-05-08T05:56:00+00:00"
    assert history.after["session"] == "chat-42"


@pytest.mark.django_db
def test_an_update_without_them_keeps_them(alice):
    user = Actor.for_user(alice)
    services.memory_upsert(
        user=alice,
        key="fact:moved",
        value="moved to Lisbon",
        actor=user,
        occurred_at="2023-05-08T00:00:00Z",
        session="chat-42",
    )

    services.memory_update(user=alice, key="fact:moved", actor=user, value="moved to Porto")
    services.memory_upsert(user=alice, key="fact:moved", value="moved to Faro", actor=user)

    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert (memory.value, memory.occurred_at, memory.session) == (
        "moved to Faro",
        datetime(2023, 5, 8, tzinfo=UTC),
        "chat-42",
    )


@pytest.mark.django_db
def test_an_update_of_only_the_time_or_session(alice):
    user = Actor.for_user(alice)
    services.memory_upsert(user=alice, key="fact:moved", value="moved to Lisbon", actor=user)

    write = services.memory_update(
        user=alice, key="fact:moved", actor=user, occurred_at="2022-01-02T03:04:05+01:00"
    )
    assert write.status == "updated"
    write = services.memory_update(user=alice, key="fact:moved", actor=user, session="")
    write = services.memory_update(user=alice, key="fact:moved", actor=user, session="trip")

    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert (memory.occurred_at, memory.session) == (
        datetime(2022, 1, 2, 2, 4, 5, tzinfo=UTC),
        "trip",
    )
    last = MemoryHistory.objects.filter(user=alice, key="fact:moved").first()
    assert (last.before["session"], last.after["session"]) == ("", "trip")
    assert last.after["occurred_at"] == "2022-01-02T02:04:05+00:00"


@pytest.mark.django_db
def test_nothing_to_update_names_the_new_fields(alice):
    MemoryFactory(user=alice, key="fact:moved", value="moved")

    with pytest.raises(InvalidInput) as refused:
        services.memory_update(user=alice, key="fact:moved", actor=Actor.for_user(alice))

    assert refused.value.message == (
        "Nothing to update: give a value, confidence, tags, pinned, occurred_at or session."
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("extra", "field"),
    [({"occurred_at": "yesterday"}, "occurred_at"), ({"session": "a\nb"}, "session")],
)
def test_a_bad_value_writes_nothing(alice, agent, extra, field):
    with pytest.raises(InvalidInput) as refused:
        services.memory_upsert(user=alice, key="fact:tea", value="tea", actor=agent, **extra)

    assert refused.value.field == field
    assert not Memory.objects.filter(user=alice).exists()
    assert not MemoryHistory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_an_agents_session_holding_a_credential_is_refused(alice, agent):
    with pytest.raises(SecretRefused) as refused:
        memory_store(
            user=alice,
            actor=agent,
            kind="fact",
            text="likes tea",
            session="sk-proj-" + "a1B2c3D4e5" * 5,
        )

    assert refused.value.field == "session"
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_entry_create_and_memory_store_take_them(alice, agent):
    user = Actor.for_user(alice)
    entry_create(
        user=alice,
        kind="fact",
        value="ran a marathon",
        actor=user,
        occurred_at="2021-10-03",
        session="diary",
    )
    result = memory_store(
        user=alice,
        actor=agent,
        kind="decision",
        text="chose PostgreSQL for the event store",
        occurred_at="2026-11-18T09:00:00+00:00",
        session="chat-7",
    )

    marathon = Memory.objects.get(user=alice, key="fact:ran-a-marathon")
    assert (marathon.occurred_at, marathon.session) == (datetime(2021, 10, 3, tzinfo=UTC), "diary")
    stored = Memory.objects.get(user=alice, key=result.key)
    assert (stored.occurred_at, stored.session) == (datetime(2026, 11, 18, 9, tzinfo=UTC), "chat-7")


# --- the memory tools -------------------------------------------------------------------


@pytest.mark.django_db
def test_create_memory_takes_and_returns_them(call_tool, alice, alice_token):
    MemoryFactory(user=alice, key="timezone", value="Asia/Singapore")

    response = call_tool(
        alice_token,
        "create_memory",
        {
            "key": "fact:moved",
            "value": "moved to Lisbon",
            "occurred_at": "2023-05-08",
            "session": "chat-42",
        },
    )

    assert response.status_code == 201
    row = response.json()["memory"]
    assert (row["occurred_at"], row["session"]) == ("2023-05-07T16:00:00Z", "chat-42")


@pytest.mark.django_db
def test_update_memory_takes_them_and_leaves_what_is_not_given(call_tool, alice, alice_token):
    call_tool(
        alice_token,
        "create_memory",
        {"key": "fact:moved", "value": "moved", "occurred_at": "2023-05-08T10:00:00Z"},
    )

    response = call_tool(alice_token, "update_memory", {"key": "fact:moved", "session": "s-1"})
    assert response.status_code == 200
    assert response.json()["memory"]["occurred_at"] == "2023-05-08T10:00:00Z"
    assert response.json()["memory"]["session"] == "s-1"

    response = call_tool(
        alice_token,
        "update_memory",
        {"key": "fact:moved", "occurred_at": "2023-05-09T12:30:00+02:00"},
    )
    assert response.json()["memory"]["occurred_at"] == "2023-05-09T10:30:00Z"
    assert response.json()["memory"]["session"] == "s-1"


@pytest.mark.django_db
def test_memory_store_and_the_read_tools_return_them(call_tool, alice, alice_token):
    said = {
        "content": "The team chose PostgreSQL for the event store",
        "category": "decision",
        "occurred_at": "2026-11-18T09:00:00Z",
        "session": "chat-7",
    }
    stored = call_tool(alice_token, "memory_store", {**said, "share": True})
    # The agent's own note of it, which memory_list_recent lists.
    assert call_tool(alice_token, "memory_store", said).status_code == 201
    assert stored.status_code == 201
    key = stored.json()["key"]
    expected = ("2026-11-18T09:00:00Z", "chat-7")
    assert (stored.json()["memory"]["occurred_at"], stored.json()["memory"]["session"]) == expected

    read = call_tool(alice_token, "get_memory", {"key": key}).json()["memory"]
    listed = call_tool(alice_token, "list_memories", {}).json()["results"][0]
    recent = call_tool(alice_token, "memory_list_recent", {}).json()["results"][0]
    found = call_tool(alice_token, "search_memory", {"query": "PostgreSQL event store"}).json()
    for row in (read, listed, recent, found["results"][0]["memory"]):
        assert (row["occurred_at"], row["session"]) == expected


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"occurred_at": "last May"}, "occurred_at", "is not an ISO 8601 date or date-time"),
        ({"occurred_at": "1850-01-01"}, "occurred_at", "between the years 1900 and 2200"),
        ({"occurred_at": 20230508}, "occurred_at", "occurred_at: Must be text, not a number."),
        ({"session": "x" * 101}, "session", "Longer than 100 characters; shorten the session."),
        ({"session": "a\nb"}, "session", "session must be one line"),
        ({"session": ["chat"]}, "session", "session: Must be text, not a list."),
    ],
)
def test_the_tools_refuse_bad_values_naming_the_field(
    call_tool, alice, alice_token, body, field, message
):

    for tool, base in (
        ("create_memory", {"key": "fact:tea", "value": "tea"}),
        ("memory_store", {"content": "likes tea", "category": "fact"}),
    ):
        response = call_tool(alice_token, tool, {**base, **body})

        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["field"] == field
        assert message in error["message"]
    assert not Memory.objects.filter(user=alice).exists()


@pytest.mark.django_db
def test_bob_cannot_date_alices_memory(call_tool, alice, bob_token):
    MemoryFactory(
        user=alice,
        key="fact:moved",
        value="moved",
        occurred_at=datetime(2020, 1, 1, tzinfo=UTC),
    )

    response = call_tool(bob_token, "update_memory", {"key": "fact:moved", "session": "x"})

    assert response.status_code == 404
    memory = Memory.objects.get(user=alice, key="fact:moved")
    assert (memory.occurred_at, memory.session) == (datetime(2020, 1, 1, tzinfo=UTC), "")
