"""The agent-memory design's tools over HTTP: memory_store (the key made from the content),
memory_list_recent, and the working memory's scratchpad format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from activity.actors import Actor
from lib.slugs import text_hash
from lib.tokenizer import get_token_counter
from llm.models import Turn, TurnStatus
from memory.models import Memory, MemoryHistory, MemoryProposal, ProposalTrigger
from memory.outcomes import ReviewRequired
from memory.selectors import SCRATCHPAD_USES
from memory.services import memory_upsert
from memory.uses import memory_count_uses
from profiles.services import profile_update

pytestmark = pytest.mark.django_db

TEA = {"content": "Likes green tea in the afternoon", "category": "preference", "tags": ["Drinks"]}
TEA_KEY = "preference:likes-green-tea-in-the-afternoon"


def error(response):
    body = response.json()
    assert set(body) == {"error"}
    return body["error"]


@pytest.fixture
def clock(monkeypatch):
    """Sets the time the scratchpad's last-7-days window counts back from (the rows these
    tests read are dated in the past)."""

    def set_now(when):
        monkeypatch.setattr("memory.selectors.timezone", SimpleNamespace(now=lambda: when))

    return set_now


def stamp(user, key, when):
    """Set when a memory last changed (rows for reading tests; writes go through services)."""
    Memory.objects.filter(user=user, key=key).update(
        updated_at=when, created_at=when, occurred_at=when
    )


# --- memory_store ----------------------------------------------------------------------------


def test_memory_store_makes_the_key_from_the_content(call_tool, alice, alice_agent, alice_token):
    response = call_tool(alice_token, "memory_store", TEA)

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["status"], body["key"]) == ("created", TEA_KEY)
    memory = body["memory"]
    assert memory["key"] == TEA_KEY
    assert memory["kind"] == "preference"
    assert memory["value"] == "Likes green tea in the afternoon"
    assert (memory["source"], memory["confidence"], memory["tags"]) == (
        "tp_extracted",
        0.8,
        ["drinks"],
    )
    row = Memory.objects.get(user=alice)
    assert (row.key, row.turn_id) == (TEA_KEY, None)
    history = MemoryHistory.objects.get(memory=row)
    assert (history.action, history.actor_agent) == ("create", alice_agent)


def test_memory_store_of_the_same_content_again_is_unchanged(call_tool, alice, alice_token):
    call_tool(alice_token, "memory_store", TEA)

    again = call_tool(alice_token, "memory_store", TEA)

    assert again.status_code == 200
    body = again.json()
    assert (body["status"], body["key"], body["memory"]["key"]) == ("unchanged", TEA_KEY, TEA_KEY)
    assert Memory.objects.filter(user=alice).count() == 1
    assert MemoryHistory.objects.filter(user=alice).count() == 1


def test_memory_store_names_the_memory_that_says_it_already(
    call_tool, alice, alice_agent, alice_token
):
    memory_upsert(
        user=alice,
        key="preference:tea",
        value="likes green tea in the afternoon",
        actor=Actor.for_agent(alice_agent),
    )

    response = call_tool(
        alice_token,
        "memory_store",
        {**TEA, "content": "Likes  GREEN tea in the afternoon.", "share": True},
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["key"], body["similarity"]) == ("duplicate", "preference:tea", 1.0)
    assert body["memory"]["value"] == "likes green tea in the afternoon"
    assert list(Memory.objects.filter(user=alice).values_list("key", flat=True)) == [
        "preference:tea"
    ]


def test_memory_store_never_replaces_a_memory_with_the_same_first_words(
    call_tool, alice, alice_token, settings
):
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # two texts with the same first sixty letters
    start = "The quarterly planning meeting moves to the big room on the third floor"
    first = call_tool(
        alice_token, "memory_store", {"content": f"{start} in May", "category": "fact"}
    )
    second = call_tool(
        alice_token, "memory_store", {"content": f"{start} from June on", "category": "fact"}
    )

    base = "fact:the-quarterly-planning-meeting-moves-to-the-big-room-on-the"
    assert (first.json()["key"], second.json()["key"]) == (base, f"{base}-2")
    assert second.status_code == 201
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        base: f"{start} in May",
        f"{base}-2": f"{start} from June on",
    }


def test_memory_store_of_text_in_another_script_gets_a_romanised_key(call_tool, alice_token):
    first = call_tool(
        alice_token, "memory_store", {"content": "喜欢绿茶", "category": "preference"}
    )
    second = call_tool(alice_token, "memory_store", {"content": "住在上海", "category": "fact"})
    third = call_tool(
        alice_token, "memory_store", {"content": "不喝咖啡", "category": "preference"}
    )

    fourth = call_tool(alice_token, "memory_store", {"content": "???", "category": "fact"})

    assert [r.json()["key"] for r in (first, second, third, fourth)] == [
        "preference:xi-huan-lu-cha",
        "fact:zhu-zai-shang-hai",
        "preference:bu-he-ka-fei",
        f"fact:note-{text_hash('???')}",
    ]


def test_memory_store_waits_for_review_when_the_user_reviews_new_memories(
    call_tool, alice, alice_agent, alice_token
):
    profile_update(user=alice, review_agent_memories=True)

    response = call_tool(alice_token, "memory_store", {**TEA, "share": True})
    again = call_tool(alice_token, "memory_store", {**TEA, "share": True})

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["key"]) == ("pending_review", TEA_KEY)
    proposal = body["proposal"]
    assert (proposal["key"], proposal["action"], proposal["trigger"], proposal["agent"]) == (
        TEA_KEY,
        "create",
        "new_memory",
        "assistant",
    )
    assert proposal["after"]["value"] == "Likes green tea in the afternoon"
    assert again.status_code == 202
    assert again.json()["proposal"]["id"] == proposal["id"]  # the same note waits once
    assert not Memory.objects.filter(user=alice).exists()
    assert MemoryProposal.objects.filter(user=alice).count() == 1


def test_two_notes_waiting_for_review_under_the_same_words_keep_both(
    call_tool, alice, alice_token, settings
):
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False
    profile_update(user=alice, review_agent_memories=True)
    start = "The quarterly planning meeting moves to the big room on the third floor"

    first = call_tool(
        alice_token,
        "memory_store",
        {"content": f"{start} in May", "category": "fact", "share": True},
    )
    second = call_tool(
        alice_token,
        "memory_store",
        {"content": f"{start} in June", "category": "fact", "share": True},
    )

    base = "fact:the-quarterly-planning-meeting-moves-to-the-big-room-on-the"
    assert (first.json()["key"], second.json()["key"]) == (base, f"{base}-2")
    assert set(
        MemoryProposal.objects.filter(user=alice, status="pending_review").values_list(
            "key", flat=True
        )
    ) == {base, f"{base}-2"}


def test_memory_store_that_adds_to_a_near_memory_proposes_to_update_it(
    call_tool, alice, alice_agent, alice_token
):
    memory_upsert(
        user=alice,
        key="preference:bullets",
        value="Prefers bullet points in reports",
        actor=Actor.for_user(alice),
    )

    response = call_tool(
        alice_token,
        "memory_store",
        {
            "content": "Prefers short bullet points in reports",
            "category": "preference",
            "share": True,
        },
    )

    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["key"]) == ("pending_review", "preference:bullets")
    proposal = MemoryProposal.objects.get(pk=body["proposal"]["id"])
    assert (proposal.trigger, proposal.requested_key) == (
        ProposalTrigger.NEAR_DUPLICATE,
        "preference:prefers-short-bullet-points-in-reports",
    )
    assert Memory.objects.get(user=alice).value == "Prefers bullet points in reports"
    assert not Memory.objects.filter(owner_agent__isnull=False).exists()


@pytest.mark.parametrize(
    ("body", "field", "fragment"),
    [
        ({"category": "fact"}, "content", "required"),
        ({"content": "Likes tea"}, "category", "required"),
        ({"content": "Likes tea", "category": "opinion"}, "category", "not a valid choice"),
        ({"content": "Likes tea", "category": "profile"}, "category", "not a valid choice"),
        ({"content": "", "category": "fact"}, "content", "blank"),
        ({"content": 7, "category": "fact"}, "content", "Must be text"),
        ({"content": "x" * 2001, "category": "fact"}, "content", "2000"),
        ({"content": "Likes tea", "category": "fact", "tags": ["x" * 101]}, "tags", "tags[0]"),
        ({"content": "Likes tea", "category": "fact", "tags": "tea"}, "tags", "list"),
        ({"content": "Likes tea", "category": "fact", "key": "fact:tea"}, "key", "Unknown field"),
    ],
)
def test_memory_store_bad_input_is_400_and_writes_nothing(
    call_tool, alice, alice_token, body, field, fragment
):
    response = call_tool(alice_token, "memory_store", body)

    assert response.status_code == 400, response.content
    problem = error(response)
    assert problem["field"] == field
    assert fragment in problem["message"]
    assert not Memory.objects.filter(user=alice).exists()


def test_memory_store_while_paused_is_409_and_writes_nothing(call_tool, alice, alice_token):
    profile_update(user=alice, memory_paused=True)

    response = call_tool(alice_token, "memory_store", TEA)

    assert response.status_code == 409
    assert error(response)["code"] == "memory_paused"
    assert not Memory.objects.filter(user=alice).exists()


def test_memory_store_is_per_user(call_tool, alice, bob, alice_token, bob_token):
    call_tool(alice_token, "memory_store", TEA)

    bobs = call_tool(bob_token, "memory_store", TEA)

    assert bobs.status_code == 201  # alice's memory is not a duplicate of bob's
    assert bobs.json()["key"] == TEA_KEY
    assert Memory.objects.filter(user=alice).count() == Memory.objects.filter(user=bob).count() == 1


# --- memory_list_recent ----------------------------------------------------------------------


def recent(call_tool, token, body=None):
    response = call_tool(token, "memory_list_recent", body or {})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_memory_list_recent_lists_the_newest_ten_with_dates(
    call_tool, alice, alice_agent, alice_token, settings, clock
):
    clock(datetime(2026, 3, 7, tzinfo=UTC))
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # twelve variations of one text
    agent = Actor.for_agent(alice_agent)
    memory_upsert(user=alice, key="name", value="Alice", actor=agent)  # not an entry: not listed
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    for n in range(12):
        key = f"fact:item-{n:02d}"
        memory_upsert(
            user=alice,
            key=key,
            value=f"fact number {n}",
            actor=agent,
            tags=["n"],
            owner_agent=alice_agent,
        )
        stamp(alice, key, start + timedelta(hours=12 * n))

    results = recent(call_tool, alice_token)

    assert [item["key"] for item in results] == [f"fact:item-{n:02d}" for n in range(11, 1, -1)]
    assert results[0] == {
        "key": "fact:item-11",
        "kind": "fact",
        "text": "fact number 11",
        "tags": ["n"],
        "source": "tp_extracted",
        "occurred_at": "2026-03-06T21:00:00Z",
        "session": "",
        "created_at": "2026-03-06T21:00:00Z",
        "updated_at": "2026-03-06T21:00:00Z",
        "audience": "own",
    }
    assert [item["key"] for item in recent(call_tool, alice_token, {"limit": 3})] == [
        "fact:item-11",
        "fact:item-10",
        "fact:item-09",
    ]
    assert len(recent(call_tool, alice_token, {"limit": 50})) == 12


def test_memory_list_recent_puts_a_changed_memory_first_and_counts_no_use(
    call_tool, alice, alice_agent, alice_token, settings, clock
):
    clock(datetime(2026, 3, 4, tzinfo=UTC))
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # three variations of one text
    agent = Actor.for_agent(alice_agent)
    for n in range(3):
        memory_upsert(
            user=alice,
            key=f"fact:item-{n}",
            value=f"fact {n}",
            actor=agent,
            owner_agent=alice_agent,
        )
        stamp(alice, f"fact:item-{n}", datetime(2026, 3, 1 + n, tzinfo=UTC))

    memory_upsert(
        user=alice,
        key="fact:item-0",
        value="fact zero, changed",
        actor=agent,
        owner_agent=alice_agent,
    )

    assert [item["key"] for item in recent(call_tool, alice_token)] == [
        "fact:item-0",
        "fact:item-2",
        "fact:item-1",
    ]
    assert set(Memory.objects.filter(user=alice).values_list("access_count", flat=True)) == {0}


@pytest.mark.parametrize("body", [{"limit": 0}, {"limit": 51}, {"limit": "5"}, {"limit": 2.5}])
def test_memory_list_recent_bad_limit_is_400(call_tool, alice_token, body):
    response = call_tool(alice_token, "memory_list_recent", body)
    assert response.status_code == 400
    assert error(response)["field"] == "limit"


def test_memory_list_recent_is_the_users_own(call_tool, alice_token, bob_token):
    call_tool(alice_token, "memory_store", TEA)

    assert recent(call_tool, bob_token) == []
    assert [item["key"] for item in recent(call_tool, alice_token)] == [TEA_KEY]


# --- the scratchpad --------------------------------------------------------------------------


def scratchpad(client, token, query=""):
    return client.get(
        f"/api/v1/working-memory?format=scratchpad{query}",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_the_scratchpad_lists_recent_memories_newest_first(
    client, alice, alice_agent, alice_token, clock
):
    clock(datetime(2026, 3, 4, tzinfo=UTC))
    agent, you = Actor.for_agent(alice_agent), Actor.for_user(alice)
    memory_upsert(user=alice, key="timezone", value="Asia/Tokyo", actor=you)
    memory_upsert(
        user=alice,
        key="decision:postgres",
        value="Uses PostgreSQL for the event store",
        actor=agent,
        tags=["db", "events"],
        owner_agent=alice_agent,
    )
    memory_upsert(
        user=alice,
        key="bugfix:upload",
        value="# raise the upload timeout",
        actor=agent,
        owner_agent=alice_agent,
    )
    # The user may write the agent's note too (the Entries tab's "Agents' notes").
    memory_upsert(
        user=alice,
        key="preference:tea",
        value="Likes green tea",
        actor=you,
        owner_agent=alice_agent,
    )
    stamp(alice, "decision:postgres", datetime(2026, 3, 1, 20, 0, tzinfo=UTC))  # March 2 in Tokyo
    stamp(alice, "bugfix:upload", datetime(2026, 2, 27, 9, 0, tzinfo=UTC))
    stamp(alice, "preference:tea", datetime(2026, 3, 3, 9, 0, tzinfo=UTC))

    response = scratchpad(client, alice_token)

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response.content.decode() == (
        "## Recent Memories\n"
        "- [2026-03-03] Preference: Likes green tea\n"
        "- [2026-03-02] Decision: Uses PostgreSQL for the event store (db, events)\n"
        "- [2026-02-27] Bugfix: \\# raise the upload timeout\n"
    )
    counter = get_token_counter()
    assert response["X-Mnemo-Tokens"] == str(counter.count(response.content.decode()))
    assert response["X-Mnemo-Token-Counter"] == counter.name


def test_a_long_scratchpad_line_is_shortened_to_the_line_cap(
    client, alice, alice_agent, alice_token, settings
):
    settings.MNEMO_WORKING_MEMORY_LINE_CHARS = 120
    tags = [f"tag{n:02d}" for n in range(12)]
    memory_upsert(
        user=alice,
        key="fact:long",
        value="word " * 100,
        actor=Actor.for_agent(alice_agent),
        tags=tags,
        owner_agent=alice_agent,
    )

    line = scratchpad(client, alice_token).content.decode().splitlines()[1]

    assert len(line) <= 120
    assert line.startswith("- [")
    # Tags take at most a third of the line; the value is shortened to the rest.
    assert line.endswith(" word word… (tag00, tag01, tag02, tag03, tag04, …)")


def test_the_scratchpad_keeps_the_newest_lines_within_the_budget(
    client, alice, alice_agent, alice_token, settings, clock
):
    clock(datetime(2026, 1, 4, tzinfo=UTC))
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # sixty variations of one text
    agent = Actor.for_agent(alice_agent)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(60):
        key = f"fact:n{n:02d}"
        value = f"entry {n} " + "with a long explanation of a habit " * 4
        memory_upsert(
            user=alice, key=key, value=value.strip(), actor=agent, owner_agent=alice_agent
        )
        stamp(alice, key, start + timedelta(hours=n))

    response = scratchpad(client, alice_token, "&budget=500")

    text = response.content.decode()
    tokens = int(response["X-Mnemo-Tokens"])
    assert tokens == get_token_counter().count(text)
    assert tokens <= 500
    lines = text.splitlines()
    assert lines[0] == "## Recent Memories"
    shown = [line for line in lines[1:] if line.startswith("- [")]
    assert shown[0].startswith("- [2026-01-03] Fact: entry 59 ")
    numbers = [int(line.split("entry ")[1].split()[0]) for line in shown]
    assert numbers == list(range(59, 59 - len(shown), -1))  # the newest, none skipped
    left_out = 60 - len(shown)
    assert left_out > 0
    assert text.endswith(f"\n\n({left_out} more memories left out to fit the budget)\n")


def test_the_scratchpad_is_the_users_own_and_empty_without_entries(
    client, call_tool, alice_token, bob_token
):
    call_tool(alice_token, "memory_store", TEA)

    assert scratchpad(client, bob_token).content.decode() == ""
    assert "Likes green tea" in scratchpad(client, alice_token).content.decode()


def test_the_scratchpad_has_no_as_of(client, alice_token):
    response = scratchpad(client, alice_token, "&as_of=2025-06-03T09:00:00Z")

    assert response.status_code == 400
    problem = error(response)
    assert problem["field"] == "as_of"
    assert "scratchpad" in problem["message"]


# --- the turn a write was learned from -------------------------------------------------------


def test_memory_upsert_links_the_row_or_its_proposal_to_the_turn(alice, alice_agent):
    first, second = (
        Turn.objects.create(
            user=alice,
            agent=alice_agent,
            user_message=text,
            assistant_reply="ok",
            status=TurnStatus.QUEUED,
        )
        for text in ("one", "two")
    )
    agent = Actor.for_agent(alice_agent)
    memory_upsert(user=alice, key="fact:office", value="Works from Leeds", actor=agent, turn=first)
    memory_upsert(user=alice, key="fact:office", value="Works from York", actor=agent, turn=second)
    memory_upsert(user=alice, key="name", value="Alice", actor=Actor.for_user(alice))

    with pytest.raises(ReviewRequired) as waiting:
        memory_upsert(user=alice, key="name", value="Ally", actor=agent, turn=first)

    assert Memory.objects.get(user=alice, key="fact:office").turn_id == second.pk
    assert waiting.value.proposal.turn_id == first.pk
    assert Memory.objects.get(user=alice, key="name").turn_id is None


# --- promotion: by use and by promote_memory -------------------------------------------------


def three_days_of_facts(alice, alice_agent):
    """fact:day-1 to fact:day-3, each changed a day after the one before."""
    agent = Actor.for_agent(alice_agent)
    for day in (1, 2, 3):
        key = f"fact:day-{day}"
        memory_upsert(
            user=alice, key=key, value=f"Said on day {day}", actor=agent, owner_agent=alice_agent
        )
        stamp(alice, key, datetime(2026, 3, day, 9, 0, tzinfo=UTC))


def scratchpad_days(client, token):
    """The days of the scratchpad's lines, in order."""
    lines = scratchpad(client, token).content.decode().splitlines()[1:]
    return [int(line.rsplit(" ", 1)[1]) for line in lines]


