"""The Entries tab shows when an entry was said and in which conversation ("said 8 May
2023 · in conversation …"), in the user's zone, escaped; the add and edit forms set both
(issue 26)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def as_alice(client, alice):
    memory_upsert(user=alice, key="timezone", value="Asia/Singapore", actor=Actor.for_user(alice))
    client.force_login(alice)
    return client


def noted(agent, key, value, **kwargs):
    return memory_upsert(
        user=agent.user, key=key, value=value, actor=Actor.for_agent(agent), **kwargs
    ).memory


def card(body, memory):
    return body.split(f'<li id="memory-{memory.pk}"', 1)[1].split("</li>", 1)[0]


def said_line(body, memory):
    part = card(body, memory)
    if '<span class="said">' not in part:
        return None
    return part.split('<span class="said">', 1)[1].split("</span>\n", 1)[0]


def test_an_entry_said_on_another_day_in_a_conversation_says_so(as_alice, alice_agent):
    # 20:00 UTC on 7 May is 04:00 on 8 May in Singapore.
    memory = noted(
        alice_agent,
        "fact:moved",
        "Moved to Lisbon",
        occurred_at="2023-05-07T20:00:00Z",
        session="chat-42",
    )

    body = as_alice.get("/?tab=entries").content.decode()

    assert said_line(body, memory) == (
        'said <time datetime="2023-05-08T04:00:00+08:00" title="May 8, 2023, 04:00">'
        'May 8, 2023</time> · in conversation <span class="session">chat-42</span>'
    )


def test_an_agents_session_is_escaped(as_alice, alice_agent):
    memory = noted(alice_agent, "fact:tea", "Likes tea", session=SCRIPT)

    body = as_alice.get("/?tab=entries").content.decode()

    assert SCRIPT not in body
    assert said_line(body, memory) == (
        'in conversation <span class="session">&lt;script&gt;alert(1)&lt;/script&gt;</span>'
    )
    row = as_alice.get(f"/memories/{memory.pk}/", headers=HX).content.decode()
    assert SCRIPT not in row
    assert 'in conversation <span class="session">&lt;script&gt;' in row


def test_an_entry_said_when_it_was_written_stays_quiet(as_alice, alice):
    memory = memory_upsert(
        user=alice, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice)
    ).memory
    within_a_day = memory_upsert(
        user=alice,
        key="fact:coffee",
        value="Likes coffee",
        actor=Actor.for_user(alice),
        occurred_at=timezone.now() - timedelta(hours=20),
    ).memory

    body = as_alice.get("/?tab=entries").content.decode()

    assert said_line(body, memory) is None
    assert said_line(body, within_a_day) is None
    assert "in conversation" not in body


def test_the_htmx_row_carries_the_line_too(as_alice, alice_agent):
    memory = noted(alice_agent, "fact:moved", "Moved", occurred_at="2023-05-08")

    row = as_alice.get(f"/memories/{memory.pk}/", headers=HX).content.decode()

    assert row.lstrip().startswith(f'<li id="memory-{memory.pk}"')
    assert "<html" not in row
    assert said_line(row, memory).startswith('said <time datetime="2023-05-08T00:00:00+08:00"')


def test_adding_an_entry_with_a_day_and_a_conversation(as_alice, alice):
    response = as_alice.post(
        "/entries/add/",
        {
            "entry-kind": "fact",
            "entry-value": "Ran the Lisbon marathon",
            "entry-occurred_at": "2023-10-15",
            "entry-session": "  diary  ",
        },
        headers=HX,
    )

    assert response.status_code == 200
    memory = Memory.objects.get(user=alice, key="fact:ran-the-lisbon-marathon")
    # The start of that day in Singapore.
    assert (memory.occurred_at, memory.session) == (
        datetime(2023, 10, 14, 16, tzinfo=UTC),
        "diary",
    )


def test_adding_an_entry_without_them_takes_now(as_alice, alice):
    before = timezone.now()
    as_alice.post("/entries/add/", {"entry-kind": "fact", "entry-value": "Likes tea"}, headers=HX)

    memory = Memory.objects.get(user=alice, key="fact:likes-tea")
    assert before <= memory.occurred_at <= timezone.now()
    assert memory.session == ""


@pytest.mark.parametrize(
    ("data", "field", "error"),
    [
        ({"entry-occurred_at": "8 May"}, "occurred_at", "Enter a date such as 2023-05-08."),
        ({"entry-occurred_at": "1850-01-01"}, "occurred_at", "between the years 1900 and 2200"),
        ({"entry-session": "a\nb"}, "session", "session must be one line"),
        ({"entry-session": "x" * 101}, "session", "at most 100 characters"),
    ],
)
def test_a_bad_day_or_conversation_is_refused_on_its_field(as_alice, alice, data, field, error):
    response = as_alice.post(
        "/entries/add/", {"entry-kind": "fact", "entry-value": "Likes tea", **data}, headers=HX
    )

    body = response.content.decode()
    assert response.status_code == 200
    assert f'<p class="field-error" id="id_entry-{field}_error">' in body
    assert error in body.split(f'id="id_entry-{field}_error">', 1)[1].split("</p>", 1)[0]
    assert '<details class="more" open>' in body
    assert not Memory.objects.filter(user=alice, key__startswith="fact:").exists()


def test_editing_shows_both_and_keeps_the_time_when_the_day_is_unchanged(as_alice, alice):
    memory = memory_upsert(
        user=alice,
        key="fact:moved",
        value="Moved to Lisbon",
        actor=Actor.for_user(alice),
        occurred_at="2023-05-08T13:56:00+08:00",
        session="chat-42",
    ).memory
    prefix = f"edit-{memory.pk}"

    form = as_alice.get(f"/memories/{memory.pk}/edit/", headers=HX).content.decode()
    assert f'name="{prefix}-occurred_at" value="2023-05-08"' in form
    assert f'name="{prefix}-session" value="chat-42"' in form

    as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {
            f"{prefix}-value": "Moved to Lisbon in May",
            f"{prefix}-occurred_at": "2023-05-08",
            f"{prefix}-session": "chat-42",
        },
        headers=HX,
    )
    memory.refresh_from_db()
    assert (memory.value, memory.occurred_at, memory.session) == (
        "Moved to Lisbon in May",
        datetime(2023, 5, 8, 5, 56, tzinfo=UTC),
        "chat-42",
    )

    response = as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {
            f"{prefix}-value": "Moved to Lisbon in May",
            f"{prefix}-occurred_at": "2023-05-01",
            f"{prefix}-session": "",
        },
        headers=HX,
    )
    assert "Saved." in response.content.decode()
    memory.refresh_from_db()
    assert (memory.occurred_at, memory.session) == (datetime(2023, 4, 30, 16, tzinfo=UTC), "")


def test_bob_cannot_date_alices_entry(client, alice, bob):
    memory = memory_upsert(
        user=alice, key="fact:tea", value="Likes tea", actor=Actor.for_user(alice)
    ).memory
    client.force_login(bob)

    response = client.post(
        f"/memories/{memory.pk}/edit/",
        {f"edit-{memory.pk}-value": "Likes tea", f"edit-{memory.pk}-session": "mine"},
    )

    assert response.status_code == 404
    memory.refresh_from_db()
    assert memory.session == ""


def test_the_history_page_says_when_the_day_or_conversation_changed(as_alice, alice, alice_agent):
    memory = noted(
        alice_agent, "fact:moved", "Moved", occurred_at="2023-05-08T10:00:00+08:00", session="a"
    )
    memory_upsert(
        user=alice,
        key="fact:moved",
        value="Moved",
        actor=Actor.for_agent(alice_agent),
        occurred_at="2023-06-01T09:30:00+08:00",
        session=SCRIPT,
    )

    body = as_alice.get(f"/memories/{memory.pk}/history/").content.decode()

    assert SCRIPT not in body
    assert (
        'Said <time class="old" datetime="2023-05-08T10:00:00+08:00" '
        'title="May 8, 2023, 10:00">May 8, 2023, 10:00</time> '
        '<span aria-label="changed to">→</span> '
        '<time class="new" datetime="2023-06-01T09:30:00+08:00" '
        'title="Jun 1, 2023, 09:30">Jun 1, 2023, 09:30</time>'
    ) in body
    assert (
        'In conversation <span class="old">a</span> <span aria-label="changed to">→</span> '
        '<span class="new">&lt;script&gt;alert(1)&lt;/script&gt;</span>'
    ) in body
    # The first version can be restored: it differs from now in its time and conversation.
    first = memory.history.order_by("id").first()
    assert f'action="/history/{first.pk}/restore/"' in body


def test_a_search_result_says_when_and_in_which_conversation_it_was_said(as_alice, alice_agent):
    dated = noted(
        alice_agent,
        "fact:moved",
        "Moved to Lisbon in spring",
        occurred_at="2023-05-07T20:00:00Z",
        session=SCRIPT,
    )
    today = noted(alice_agent, "fact:lisbon-flat", "Rents a flat in Lisbon")

    body = as_alice.get("/search/", {"q": "Lisbon"}).content.decode()

    hits = body.split('<li class="search-hit memory-hit">')[1:]
    by_key = {
        memory.key: next(hit for hit in hits if memory.key in hit) for memory in (dated, today)
    }
    assert SCRIPT not in body
    assert (
        'said <time datetime="2023-05-08T04:00:00+08:00" title="May 8, 2023, 04:00">'
        'May 8, 2023</time> · in conversation <span class="session">'
        "&lt;script&gt;alert(1)&lt;/script&gt;</span>"
    ) in by_key["fact:moved"]
    assert '<span class="said">' not in by_key["fact:lisbon-flat"]
