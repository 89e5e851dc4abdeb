"""The search page (/search/) and the box on the Context page; search stats on the Agents page."""

import re

import pytest

from activity.actors import Actor
from context.services import document_write
from memory.services import memory_upsert
from pages.views.search import highlight
from profiles.services import token_create
from search.embeddings import get_embedder
from search.indexing import embed_rows, rows_needing_vectors
from search.models import SearchLog
from search.ranking import HIGHLIGHT_END, HIGHLIGHT_START, MAX_QUERY_LENGTH
from search.registry import sources

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &lt;img src=x onerror=alert(1)&gt;"


def index_everything():
    embedder = get_embedder()
    for source in sources():
        embed_rows(rows_needing_vectors(source, embedder.model), embedder)


def say(user, key, value):
    return memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user)).memory


def write(user, path, content, agent=None):
    actor = Actor.system() if user is None else Actor.for_user(user)
    return document_write(user=user, agent=agent, path=path, content=content, actor=actor)


def text(response):
    return response.content.decode()


def without_titles(html):
    return re.sub(r' title="[^"]*"', "", html).strip()


def results_region(response):
    """The inside of #search-results on a full page."""
    match = re.search(
        r'<div id="search-results"[^>]*>(.*?)</div>\s*</section>', text(response), re.DOTALL
    )
    assert match, "no results region"
    return match.group(1)


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def twins(alice, bob):
    """Alice and bob hold near-identical memories and documents."""
    for user, owner in ((alice, "alice"), (bob, "bob")):
        say(user, "fact:order", f"Order QX-88213 for {owner} was refunded after it arrived broken")
        write(user, "projects/parcel.md", f"# Parcel\n\nThe QX-88213 parcel of {owner} was late.")
    index_everything()


# ---------------------------------------------------------------- access and shapes


# A row of Settings' search table (templates/pages/settings.html), up to its latency.
SEARCH_ROW = '<tr><td data-label="From">{}</td><td data-label="Searches">{}</td>'


def test_login_required(client, alice):
    response = client.get("/search/?q=tea")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert SearchLog.objects.count() == 0


def test_only_get(as_alice):
    assert as_alice.post("/search/", {"q": "tea"}).status_code == 405
    assert SearchLog.objects.count() == 0


def test_full_page_and_htmx_partial(as_alice, alice, twins):
    page = as_alice.get("/search/?q=QX-88213")
    assert page.status_code == 200
    assert page["Vary"] == "HX-Request, Cookie"
    body = text(page)
    assert "<html" in body
    assert "<h1>Search</h1>" in body
    assert 'id="search-form"' in body
    assert 'value="QX-88213"' in body
    assert 'hx-replace-url="true"' in body
    assert "Link to these results" not in body  # this page is the link

    on_this_page = {**HX, "HX-Current-URL": "http://testserver/search/?q=QX"}
    partial = as_alice.get("/search/?q=QX-88213", headers=on_this_page)
    assert partial.status_code == 200
    fragment = text(partial)
    assert "<html" not in fragment
    assert 'id="search-form"' not in fragment  # the input being typed in is never replaced
    assert 'id="search-results"' not in fragment  # htmx swaps the region's inside
    assert "Order QX-88213 for alice" in fragment
    # The same results as the page's region (the second search raised the use boost).
    assert without_titles(fragment) == without_titles(results_region(page))


def test_the_context_page_carries_the_box_on_every_tab(as_alice):
    for url in ("/?tab=profile", "/?tab=styles", "/?tab=entries", "/documents/"):
        body = text(as_alice.get(url))
        assert '<form id="search-form" role="search" method="get" action="/search/"' in body
        assert 'hx-get="/search/" hx-target="#search-results" hx-swap="innerHTML"' in body
        assert 'hx-trigger="input changed delay:300ms, submit" hx-sync="this:replace"' in body
        assert "hx-replace-url" not in body  # the Context page keeps its own URL
        assert '<div id="search-results" class="search-results" aria-live="polite">' in body
        assert body.index('id="search-form"') < body.index('aria-label="Context sections"')