def test_a_memory_used_three_times_comes_first(
    call_tool, client, alice, alice_agent, alice_token, settings, clock
):
    clock(datetime(2026, 3, 4, tzinfo=UTC))
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # three variations of one text
    three_days_of_facts(alice, alice_agent)
    for _ in range(2):
        assert (
            call_tool(alice_token, "get_memory", {"key": "fact:day-1", "own": True}).status_code
            == 200
        )

    # Two uses: still by recency.
    assert [item["key"] for item in recent(call_tool, alice_token)] == [
        "fact:day-3",
        "fact:day-2",
        "fact:day-1",
    ]
    assert scratchpad_days(client, alice_token) == [3, 2, 1]

    assert (
        call_tool(alice_token, "get_memory", {"key": "fact:day-1", "own": True}).status_code == 200
    )

    # The third use (memory_count_uses) promotes it; the rest stay by recency.
    assert Memory.objects.get(user=alice, key="fact:day-1").access_count == SCRATCHPAD_USES == 3
    assert [item["key"] for item in recent(call_tool, alice_token)] == [
        "fact:day-1",
        "fact:day-3",
        "fact:day-2",
    ]
    assert scratchpad(client, alice_token).content.decode() == (
        "## Recent Memories\n"
        "- [2026-03-01] Fact: Said on day 1\n"
        "- [2026-03-03] Fact: Said on day 3\n"
        "- [2026-03-02] Fact: Said on day 2\n"
    )


