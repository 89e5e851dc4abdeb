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
    assert f'<a href="/work/{report.pk}/">Weekly report</a>' in html
    assert "<td>Report</td>" in html
    assert "<td>Draft</td>" in html
    assert '<span class="status status-in_progress">In progress</span>' in html
    assert '<span class="status status-done">Done</span>' in html
    assert '<span class="badge agent">assistant</span>' in html
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
    assert '<h1 id="work-title">Weekly report</h1>' in html
    assert "<h1>Findings</h1>" in html
    assert "<li><strong>two</strong></li>" in html
    assert "<dt>Kind</dt><dd>Report</dd>" in html
    assert '<span class="badge agent">assistant</span>' in html


def test_detail_htmx_partial(client, alice, alice_work):
    client.force_login(alice)
    response = client.get(f"/work/{alice_work[0].pk}/", headers=HX)
    html = response.content.decode()
    assert "<html" not in html
    assert '<h1 id="work-title">Draft reply</h1>' in html
    assert "<p>Hello</p>" in html


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
        assert "<p>intro</p>" in region


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