def test_results_asked_from_the_context_page_link_to_the_search_page(as_alice, twins):
    response = as_alice.get(
        "/search/?q=QX-88213", headers={**HX, "HX-Current-URL": "http://testserver/?tab=entries"}
    )
    assert '<a href="/search/?q=QX-88213">Link to these results</a>' in text(response)


def test_empty_query_shows_nothing_and_logs_nothing(as_alice):
    for url in ("/search/", "/search/?q=", "/search/?q=%20%20"):
        page = as_alice.get(url)
        assert page.status_code == 200
        assert results_region(page).strip() == ""
        partial = as_alice.get(url, headers=HX)
        assert partial.status_code == 200
        assert text(partial).strip() == ""
    assert SearchLog.objects.count() == 0


def test_a_too_long_query_is_explained_next_to_the_box(as_alice):
    query = "a" * (MAX_QUERY_LENGTH + 1)
    message = f"The query is {MAX_QUERY_LENGTH + 1} characters long; at most {MAX_QUERY_LENGTH}."

    page = as_alice.get("/search/", {"q": query})
    assert page.status_code == 400
    assert f'<p id="search-error" class="field-error">{message}</p>' in results_region(page)
    assert 'aria-invalid="true"' in text(page)

    partial = as_alice.get("/search/", {"q": query}, headers=HX)
    assert partial.status_code == 200  # htmx swaps only 2xx answers
    assert text(partial).strip() == f'<p id="search-error" class="field-error">{message}</p>'
    assert SearchLog.objects.count() == 0


def test_a_nul_character_in_the_query_is_explained_not_a_server_error(as_alice):
    page = as_alice.get("/search/?q=a%00b")

    assert page.status_code == 400
    assert "The query contains a NUL character (U+0000)." in results_region(page)
    assert SearchLog.objects.count() == 0


def test_nothing_found_gives_a_hint(as_alice, alice):
    say(alice, "fact:tea", "Prefers green tea")  # no vector yet: only its words can match
    response = as_alice.get("/search/?q=xylophone", headers=HX)
    body = text(response)
    assert "No matches for “xylophone”." in body
    assert "Try fewer words, another spelling" in body
    assert '<a href="/?tab=entries">Entries</a>' in body
    assert '<a href="/documents/">Documents</a>' in body


# ---------------------------------------------------------------- what is found


def test_results_hold_the_memory_and_the_document_with_links_and_score_parts(as_alice, alice):
    memory = say(alice, "fact:order", "Order QX-88213 was refunded after it arrived broken")
    write(alice, "projects/parcel.md", "# Parcel\n\nThe QX-88213 parcel was late.")
    index_everything()

    body = text(as_alice.get("/search/?q=QX-88213", headers=HX))

    assert "1 memory and 1 document for “QX-88213”." in body
    # The text leads and links to the entry; the key is a detail after it.
    entry = (
        f'<a class="value" href="/?tab=entries#memory-{memory.pk}" dir="auto">'
        "Order QX-88213 was refunded after it arrived broken</a>"
    )
    assert entry in body
    assert '<span class="badge">fact</span>' in body
    assert body.index(entry) < body.index('<code class="key">fact:order</code>')
    assert f'<a href="/memories/{memory.pk}/history/">History' in body
    assert (
        '<a href="/documents/mine/file/projects/parcel.md"><code class="path" dir="auto">'
        "projects/parcel.md</code></a>" in body
    )
    assert '<span class="badge scope-user">Your documents</span>' in body
    assert (
        '<p class="snippet" dir="auto">Parcel\n\nThe <mark>QX-88213</mark> parcel was late</p>'
        in body
    )
    # Both sides found both rows first: the score parts say so.
    assert body.count('">words #1 · meaning #1</span>') == 2
    assert 'title="Found by its words (rank 1) and by meaning (rank 1); score ' in body
    # Each is the best on both sides: the blend's parts are both 1.
    assert "= fused 1.0000 (0.7 × meaning 1.00 + 0.3 × words 1.00) × freshness" in body