@pytest.mark.parametrize("tool", ["promote_memory", "memory_promote"])
def test_a_promoted_memory_comes_first(
    call_tool, client, alice, alice_agent, alice_token, settings, tool, clock
):
    clock(datetime(2026, 3, 4, tzinfo=UTC))
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # three variations of one text
    three_days_of_facts(alice, alice_agent)

    response = call_tool(alice_token, tool, {"key": "fact:day-2", "own": True})

    assert response.status_code == 200, response.content
    stamp(alice, "fact:day-2", datetime(2026, 3, 2, 9, 0, tzinfo=UTC))  # pinning changed it
    assert Memory.objects.get(user=alice, key="fact:day-2").access_count == 0
    assert [item["key"] for item in recent(call_tool, alice_token)] == [
        "fact:day-2",
        "fact:day-3",
        "fact:day-1",
    ]
    assert scratchpad_days(client, alice_token) == [2, 3, 1]


def test_the_promoted_memories_come_first_within_the_budget(
    client, alice, alice_agent, alice_token, settings, clock
):
    clock(datetime(2026, 1, 4, tzinfo=UTC))
    settings.MNEMO_MERGE_NEAR_DUPLICATES = False  # sixty variations of one text
    agent = Actor.for_agent(alice_agent)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(60):
        key = f"fact:n{n:02d}"
        value = f"entry {n} " + "with a long explanation of a habit " * 4
        memory_upsert(
            user=alice,
            key=key,
            value=value.strip(),
            actor=agent,
            pinned=n == 3,
            owner_agent=alice_agent,
        )
        stamp(alice, key, start + timedelta(hours=n))
    # Ten uses of entry 7, counted by the one write path that counts them.
    entry_7 = Memory.objects.get(user=alice, key="fact:n07").pk
    for _ in range(10):
        memory_count_uses(user=alice, memory_ids=[entry_7])

    response = scratchpad(client, alice_token, "&budget=500")

    text = response.content.decode()
    tokens = int(response["X-Mnemo-Tokens"])
    assert tokens == get_token_counter().count(text)
    assert tokens <= 500
    shown = [line for line in text.splitlines() if line.startswith("- [")]
    numbers = [int(line.split("entry ")[1].split()[0]) for line in shown]
    # The promoted two (newest first), then the newest of the rest, none skipped.
    assert numbers[:2] == [7, 3]
    assert numbers[2:] == list(range(59, 59 - len(shown) + 2, -1))
    left_out = 60 - len(shown)
    assert left_out > 0
    assert text.endswith(f"\n\n({left_out} more memories left out to fit the budget)\n")
