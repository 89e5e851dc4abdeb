"""The Context page: tabs, every write (htmx partial and plain POST), preview, history, safety."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from activity.actors import Actor
from lib.slugs import text_hash
from memory.entries import derive_slug, memory_rename
from memory.keys import PROFILE_KEYS
from memory.models import Memory, MemoryHistory
from memory.services import memory_delete, memory_upsert
from profiles.services import profile_for_user, profile_update

HX = {"HX-Request": "true"}
XSS = "<img src=x onerror=alert(1)>"


def hx(target=None):
    return {**HX, "HX-Target": target} if target else HX


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def say(user, key, value, **kwargs):
    return memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user), **kwargs)


def noted(agent, key, value, **kwargs):
    return memory_upsert(
        user=agent.user, key=key, value=value, actor=Actor.for_agent(agent), **kwargs
    )


def value_of(user, key):
    memory = Memory.objects.filter(user=user, key=key).first()
    return memory.value if memory else None


def flashes(response):
    return [str(message) for message in get_messages(response.wsgi_request)]


def text(response):
    return response.content.decode()


# ---------------------------------------------------------------- page and tabs


def test_login_required(client, alice):
    for url in ["/", "/preview/", "/deleted/", "/?tab=entries"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")
    response = client.post("/entries/add/", {"entry-kind": "fact", "entry-value": "x"})
    assert response.status_code == 302
    assert Memory.objects.count() == 0


def test_new_user_sees_getting_started(as_alice):
    response = as_alice.get("/")
    body = text(response)
    assert response.status_code == 200
    assert "Start with your name and timezone" in body
    assert "Agents page" in body
    assert 'id="working-memory-text"' in body
    assert "0 of 2000 tokens" in body


def test_each_tab_renders_full_and_partial(as_alice, alice):
    say(alice, "role", "Head of Growth")
    say(alice, "tone_slack", "casual")
    say(alice, "fact:weekly-review", "Runs the growth review every Monday")
    expected = {
        "profile": 'value="Head of Growth"',
        "styles": 'id="style-slack"',
        "entries": "Runs the growth review every Monday",
    }
    for tab, fragment in expected.items():
        page = as_alice.get(f"/?tab={tab}")
        assert page.status_code == 200
        assert "<html" in text(page)
        assert fragment in text(page)
        assert f'data-confirm-unsaved aria-current="page">{tab.title()}</a>' in text(page)
        assert "aria-selected" not in text(page)  # links to URLs: a nav with aria-current
        assert "Working memory" in text(page)
        partial = as_alice.get(f"/?tab={tab}", headers=hx("context-tabs"))
        assert partial.status_code == 200
        assert "<html" not in text(partial)
        assert text(partial).lstrip().startswith('<div id="context-tabs">')
        assert fragment in text(partial)
    # The working memory in the preview has both profile and entries, whatever the tab.
    assert "Head of Growth" in text(as_alice.get("/"))
    assert "Runs the growth review every Monday" in text(as_alice.get("/"))


def test_unknown_tab_falls_back_to_profile(as_alice):
    body = text(as_alice.get("/?tab=nope"))
    assert 'data-confirm-unsaved aria-current="page">Profile</a>' in body


def test_paused_banner_links_to_agents(as_alice, alice):
    profile_update(user=alice, memory_paused=True)
    body = text(as_alice.get("/"))
    assert "Memory is paused." in body
    assert 'href="/agents/"' in body


# ---------------------------------------------------------------- profile


PROFILE = {
    "profile-name": "Kevin",
    "profile-role": "Head of Growth",
    "profile-company": "YARNNN",
    "profile-timezone": "Asia/Singapore",
    "profile-summary": "Runs growth.\nLikes data.",
}


def profile_rows(user):
    return {
        key: list(MemoryHistory.objects.filter(user=user, key=key).values_list("action", flat=True))
        for key in ("name", "role", "company", "timezone", "summary")
    }


def test_one_profile_save_saves_all_five_fields_with_one_history_row_each(as_alice, alice):
    response = as_alice.post("/profile/", PROFILE, headers=HX)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    body = text(response)
    assert "<html" not in body
    assert body.lstrip().startswith('<form id="profile-form"')
    assert (
        '<span class="saved" role="status">Saved name, role, company, timezone and summary.' in body
    )
    assert 'value="Head of Growth"' in body
    assert "data-unsaved" not in body
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "name": "Kevin",
        "role": "Head of Growth",
        "company": "YARNNN",
        "timezone": "Asia/Singapore",
        "summary": "Runs growth.\nLikes data.",
    }
    assert profile_rows(alice) == {key: ["create"] for key in PROFILE_KEYS}
    memory = Memory.objects.get(user=alice, key="timezone")
    assert (memory.source, memory.confidence) == ("user_stated", 1.0)


def test_profile_save_writes_only_the_fields_that_changed(as_alice, alice):
    as_alice.post("/profile/", PROFILE, headers=HX)
    response = as_alice.post(
        "/profile/", {**PROFILE, "profile-role": "CEO", "profile-company": "  "}, headers=HX
    )
    assert response["HX-Trigger"] == "memory-changed"
    assert "Saved role; removed company." in text(response)
    assert profile_rows(alice) == {
        "name": ["create"],
        "role": ["update", "create"],
        "company": ["delete", "create"],
        "timezone": ["create"],
        "summary": ["create"],
    }
    assert value_of(alice, "company") is None

    response = as_alice.post("/profile/", {**PROFILE, "profile-role": "CEO", "profile-company": ""})
    assert response.status_code == 302
    assert response["Location"] == "/?tab=profile"
    assert flashes(response) == ["No change."]
    assert MemoryHistory.objects.filter(user=alice).count() == 7


def test_profile_save_plain_post_redirects_with_message(as_alice, alice):
    say(alice, "company", "YARNNN")
    response = as_alice.post("/profile/", {"profile-name": "Kevin", "profile-role": "CEO"})
    assert response.status_code == 302
    assert response["Location"] == "/?tab=profile"
    assert flashes(response) == ["Saved name and role."]
    # A field the POST leaves out is left alone; only an emptied one is removed.
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "company": "YARNNN",
        "name": "Kevin",
        "role": "CEO",
    }


def test_a_bad_timezone_saves_nothing_and_keeps_every_typed_field(as_alice, alice):
    say(alice, "timezone", "Europe/Paris")
    say(alice, "name", "Kev")
    typed = {**PROFILE, "profile-timezone": "Mars/Base"}
    response = as_alice.post("/profile/", typed, headers=HX)
    body = text(response)
    assert response.status_code == 200
    assert "HX-Trigger" not in response
    assert body.lstrip().startswith('<form id="profile-form"')
    assert " data-unsaved " in body
    assert "Nothing was saved: fix the field marked below." in body
    assert 'aria-invalid="true"' in body
    assert 'class="field-error" id="id_profile-timezone_error"' in body
    assert "&#x27;Mars/Base&#x27; is not an IANA time zone" in body
    assert "id_profile-timezone_error" in body.split('aria-describedby="', 5)[4].split('"')[0]
    for value in ("Kevin", "Head of Growth", "YARNNN", "Mars/Base"):
        assert f'value="{value}"' in body
    assert "Runs growth.\nLikes data.</textarea>" in body
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "timezone": "Europe/Paris",
        "name": "Kev",
    }

    full = as_alice.post("/profile/", typed)
    assert full.status_code == 400
    assert "<html" in text(full)
    assert "is not an IANA time zone" in text(full)
    assert 'value="Head of Growth"' in text(full)
    assert value_of(alice, "timezone") == "Europe/Paris"
    assert MemoryHistory.objects.filter(user=alice).count() == 2


def test_profile_shows_who_set_a_field_and_links_its_history(as_alice, alice, alice_agent):
    say(alice, "name", "Kevin")
    noted(alice_agent, "role", "Growth lead")
    body = text(as_alice.get("/?tab=profile"))
    role = Memory.objects.get(user=alice, key="role")
    assert '<span class="badge agent">noted by agent assistant</span>' in body
    assert "stated by you" not in body
    assert f'href="/memories/{role.pk}/history/">History<span class="sr-only"> of role' in body
    assert body.count('<form id="profile-form"') == 1
    assert body.count('<span class="sr-only"> profile</span>') == 1


def test_profile_tab_offers_timezones(as_alice):
    body = text(as_alice.get("/?tab=profile"))
    assert '<datalist id="timezones">' in body
    assert '<option value="Asia/Singapore">' in body
    assert "Clear the field and save to remove it." in body


# ---------------------------------------------------------------- styles


def test_style_add_change_remove(as_alice, alice):
    response = as_alice.post(
        "/styles/add/",
        {"style-platform": "slack", "style-tone": "casual", "style-verbosity": "brief"},
        headers=HX,
    )
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    assert text(response).lstrip().startswith('<div id="styles-panel">')
    assert "Added slack." in text(response)
    assert (value_of(alice, "tone_slack"), value_of(alice, "verbosity_slack")) == (
        "casual",
        "brief",
    )

    response = as_alice.post(
        "/styles/slack/", {"style-slack-tone": "formal", "style-slack-verbosity": ""}, headers=HX
    )
    assert response.status_code == 200
    assert text(response).lstrip().startswith('<div id="style-slack"')
    assert "Saved slack." in text(response)
    assert (value_of(alice, "tone_slack"), value_of(alice, "verbosity_slack")) == ("formal", None)

    response = as_alice.post("/styles/slack/remove/", headers=HX)
    assert response.status_code == 200
    assert "Removed slack." in text(response)
    assert Memory.objects.filter(user=alice).count() == 0


def test_style_save_writes_only_what_changed_and_adding_keeps_rows_being_edited(as_alice, alice):
    say(alice, "tone_slack", "casual")
    say(alice, "verbosity_slack", "brief")
    response = as_alice.post(
        "/styles/slack/",
        {"style-slack-tone": "casual", "style-slack-verbosity": "brief"},
        headers=HX,
    )
    assert "HX-Trigger" not in response
    assert '<span class="saved" role="status">No change.</span>' in text(response)
    assert MemoryHistory.objects.filter(user=alice).count() == 2

    # A row with unsaved typing in the page is kept when adding another platform swaps the panel.
    response = as_alice.post(
        "/styles/add/",
        {"style-platform": "gmail", "style-verbosity": "detailed"},
        headers={**HX, "Mnemo-Keep": "style-slack"},
    )
    body = text(response)
    assert '<div id="style-slack" class="style-row" data-keep="dirty" hx-preserve>' in body
    assert '<div id="style-gmail" class="style-row" data-keep="dirty">' in body

    # A refused save comes back with the text and marked unsaved.
    response = as_alice.post(
        "/styles/slack/", {"style-slack-tone": "x" * 5000, "style-slack-verbosity": ""}, headers=HX
    )
    assert 'aria-invalid="true"' in text(response)
    assert " data-unsaved " in text(response)
    assert 'value="' + "x" * 5000 + '"' in text(response)
    assert (value_of(alice, "tone_slack"), value_of(alice, "verbosity_slack")) == (
        "casual",
        "brief",
    )


def test_style_plain_posts(as_alice, alice):
    response = as_alice.post(
        "/styles/add/", {"style-platform": "gmail", "style-tone": "", "style-verbosity": "detailed"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/?tab=styles"
    assert flashes(response) == ["Added gmail."]
    assert value_of(alice, "verbosity_gmail") == "detailed"
    assert value_of(alice, "tone_gmail") is None

    response = as_alice.post("/styles/gmail/remove/")
    assert response.status_code == 302
    assert value_of(alice, "verbosity_gmail") is None


def test_style_add_errors(as_alice, alice):
    response = as_alice.post(
        "/styles/add/", {"style-platform": "🍣", "style-tone": "casual"}, headers=HX
    )
    assert response.status_code == 200
    assert "Platform &#x27;🍣&#x27; has no letter a-z or digit" in text(response)
    assert 'aria-invalid="true"' in text(response)

    response = as_alice.post("/styles/add/", {"style-platform": "slack"})
    assert response.status_code == 400
    assert "Give a tone, a verbosity or both." in text(response)
    assert Memory.objects.filter(user=alice).count() == 0


def test_style_save_of_unknown_platform_is_404(as_alice, bob):
    say(bob, "tone_slack", "casual")
    assert as_alice.post("/styles/slack/", {"style-slack-tone": "x"}).status_code == 404
    assert as_alice.post("/styles/slack/remove/").status_code == 404
    assert value_of(bob, "tone_slack") == "casual"


# ---------------------------------------------------------------- entries


def test_entry_add_htmx(as_alice, alice):
    response = as_alice.post(
        "/entries/add/",
        {
            "entry-kind": "preference",
            "entry-key": "bullets",
            "entry-value": "Bullet points in reports",
            "entry-tags": "Reports, work",
        },
        headers=HX,
    )
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed, entries-changed"
    assert text(response).lstrip().startswith('<form id="entry-add"')
    assert "Added “Bullet points in reports” as a preference." in text(response)
    assert "data-unsaved" not in text(response)
    memory = Memory.objects.get(user=alice, key="preference:bullets")
    assert (memory.value, memory.tags, memory.source) == (
        "Bullet points in reports",
        ["reports", "work"],
        "user_stated",
    )


def test_entry_add_derives_slug_and_plain_post_redirects(as_alice, alice):
    say(alice, "instruction:always-include-a-tldr", "old")
    response = as_alice.post(
        "/entries/add/", {"entry-kind": "instruction", "entry-value": "Always include a TL;DR"}
    )
    assert response.status_code == 302
    memory = Memory.objects.get(user=alice, key="instruction:always-include-a-tldr-2")
    assert response["Location"] == f"/?tab=entries#memory-{memory.pk}"
    assert flashes(response) == ["Added “Always include a TL;DR” as an instruction."]


def test_entry_add_makes_a_readable_key_from_the_text(as_alice, alice):
    response = as_alice.post(
        "/entries/add/",
        {"entry-kind": "preference", "entry-value": "Prefers oat milk in flat whites"},
        headers=HX,
    )
    assert response.status_code == 200
    memory = Memory.objects.get(user=alice)
    assert (memory.key, memory.value) == (
        "preference:prefers-oat-milk-in-flat-whites",
        "Prefers oat milk in flat whites",
    )
    assert MemoryHistory.objects.filter(user=alice).count() == 1


def test_the_add_form_has_no_slug_and_keeps_the_optional_key_under_more(as_alice):
    body = text(as_alice.get("/?tab=entries"))
    form = body.split('<form id="entry-add"', 1)[1].split("</form>", 1)[0]
    assert "Slug" not in form
    assert '<details class="more">' in form
    assert "<summary>More</summary>" in form
    details = form.split('<details class="more">', 1)[1].split("</details>", 1)[0]
    assert '<label for="id_entry-key">Key</label>' in details
    assert 'name="entry-key"' in details
    assert 'value="' not in details.split('name="entry-key"', 1)[1].split(">", 1)[0]
    assert "Made from the text when left empty" in details
    # A refused key opens "More" so its error shows.
    response = as_alice.post(
        "/entries/add/", {"entry-kind": "fact", "entry-key": "Bad!", "entry-value": "x"}, headers=HX
    )
    assert '<details class="more" open>' in text(response)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"entry-key": "Bad Slug!", "entry-value": "x"}, "A key starts with a-z or 0-9"),
        ({"entry-key": "ok", "entry-value": "   "}, "Write what the assistant should know."),
        (
            {"entry-key": "ok", "entry-value": "x", "entry-tags": ", ".join(map(str, range(21)))},
            "At most 20 tags; there are 21.",
        ),
        # A key the person types still follows the grammar; only one made from the text
        # never refuses (test_entry_add_makes_a_key_from_text_in_any_script).
        ({"entry-key": "???", "entry-value": "???"}, "A key starts with a-z or 0-9"),
    ],
)
def test_entry_add_errors(as_alice, alice, data, error):
    response = as_alice.post("/entries/add/", {"entry-kind": "fact", **data}, headers=HX)
    assert response.status_code == 200
    assert "HX-Trigger" not in response
    assert error in text(response)
    assert 'class="field-error"' in text(response)
    assert " data-unsaved " in text(response)  # what was typed is still there, and unsaved
    if data["entry-value"].strip():
        assert f"{data['entry-value']}</textarea>" in text(response)
    full = as_alice.post("/entries/add/", {"entry-kind": "fact", **data})
    assert full.status_code == 400
    assert error in text(full)
    assert Memory.objects.filter(user=alice).count() == 0


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("我喜欢喝绿茶", "preference:wo-xi-huan-he-lu-cha"),
        ("Я люблю зелёный чай", "preference:ya-lyublyu-zelenyy-chay"),
        ("אני אוהב תה ירוק", "preference:ny-vhv-th-yrvk"),
        ("أنا أحب الشاي الأخضر", "preference:n-hb-lshy-lkhdr"),
        ("???", f"preference:note-{text_hash('???')}"),
    ],
)
def test_entry_add_makes_a_key_from_text_in_any_script(as_alice, alice, value, key):
    data = {"entry-kind": "preference", "entry-key": "", "entry-value": value}
    response = as_alice.post("/entries/add/", data, headers=HX)

    assert response.status_code == 200
    assert 'class="field-error"' not in text(response)
    # The same text from an agent gets the same key: one rule (memory/entries.py derive_slug).
    assert derive_slug(value) == key.split(":", 1)[1]
    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [(key, value)]


def test_entry_add_refuses_a_typed_key_that_is_taken(as_alice, alice):
    say(alice, "fact:tea", "Drinks tea")
    response = as_alice.post(
        "/entries/add/",
        {"entry-kind": "fact", "entry-key": "tea", "entry-value": "Coffee"},
        headers=HX,
    )
    body = text(response)
    assert response.status_code == 200
    assert "HX-Trigger" not in response
    assert (
        '<p class="field-error" id="id_entry-key_error">You already have &#x27;fact:tea&#x27;; '
        "edit it in the list instead.</p>"
    ) in body
    assert ">\nCoffee</textarea>" in body
    assert 'name="entry-key" value="tea"' in body
    assert value_of(alice, "fact:tea") == "Drinks tea"
    assert MemoryHistory.objects.filter(user=alice).count() == 1


def test_entry_edit_in_place(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea", tags=["food"]).memory
    form = as_alice.get(f"/memories/{memory.pk}/edit/", headers=HX)
    assert form.status_code == 200
    assert (
        text(form)
        .lstrip()
        .startswith(f'<li id="memory-{memory.pk}" class="entry editing" data-keep="open">')
    )
    assert f'name="edit-{memory.pk}-value"' in text(form)
    full = as_alice.get(f"/memories/{memory.pk}/edit/")
    assert "<html" in text(full)
    assert f'name="edit-{memory.pk}-value"' in text(full)

    response = as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {f"edit-{memory.pk}-value": "Drinks green tea", f"edit-{memory.pk}-tags": "food, drinks"},
        headers=HX,
    )
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    assert text(response).lstrip().startswith(f'<li id="memory-{memory.pk}" class="entry">')
    assert "Saved." in text(response)
    memory.refresh_from_db()
    assert (memory.value, memory.tags) == ("Drinks green tea", ["drinks", "food"])

    cancel = as_alice.get(f"/memories/{memory.pk}/", headers=HX)
    assert "Drinks green tea" in text(cancel)


def test_entry_edit_errors_and_plain_post(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea").memory
    field = f"edit-{memory.pk}-value"
    response = as_alice.post(f"/memories/{memory.pk}/edit/", {field: ""}, headers=HX)
    assert response.status_code == 200
    assert "Write what the assistant should know." in text(response)
    full = as_alice.post(f"/memories/{memory.pk}/edit/", {field: ""})
    assert full.status_code == 400
    assert value_of(alice, "fact:tea") == "Drinks tea"

    response = as_alice.post(f"/memories/{memory.pk}/edit/", {field: "Coffee"})
    assert response.status_code == 302
    assert response["Location"] == f"/?tab=entries#memory-{memory.pk}"
    assert flashes(response) == ["Saved: “Coffee”."]
    assert value_of(alice, "fact:tea") == "Coffee"


def test_changing_the_kind_renames_the_entry_and_keeps_its_history(as_alice, alice):
    memory = say(alice, "fact:oat-milk", "Oat milk in flat whites").memory
    field = f"edit-{memory.pk}"
    form = text(as_alice.get(f"/memories/{memory.pk}/edit/", headers=HX))
    assert f'<select name="{field}-kind"' in form
    assert '<option value="fact" selected>Fact</option>' in form
    assert '<option value="bugfix">Bug fix</option>' in form

    response = as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {f"{field}-kind": "preference", f"{field}-value": "Prefers oat milk in flat whites"},
        headers=HX,
    )
    assert response.status_code == 200
    # The list regroups the entry under its new kind.
    assert response["HX-Trigger"] == "memory-changed, entries-changed"
    assert "Saved; now a preference." in text(response)
    assert '<span class="badge kind">Preference</span>' in text(response)
    renamed = Memory.objects.get(user=alice)
    assert (renamed.pk, renamed.key, renamed.value) == (
        memory.pk,
        "preference:oat-milk",
        "Prefers oat milk in flat whites",
    )
    rows = list(
        MemoryHistory.objects.filter(user=alice).order_by("id").values_list("action", "key")
    )
    assert rows == [
        ("create", "fact:oat-milk"),
        ("rename", "preference:oat-milk"),
        ("update", "preference:oat-milk"),
    ]

    page = text(as_alice.get(f"/memories/{memory.pk}/history/"))
    assert "<h1>History of “Prefers oat milk in flat whites”</h1>" in page
    assert 'key <code class="key">preference:oat-milk</code>' in page
    assert page.count('class="timeline-item') == 3
    assert "Renamed from <code>fact:oat-milk</code> to <code>preference:oat-milk</code>" in page
    assert (
        '<span class="new" dir="auto">Oat milk in flat whites</span>' in page
    )  # the create, before
    # A version from before the rename is restored under the key the memory has now.
    create = MemoryHistory.objects.get(user=alice, action="create")
    assert f'action="/history/{create.pk}/restore/"' in page
    update = MemoryHistory.objects.get(user=alice, action="update")
    assert f'action="/history/{update.pk}/restore/"' not in page  # it is the current state
    # The old key's history row leads to the same timeline.
    assert "<h1>History of “Prefers oat milk in flat whites”</h1>" in text(
        as_alice.get(f"/history/{create.pk}/")
    )

    response = as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {f"{field}-kind": "decision", f"{field}-value": "Prefers oat milk in flat whites"},
    )
    assert response.status_code == 302
    assert flashes(response) == ["Now a decision: “Prefers oat milk in flat whites”."]
    assert Memory.objects.get(user=alice).key == "decision:oat-milk"
    as_alice.post(f"/history/{create.pk}/restore/")
    assert list(Memory.objects.filter(user=alice).values_list("key", "value")) == [
        ("decision:oat-milk", "Oat milk in flat whites")
    ]


def test_a_row_of_a_memory_renamed_away_is_not_offered_on_the_keys_new_memory(as_alice, alice):
    """The history page offers a restore where memory_restore would write it
    (memory/services.py restore_target): a row of another memory that had this key once
    comes back under that memory's key now, so the new memory's timeline does not offer it."""
    tea = say(alice, "fact:tea", "Drinks tea").memory
    memory_rename(user=alice, key="fact:tea", new_key="preference:tea", actor=Actor.for_user(alice))
    say(alice, "preference:tea", "Earl Grey")
    green = say(alice, "fact:tea", "Green tea only").memory
    old = MemoryHistory.objects.get(user=alice, memory=tea, action="create")
    assert old.key == "fact:tea"

    page = text(as_alice.get(f"/memories/{green.pk}/history/"))
    assert "Drinks tea" in page  # listed: it is this key's history too
    assert f'action="/history/{old.pk}/restore/"' not in page
    # On its own memory's timeline it is offered, and restores that memory.
    assert f'action="/history/{old.pk}/restore/"' in text(
        as_alice.get(f"/memories/{tea.pk}/history/")
    )
    as_alice.post(f"/history/{old.pk}/restore/")
    assert value_of(alice, "preference:tea") == "Drinks tea"
    assert value_of(alice, "fact:tea") == "Green tea only"


def test_a_kind_whose_key_is_taken_changes_nothing_and_keeps_the_text(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea").memory
    say(alice, "preference:tea", "Green tea")
    field = f"edit-{memory.pk}"
    before = MemoryHistory.objects.count()
    response = as_alice.post(
        f"/memories/{memory.pk}/edit/",
        {f"{field}-kind": "preference", f"{field}-value": "Drinks lots of tea"},
        headers=HX,
    )
    body = text(response)
    assert response.status_code == 200
    assert "HX-Trigger" not in response
    assert " data-unsaved " in body
    assert (
        f'<p class="field-error" id="id_{field}-kind_error">You already have '
        "&#x27;preference:tea&#x27;; edit that one instead.</p>"
    ) in body
    assert "Drinks lots of tea</textarea>" in body
    assert '<option value="preference" selected>Preference</option>' in body
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "fact:tea": "Drinks tea",
        "preference:tea": "Green tea",
    }
    assert MemoryHistory.objects.count() == before


def test_pin_and_unpin(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea").memory
    response = as_alice.post(f"/memories/{memory.pk}/pin/", {"pinned": "1"}, headers=HX)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    assert "Pinned." in text(response)
    assert ">Unpin<" in text(response)
    assert Memory.objects.get(pk=memory.pk).pinned is True

    response = as_alice.post(f"/memories/{memory.pk}/pin/", {"pinned": "0"})
    assert response.status_code == 302
    assert flashes(response) == ["Unpinned “Drinks tea”."]
    assert Memory.objects.get(pk=memory.pk).pinned is False


def test_delete_and_undo_htmx(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea", tags=["food"], pinned=True).memory
    response = as_alice.post(f"/memories/{memory.pk}/delete/", headers=HX)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    body = text(response)
    assert body.lstrip().startswith(f'<li id="memory-{memory.pk}" class="entry deleted"')
    history = MemoryHistory.objects.get(user=alice, key="fact:tea", action="delete")
    assert f'hx-post="/history/{history.pk}/restore/"' in body
    assert '>Undo<span class="sr-only"> deleting “Drinks tea”</span></button>' in body
    assert value_of(alice, "fact:tea") is None

    response = as_alice.post(f"/history/{history.pk}/restore/", {"then": "row"}, headers=HX)
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed, entries-changed"
    restored = Memory.objects.get(user=alice, key="fact:tea")
    assert (
        text(response).lstrip().startswith(f'<li id="memory-{restored.pk}" class="entry pinned">')
    )
    assert (restored.value, restored.tags, restored.pinned) == ("Drinks tea", ["food"], True)
    assert MemoryHistory.objects.filter(user=alice, key="fact:tea", action="restore").count() == 1


def test_delete_and_undo_without_js(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea").memory
    response = as_alice.post(f"/memories/{memory.pk}/delete/")
    history = MemoryHistory.objects.get(user=alice, key="fact:tea", action="delete")
    assert response.status_code == 302
    assert response["Location"] == f"/?tab=entries&undo={history.pk}"
    assert flashes(response) == ["Deleted “Drinks tea”."]
    page = as_alice.get(response["Location"])
    assert f'action="/history/{history.pk}/restore/"' in text(page)
    response = as_alice.post(f"/history/{history.pk}/restore/", {"then": "row"})
    restored = Memory.objects.get(user=alice, key="fact:tea")
    assert response["Location"] == f"/?tab=entries#memory-{restored.pk}"
    assert flashes(response) == ["Restored fact:tea."]


def test_entries_show_origin_confidence_and_time(as_alice, alice, alice_agent):
    say(alice, "fact:mine", "Mine")
    noted(alice_agent, "fact:theirs", "Theirs", confidence=0.7)
    body = text(as_alice.get("/?tab=entries"))
    assert '<span class="badge user">stated by you</span>' in body
    assert '<span class="badge agent">noted by agent assistant</span>' in body
    assert "confidence 0.70" in body
    assert "<time datetime=" in body


def test_entry_cards_read_as_text_with_the_key_in_the_details_line(as_alice, alice):
    memory = say(alice, "instruction:tldr", "Always include a TL;DR").memory
    say(alice, "bugfix:login", "Fixed the login loop")
    body = text(as_alice.get("/?tab=entries"))
    card = body.split(f'<li id="memory-{memory.pk}"', 1)[1].split("</li>", 1)[0]
    assert (
        card.split(">", 1)[1]
        .lstrip()
        .startswith('<h4 class="value" dir="auto">Always include a TL;DR</h4>')
    )
    assert '<span class="badge kind">Instruction</span>' in card
    assert '<span class="badge user">stated by you</span>' in card
    assert '<span class="key-line">key <code class="key">instruction:tldr</code></span>' in card
    assert 'Edit<span class="sr-only"> “Always include a TL;DR”</span>' in card
    assert 'Delete<span class="sr-only"> “Always include a TL;DR”</span>' in card
    assert '<h3 id="kind-instruction">Instruction <span class="badge">1</span></h3>' in body
    assert '<h3 id="kind-bugfix">Bug fix <span class="badge">1</span></h3>' in body
    assert "Prefers:" not in body
    assert "Note:" not in body.split('<aside id="preview"', 1)[0]


def test_a_list_refresh_keeps_the_open_editors_the_page_names(as_alice, alice):
    editing = say(alice, "fact:tea", "Drinks tea").memory
    other = say(alice, "fact:coffee", "Drinks coffee").memory
    headers = {**hx("entry-list"), "Mnemo-Keep": f"memory-{editing.pk} memory-999 bogus"}
    body = text(as_alice.get("/?tab=entries&q=coffee", headers=headers))
    assert body.lstrip().startswith('<div id="entry-list"')
    # Listed although the filter leaves it out, marked for htmx to keep the live editor.
    assert f'<li id="memory-{editing.pk}" class="entry" hx-preserve>' in body
    assert f'<li id="memory-{other.pk}" class="entry">' in body
    assert "hx-preserve" not in body.replace(
        f'id="memory-{editing.pk}" class="entry" hx-preserve', ""
    )
    # Without htmx there is nothing to keep.
    plain = text(
        as_alice.get("/?tab=entries&q=coffee", headers={"Mnemo-Keep": f"memory-{editing.pk}"})
    )
    assert "hx-preserve" not in plain
    assert "Drinks tea" not in plain.split('<aside id="preview"', 1)[0]


def test_entry_filters(as_alice, alice):
    say(alice, "fact:tea", "Drinks green tea", tags=["food"])
    say(alice, "preference:bullets", "Bullet points", tags=["reports"])
    say(alice, "decision:stack", "Use Django", tags=["work"])
    say(alice, "role", "Head of Growth")

    def keys(query, headers=None):
        body = text(as_alice.get(f"/?tab=entries&{query}", headers=headers))
        return sorted(
            key
            for key in ("fact:tea", "preference:bullets", "decision:stack", "role")
            if f'<code class="key">{key}</code>' in body
        )

    assert keys("") == ["decision:stack", "fact:tea", "preference:bullets"]
    assert keys("kind=fact") == ["fact:tea"]
    assert keys("tag=reports") == ["preference:bullets"]
    assert keys("q=DJANGO") == ["decision:stack"]
    assert keys("q=tea&kind=decision") == []
    partial = as_alice.get("/?tab=entries&tag=food", headers=hx("entry-list"))
    assert text(partial).lstrip().startswith('<div id="entry-list"')
    assert "<html" not in text(partial)
    assert "Drinks green tea" in text(partial)
    assert "Bullet points" not in text(partial)
    assert "No entries match these filters." in text(
        as_alice.get("/?tab=entries&q=zzz", headers=hx("entry-list"))
    )


# ---------------------------------------------------------------- preview and budget


def test_preview_partial_shows_block_and_counts(as_alice, alice):
    say(alice, "name", "Kevin")
    response = as_alice.get("/preview/", headers=HX)
    body = text(response)
    assert response.status_code == 200
    assert body.lstrip().startswith('<aside id="preview"')
    assert 'hx-trigger="memory-changed from:body"' in body
    assert '<pre id="working-memory-text"' in body
    assert "### About you\nKevin" in body
    assert 'aria-label="' in body
    assert " of 2000 tokens" in body
    assert as_alice.get("/preview/").status_code == 302


def test_preview_lists_what_was_left_out(as_alice, alice):
    for number in range(60):
        say(alice, f"fact:item-{number:02d}", f"Fact number {number} " + "word " * 40)
    body = text(as_alice.get("/preview/", headers=HX))
    assert "Left out:" in body
    assert "did not fit in the token budget" in body


def test_budget_saves_and_refuses_bad_values(as_alice, alice):
    response = as_alice.post("/preview/budget/", {"token_budget": "1500"}, headers=HX)
    assert response.status_code == 200
    assert "Saved." in text(response)
    assert "of 1500 tokens" in text(response)
    assert profile_for_user(alice).token_budget == 1500

    response = as_alice.post("/preview/budget/", {"token_budget": "9000"}, headers=HX)
    assert response.status_code == 200
    assert "Ensure this value is less than or equal to 8000." in text(response)
    assert 'aria-invalid="true"' in text(response)
    full = as_alice.post("/preview/budget/", {"token_budget": "abc", "tab": "entries"})
    assert full.status_code == 400
    assert profile_for_user(alice).token_budget == 1500

    response = as_alice.post("/preview/budget/", {"token_budget": "3000", "tab": "styles"})
    assert response["Location"] == "/?tab=styles"
    assert profile_for_user(alice).token_budget == 3000


# ---------------------------------------------------------------- history, restore, deleted


def test_history_timeline_and_restore_older_value(as_alice, alice, alice_agent):
    first = noted(alice_agent, "fact:tea", "Drinks tea")
    say(alice, "fact:tea", "Drinks coffee")
    memory = Memory.objects.get(user=alice, key="fact:tea")

    page = as_alice.get(f"/memories/{memory.pk}/history/")
    body = text(page)
    assert page.status_code == 200
    assert "<html" in body
    assert '<span class="old" dir="auto">Drinks tea</span>' in body
    assert '<span class="new" dir="auto">Drinks coffee</span>' in body
    assert '<span class="badge agent" dir="auto">agent assistant</span>' in body
    assert '<span class="badge user" dir="auto">you</span>' in body
    partial = as_alice.get(f"/memories/{memory.pk}/history/", headers=HX)
    assert text(partial).lstrip().startswith('<div id="history-timeline">')

    response = as_alice.post(
        f"/history/{first.history.pk}/restore/", {"then": "timeline"}, headers=HX
    )
    assert response.status_code == 200
    assert response["HX-Trigger"] == "memory-changed"
    assert "Restored fact:tea." in text(response)
    memory.refresh_from_db()
    assert (memory.value, memory.source) == ("Drinks tea", "tp_extracted")
    restore = MemoryHistory.objects.get(user=alice, key="fact:tea", action="restore")
    assert (restore.before["value"], restore.after["value"]) == ("Drinks coffee", "Drinks tea")
    assert restore.actor_user == alice

    response = as_alice.post(f"/history/{first.history.pk}/restore/")
    assert response["Location"] == f"/memories/{memory.pk}/history/"


def test_recently_deleted_lists_and_restores(as_alice, alice):
    say(alice, "fact:gone", XSS)
    say(alice, "fact:back", "Came back")
    say(alice, "fact:old", "Long ago")
    gone = memory_delete(user=alice, key="fact:gone", actor=Actor.for_user(alice))
    back = memory_delete(user=alice, key="fact:back", actor=Actor.for_user(alice))
    say(alice, "fact:back", "Came back")
    old = memory_delete(user=alice, key="fact:old", actor=Actor.for_user(alice))
    MemoryHistory.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))

    page = as_alice.get("/deleted/")
    body = text(page)
    assert page.status_code == 200
    assert f'id="deleted-{gone.pk}"' in body
    assert f'id="deleted-{back.pk}"' not in body
    assert f'id="deleted-{old.pk}"' not in body
    assert "&lt;img src=x" in body
    assert "<img src=x" not in body

    detail = as_alice.get(f"/history/{gone.pk}/")
    assert "Deleted: this key has no memory now." in text(detail)

    response = as_alice.post(f"/history/{gone.pk}/restore/", {"then": "trash"}, headers=HX)
    assert response.status_code == 200
    assert text(response).lstrip().startswith(f'<li id="deleted-{gone.pk}"')
    assert "Restored <code>fact:gone</code>." in text(response)
    assert value_of(alice, "fact:gone") == XSS
    assert f'id="deleted-{gone.pk}"' not in text(as_alice.get("/deleted/"))

    memory_delete(user=alice, key="fact:gone", actor=Actor.for_user(alice))
    again = MemoryHistory.objects.filter(user=alice, key="fact:gone", action="delete").first()
    response = as_alice.post(f"/history/{again.pk}/restore/", {"then": "trash"})
    assert response["Location"] == "/deleted/"
    assert value_of(alice, "fact:gone") == XSS


# ---------------------------------------------------------------- safety


def test_bob_gets_404_for_every_alice_id(client, alice, bob):
    memory = say(alice, "fact:tea", "Drinks tea").memory
    history = say(alice, "fact:tea", "Drinks green tea").history
    before = list(MemoryHistory.objects.values_list("id", flat=True))
    client.force_login(bob)
    gets = [
        f"/memories/{memory.pk}/",
        f"/memories/{memory.pk}/edit/",
        f"/memories/{memory.pk}/history/",
        f"/history/{history.pk}/",
    ]
    for url in gets:
        assert client.get(url, headers=HX).status_code == 404, url
        assert client.get(url).status_code == 404, url
    posts = {
        f"/memories/{memory.pk}/edit/": {f"edit-{memory.pk}-value": "hacked"},
        f"/memories/{memory.pk}/pin/": {"pinned": "1"},
        f"/memories/{memory.pk}/delete/": {},
        f"/history/{history.pk}/restore/": {"then": "row"},
    }
    for url, data in posts.items():
        assert client.post(url, data, headers=HX).status_code == 404, url
        assert client.post(url, data).status_code == 404, url
    memory.refresh_from_db()
    assert (memory.value, memory.pinned) == ("Drinks green tea", False)
    assert list(MemoryHistory.objects.values_list("id", flat=True)) == before
    assert "Drinks green tea" not in text(client.get("/?tab=entries"))
    assert "fact:tea" not in text(client.get("/deleted/"))


def test_values_are_escaped_everywhere(as_alice, alice, alice_agent):
    memory = noted(alice_agent, "fact:xss", XSS).memory
    say(alice, "name", XSS)
    say(alice, "tone_slack", XSS)
    pages = [
        "/?tab=entries",
        "/?tab=profile",
        "/?tab=styles",
        f"/memories/{memory.pk}/history/",
    ]
    for url in pages:
        body = text(as_alice.get(url))
        assert "&lt;img src=x onerror=alert(1)&gt;" in body, url
        assert "<img src=x" not in body, url


def test_post_without_csrf_token_is_403(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/entries/add/", {"entry-kind": "fact", "entry-value": "x"})
    assert response.status_code == 403
    assert Memory.objects.filter(user=alice).count() == 0


def test_writes_refuse_get(as_alice, alice):
    memory = say(alice, "fact:tea", "Drinks tea").memory
    for url in [
        "/entries/add/",
        f"/memories/{memory.pk}/pin/",
        f"/memories/{memory.pk}/delete/",
        "/profile/",
        "/styles/add/",
        "/preview/budget/",
        f"/history/{memory.history.first().pk}/restore/",
    ]:
        assert as_alice.get(url).status_code == 405, url
    assert value_of(alice, "fact:tea") == "Drinks tea"