def test_profile_and_style_hits_link_to_their_tabs(as_alice, alice):
    say(alice, "company", "YARNNN")
    say(alice, "tone_slack", "casual YARNNN banter")
    body = text(as_alice.get("/search/?q=YARNNN", headers=HX))
    assert '<a class="value" href="/?tab=profile#profile-company" dir="auto">YARNNN</a>' in body
    assert (
        '<a class="value" href="/?tab=styles#style-slack" dir="auto">casual YARNNN banter</a>'
        in body
    )
    assert '<code class="key">company</code>' in body
    assert '<code class="key">tone_slack</code>' in body
    assert '<span class="badge">profile</span>' in body
    assert '<span class="badge">style</span>' in body


def test_each_user_finds_only_their_own_rows(client, alice, bob, twins):
    for user, other in ((alice, "bob"), (bob, "alice")):
        client.force_login(user)
        body = text(client.get("/search/?q=QX-88213 parcel refunded", headers=HX))
        assert f"for {user.username} was refunded" in body
        assert f"parcel of {user.username} was late" in body or "projects/parcel.md" in body
        assert other not in body
        assert "1 memory and 1 document" in body


def test_the_agents_private_notes_are_included(as_alice, alice, alice_agent, bob, bob_agent):
    write(alice, "AGENT_MEMORY.md", "The walrus budget is 40k.", agent=alice_agent)
    write(bob, "AGENT_MEMORY.md", "Bob's walrus budget is 90k.", agent=bob_agent)
    index_everything()

    body = text(as_alice.get("/search/?q=walrus", headers=HX))

    assert '<a href="/documents/agents/assistant/file/AGENT_MEMORY.md">' in body
    assert '<span class="badge scope-agent">Notes of agent assistant</span>' in body
    assert "<mark>walrus</mark> budget" in body
    assert "Bob" not in body
    assert "1 document" in body


def test_company_documents_only_while_globally_readable(as_alice, settings):
    write(None, "handbook.md", "The company penguin policy.")
    write(None, "SOUL.md", "Company penguin soul.")
    index_everything()

    settings.MNEMO_GLOBAL_READABLE = False
    body = text(as_alice.get("/search/?q=penguin", headers=HX))
    assert "No matches for “penguin”." in body
    assert "handbook.md" not in body

    settings.MNEMO_GLOBAL_READABLE = True
    body = text(as_alice.get("/search/?q=penguin", headers=HX))
    assert '<a href="/documents/company/file/handbook.md">' in body
    assert '<span class="badge scope-global">Company (read-only)</span>' in body
    assert "SOUL.md" not in body  # identity files never come from the company scope


def test_everything_users_wrote_is_escaped_and_highlights_still_work(as_alice, alice):
    say(alice, "fact:xss", f"zebra {SCRIPT} {IMG}")
    write(alice, "notes/xss.md", f"zebra {SCRIPT} and {IMG} zebra")
    index_everything()

    for response in (
        as_alice.get("/search/?q=zebra", headers=HX),
        as_alice.get("/search/?q=zebra"),
    ):
        body = text(response)
        assert "<script>alert" not in body
        assert "<img src=x" not in body
        assert f'" dir="auto">zebra {ESCAPED}</a>' in body
        assert "<mark>zebra</mark>" in body
        assert "onerror=alert(1)&gt;" in body.split('class="snippet"', 1)[1]


def test_a_query_is_escaped_where_it_is_shown(as_alice):
    body = text(as_alice.get("/search/", {"q": f"{SCRIPT} {IMG}"}))
    assert "<script>alert" not in body
    assert "<img src=x" not in body
    assert f'value="{ESCAPED}"' in body


