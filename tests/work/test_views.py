"""The Work pages: the user's work items, and one item with its markdown rendered safely."""

import re

import pytest

from activity.actors import Actor
from tests.factories import WorkItemFactory
from work.models import WorkItem, WorkKind, WorkStatus
from work.services import work_create

HX = {"HX-Request": "true"}
ROW = re.compile(r'<tr id="work-(\d+)"')


def rows(response):
    return [int(pk) for pk in ROW.findall(response.content.decode())]


def body_region(response):
    html = response.content.decode()
    return html[html.index('id="work-body"') : html.index("</article>")]


@pytest.fixture
def alice_work(alice, alice_agent):
    first = work_create(
        user=alice,
        title="Weekly report",
        body="# Findings\n\n- one\n- **two**\n",
        actor=Actor.for_agent(alice_agent),
    )
    second = work_create(
        user=alice,
        title="Draft reply",
        body="Hello",
        kind=WorkKind.DRAFT,
        status=WorkStatus.IN_PROGRESS,
        actor=Actor.for_user(alice),
    )
    return [second, first]


@pytest.mark.parametrize("path", ["/work/", "/work/1/"])
def test_login_required(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


def test_list_full_page(client, alice, alice_work):
    draft, report = alice_work
    client.force_login(alice)
    response = client.get("/work/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html
    assert rows(response) == [draft.pk, report.pk]
    assert "2 items." in html
    assert f'<a href="/work/{report.pk}/" dir="auto">Weekly report</a>' in html
    assert '<td data-label="Kind">Report</td>' in html
    assert '<td data-label="Kind">Draft</td>' in html
    assert '<span class="status status-in_progress">In progress</span>' in html
    assert '<span class="status status-done">Done</span>' in html
    assert '<bdi class="badge agent" dir="auto">assistant</bdi>' in html
    assert f'datetime="{report.created_at.isoformat()}"' in html


def test_list_htmx_partial(client, alice, alice_work):
    client.force_login(alice)
    response = client.get("/work/", headers=HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith('<section id="work-list"')
    assert rows(response) == [item.pk for item in alice_work]


def test_list_empty_state(client, alice):
    client.force_login(alice)
    response = client.get("/work/")
    assert "No work yet." in response.content.decode()
    assert rows(response) == []


def test_list_paginates(client, alice):
    WorkItemFactory.create_batch(60, user=alice)
    newest_first = list(
        WorkItem.objects.filter(user=alice)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
    )
    client.force_login(alice)
    first = client.get("/work/")
    assert rows(first) == newest_first[:50]
    assert "Page 1 of 2" in first.content.decode()
    second = client.get("/work/?page=2", headers=HX)
    assert rows(second) == newest_first[50:]
    assert "<html" not in second.content.decode()


def test_bob_sees_none_of_alices_work(client, alice, bob, alice_work):
    client.force_login(bob)
    response = client.get("/work/")
    assert rows(response) == []
    assert "Weekly report" not in response.content.decode()
    for item in alice_work:
        assert client.get(f"/work/{item.pk}/").status_code == 404
        assert client.get(f"/work/{item.pk}/", headers=HX).status_code == 404


def test_missing_item_is_404(client, alice):
    client.force_login(alice)
    assert client.get("/work/999999/").status_code == 404


def test_detail_renders_markdown(client, alice, alice_work):
    report = alice_work[1]
    client.force_login(alice)
    response = client.get(f"/work/{report.pk}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html
    assert '<h1 id="work-title" dir="auto">Weekly report</h1>' in html
    assert '<h1 dir="auto">Findings</h1>' in html
    assert '<li dir="auto"><strong>two</strong></li>' in html
    assert "<dt>Kind</dt><dd>Report</dd>" in html
    assert '<bdi class="badge agent" dir="auto">assistant</bdi>' in html


def test_detail_htmx_partial(client, alice, alice_work):
    client.force_login(alice)
    response = client.get(f"/work/{alice_work[0].pk}/", headers=HX)
    html = response.content.decode()
    assert "<html" not in html
    assert '<h1 id="work-title" dir="auto">Draft reply</h1>' in html
    assert '<p dir="auto">Hello</p>' in html


@pytest.mark.parametrize(
    ("body", "forbidden"),
    [
        ("<script>alert(1)</script>", "<script"),
        ('<img src="x" onerror="alert(1)">', "onerror"),
        ("[click me](javascript:alert(1))", "javascript:"),
        ('<a href="javascript:alert(1)">x</a>', "javascript:"),
        ('<p onclick="alert(1)">hi</p>', "onclick"),
        ("<iframe src='https://evil.example'></iframe>", "<iframe"),
    ],
)
def test_detail_markdown_is_sanitized(client, alice, body, forbidden):
    item = WorkItemFactory(user=alice, title="Unsafe", body=f"Intro\n\n{body}\n")
    client.force_login(alice)
    for headers in ({}, HX):
        response = client.get(f"/work/{item.pk}/", headers=headers)
        assert response.status_code == 200
        region = body_region(response).lower()
        assert forbidden not in region
        assert "alert(1)" not in response.content.decode()
        assert '<p dir="auto">intro</p>' in region


def test_title_is_escaped(client, alice):
    item = WorkItemFactory(user=alice, title='<img src=x onerror="alert(1)">', body="")
    client.force_login(alice)
    html = client.get(f"/work/{item.pk}/").content.decode()
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert "This item has no text." in html
    listing = client.get("/work/").content.decode()
    assert "<img src=x" not in listing


def test_post_is_not_allowed(client, alice, alice_work):
    client.force_login(alice)
    assert client.post("/work/").status_code == 405
    assert client.post(f"/work/{alice_work[0].pk}/").status_code == 405


# --- filters: kind and agent; heartbeat findings ------------------------------------------


@pytest.fixture
def mixed_work(alice, alice_agent):
    from tests.factories import AgentFactory

    researcher = AgentFactory(user=alice, name="researcher")
    report = work_create(user=alice, title="Report", body="r", actor=Actor.for_agent(alice_agent))
    draft = work_create(
        user=alice, title="Draft", body="d", kind=WorkKind.DRAFT, actor=Actor.for_agent(researcher)
    )
    finding = work_create(
        user=alice,
        title="Invoice overdue",
        body="The invoice is **late**.",
        kind=WorkKind.HEARTBEAT,
        actor=Actor.system(),
    )
    return {"report": report, "draft": draft, "finding": finding, "researcher": researcher}


def test_list_filters_by_kind(client, alice, mixed_work):
    client.force_login(alice)
    full = client.get("/work/?kind=draft")
    partial = client.get("/work/?kind=heartbeat", headers=HX)

    assert full.status_code == 200
    assert "<html" in full.content.decode()
    assert rows(full) == [mixed_work["draft"].pk]
    assert '<option value="draft" selected>' in full.content.decode()
    assert "<html" not in partial.content.decode()
    assert rows(partial) == [mixed_work["finding"].pk]


def test_list_filters_by_agent_and_by_no_agent(client, alice, alice_agent, mixed_work):
    client.force_login(alice)
    researcher = mixed_work["researcher"]

    by_researcher = client.get(f"/work/?agent={researcher.pk}")
    by_assistant = client.get(f"/work/?agent={alice_agent.pk}", headers=HX)
    by_nobody = client.get("/work/?agent=none")
    both = client.get(f"/work/?agent={alice_agent.pk}&kind=draft")

    assert rows(by_researcher) == [mixed_work["draft"].pk]
    assert f'<option value="{researcher.pk}" selected>researcher</option>' in (
        by_researcher.content.decode()
    )
    assert rows(by_assistant) == [mixed_work["report"].pk]
    assert rows(by_nobody) == [mixed_work["finding"].pk]
    assert rows(both) == []
    assert "No work matches this filter." in both.content.decode()


def test_filter_form_works_without_javascript(client, alice, mixed_work):
    client.force_login(alice)
    html = client.get("/work/").content.decode()
    assert '<form class="card filters" method="get" action="/work/"' in html
    assert 'hx-get="/work/" hx-target="#work-list"' in html
    assert '<button type="submit">Filter</button>' in html


def test_filters_keep_their_query_on_the_next_page(client, alice):
    WorkItemFactory.create_batch(55, user=alice, kind=WorkKind.SUMMARY)
    WorkItemFactory(user=alice, kind=WorkKind.REPORT)
    client.force_login(alice)
    first = client.get("/work/?kind=summary")
    html = first.content.decode()
    assert len(rows(first)) == 50
    assert 'href="/work/?kind=summary&amp;page=2"' in html
    second = client.get("/work/?kind=summary&page=2")
    assert len(rows(second)) == 5


@pytest.mark.parametrize("query", ["kind=memo", "agent=abc"])
def test_a_bad_filter_says_so(client, alice, mixed_work, query):
    client.force_login(alice)
    response = client.get(f"/work/?{query}")
    assert response.status_code == 400
    assert "This filter cannot be used" in response.content.decode()
    assert rows(response) == []


def test_bob_cannot_filter_by_alices_agent(client, alice_agent, bob, mixed_work):
    WorkItemFactory(user=bob, title="Bob's")
    client.force_login(bob)
    response = client.get(f"/work/?agent={alice_agent.pk}")
    html = response.content.decode()
    assert response.status_code == 400
    assert rows(response) == []
    assert "assistant" not in html.split('id="work-list"')[1]
    assert "researcher" not in html


def test_heartbeat_findings_stand_out(client, alice, mixed_work):
    finding = mixed_work["finding"]
    client.force_login(alice)
    html = client.get("/work/").content.decode()

    assert f'<tr id="work-{finding.pk}" class="finding">' in html
    assert '<span class="badge finding">Heartbeat finding</span>' in html
    assert "1 heartbeat finding not archived." in html
    assert 'href="/work/?kind=heartbeat"' in html
    assert f'<tr id="work-{mixed_work["report"].pk}">' in html

    detail = client.get(f"/work/{finding.pk}/").content.decode()
    assert 'id="finding-note"' in detail
    assert "<strong>late</strong>" in detail
    report = client.get(f"/work/{mixed_work['report'].pk}/").content.decode()
    assert 'id="finding-note"' not in report


def test_archived_findings_are_not_counted(client, alice, mixed_work):
    from work.services import work_update

    work_update(
        user=alice,
        pk=mixed_work["finding"].pk,
        actor=Actor.for_user(alice),
        status=WorkStatus.ARCHIVED,
    )
    client.force_login(alice)
    html = client.get("/work/").content.decode()
    assert "not archived." not in html
    assert 'id="heartbeat-findings"' not in html
    assert rows(client.get("/work/?kind=heartbeat")) == [mixed_work["finding"].pk]


def test_tags_are_shown(client, alice, alice_agent):
    item = work_create(
        user=alice, title="Tagged", body="x", actor=Actor.for_agent(alice_agent), tags=["q2"]
    )
    client.force_login(alice)
    assert '<span class="badge tag">q2</span>' in client.get("/work/").content.decode()
    detail = client.get(f"/work/{item.pk}/").content.decode()
    assert '<dt>Tags</dt><dd><span class="badge tag">q2</span></dd>' in detail