def test_highlight_escapes_before_marking():
    snippet = f"a {HIGHLIGHT_START}<b>{HIGHLIGHT_END} & {HIGHLIGHT_START}x{HIGHLIGHT_END}"
    assert highlight(snippet) == "a <mark>&lt;b&gt;</mark> &amp; <mark>x</mark>"
    assert highlight(f"stray {HIGHLIGHT_END}end{HIGHLIGHT_START}") == "stray end"
    joined = f"{HIGHLIGHT_START}QX{HIGHLIGHT_END}{HIGHLIGHT_START}-1{HIGHLIGHT_END}"
    assert highlight(joined) == "<mark>QX-1</mark>"


# ---------------------------------------------------------------- logging and stats


def test_each_page_search_is_logged_once_as_the_page(as_alice, alice, bob, twins):
    as_alice.get("/search/?q=QX-88213")
    as_alice.get("/search/?q=QX-88213+late", headers=HX)

    rows = SearchLog.objects.filter(user=alice).order_by("id")
    # One row per search box query, counting its memory and its document result.
    assert [(row.tool, row.results) for row in rows] == [("page", 2)] * 2
    assert all(row.latency_ms > 0 for row in rows)
    assert not SearchLog.objects.filter(user=bob).exists()


def test_a_page_search_is_not_a_use_of_the_memory(as_alice, alice, bob, twins):
    response = as_alice.get("/search/?q=QX-88213")

    assert "fact:order" in text(response)
    mine = alice.memories.get(key="fact:order")
    assert (mine.access_count, mine.last_accessed_at) == (0, None)


def test_the_settings_page_shows_search_stats(as_alice, alice, bob):
    for latency in (2.0, 4.0, 9.0):
        SearchLog.objects.create(user=alice, tool="page", results=1, latency_ms=latency)
    SearchLog.objects.create(user=alice, tool="search_memory", results=0, latency_ms=5.0)
    SearchLog.objects.create(user=bob, tool="page", results=1, latency_ms=500.0)

    body = text(as_alice.get("/settings/"))

    assert "<p><strong>Searches: 4</strong>, average latency <strong>5.0 ms</strong></p>" in body
    latency = '<td data-label="Average latency">5.0 ms</td></tr>'
    assert f"{SEARCH_ROW.format('You: the search box', 3)}{latency}" in body
    assert f"{SEARCH_ROW.format('Agents: search_memory (memories)', 1)}{latency}" in body
    assert "memory_search (documents)</td>" not in body


def test_stats_count_real_searches(as_alice, alice, alice_agent, twins):
    as_alice.get("/search/?q=QX-88213")
    token = token_create(agent=alice_agent).raw
    as_alice.post(
        "/api/v1/tools/search_memory",
        {"query": "parcel"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )

    body = text(as_alice.get("/settings/"))

    assert "<strong>Searches: 2</strong>" in body
    assert SEARCH_ROW.format("You: the search box", 1) in body
    assert SEARCH_ROW.format("Agents: search_memory (memories)", 1) in body


def test_below_the_floor_no_matches_and_the_closest_only_on_request(as_alice, alice):
    say(alice, "fact:tea", "Prefers green tea over coffee in the morning")
    say(alice, "fact:cello", "Plays the cello in an amateur orchestra")
    index_everything()

    body = text(as_alice.get("/search/?q=torque+specification+gearbox", headers=HX))
    assert "No matches for “torque specification gearbox”." in body
    assert "fact:tea" not in body
    link = (
        '<a id="search-closest" href="/search/?q=torque%20specification%20gearbox&amp;closest=1">'
    )
    assert link in body

    closest = text(as_alice.get("/search/?q=torque+specification+gearbox&closest=1"))
    assert "Closest, though not a match: 2 memories" in closest
    assert "fact:tea" in closest
    assert "fact:cello" in closest
    assert 'id="search-closest"' not in closest
