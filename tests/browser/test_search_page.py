"""The search box in a real browser: results while typing on the Context page without a reload,
a result opening its document, the /search/ page keeping its URL in step, and no JavaScript."""

import re

import pytest
from playwright.sync_api import Page, expect

from activity.actors import Actor
from context.services import document_write
from memory.services import memory_upsert
from search.models import SearchLog

pytestmark = pytest.mark.django_db(transaction=True)

BOX = "Search your memory and documents"


def results(page: Page):
    return page.locator("#search-results")


@pytest.fixture
def parcel(alice, bob):
    """Alice's memory and document about an order; bob has near-identical ones."""
    for user in (alice, bob):
        name = user.get_username()
        memory_upsert(
            user=user,
            key="fact:order",
            value=f"Order QX-88213 of {name} was refunded",
            actor=Actor.for_user(user),
        )
        document_write(
            user=user,
            path="projects/parcel.md",
            content=f"# Parcel\n\nThe QX-88213 parcel of {name} arrived late.",
            actor=Actor.for_user(user),
        )
    return alice


def test_typing_shows_results_in_place_and_a_result_opens_its_document(
    signed_in_page, parcel, same_document, htmx_settled
):
    page = signed_in_page(parcel)
    expect(page.get_by_role("link", name="Profile")).to_have_attribute("aria-current", "page")
    box = page.get_by_label(BOX)

    with same_document(page):
        box.press_sequentially("QX-88213", delay=20)
        expect(results(page)).to_contain_text("1 memory and 1 document for “QX-88213”.")
        memories = results(page).get_by_role("region", name="Memories")
        documents = results(page).get_by_role("region", name="Documents")
        expect(memories.locator(".value")).to_have_text("Order QX-88213 of alice was refunded")
        expect(documents.get_by_role("link", name="projects/parcel.md")).to_be_visible()
        expect(documents.locator("mark")).to_have_text("QX-88213")
        expect(results(page)).not_to_contain_text("bob")
        # The Context page keeps its address and its tabs; the box keeps what was typed.
        expect(page).to_have_url(re.compile(r"/$"))
        expect(box).to_have_value("QX-88213")
        expect(box).to_be_focused()

        # Enter searches again in place; clearing the box clears the results.
        box.press("Enter")
        htmx_settled(page)
        expect(results(page)).to_contain_text("1 memory and 1 document")
        box.fill("")
        expect(results(page)).to_have_text("")

        # A too-long query is explained next to the box.
        box.fill("x" * 1001)
        expect(results(page).locator(".field-error")).to_have_text(
            "The query is 1001 characters long; at most 1000."
        )

        # The other tabs keep the box and its results.
        box.fill("parcel")
        expect(results(page)).to_contain_text("for “parcel”")
        page.get_by_role("link", name="Entries", exact=True).click()
        expect(page.get_by_role("heading", name="Entries", exact=True)).to_be_visible()
        expect(results(page)).to_contain_text("for “parcel”")

    htmx_settled(page)
    assert SearchLog.objects.filter(user=parcel, tool="page").exists()
    assert not SearchLog.objects.exclude(user=parcel).exists()

    results(page).get_by_role("link", name="projects/parcel.md").click()
    expect(page).to_have_url(re.compile(r"/documents/mine/file/projects/parcel\.md$"))
    expect(page.locator("#doc-body")).to_contain_text("The QX-88213 parcel of alice arrived late.")


def test_a_memory_result_leads_to_its_entry(signed_in_page, parcel):
    page = signed_in_page(parcel)
    page.get_by_label(BOX).fill("refunded")
    # The result is its text, a link to the entry; the key is a detail beside it.
    results(page).get_by_role("link", name="Order QX-88213 of alice was refunded").click()
    expect(page).to_have_url(re.compile(r"/\?tab=entries#memory-\d+$"))
    expect(page.locator(".entry .value")).to_have_text("Order QX-88213 of alice was refunded")


def test_the_search_page_keeps_its_address_in_step(signed_in_page, parcel, same_document, url):
    page = signed_in_page(parcel)
    page.goto(url("pages:search") + "?q=parcel")
    expect(page.get_by_role("heading", name="Search", exact=True)).to_be_visible()
    expect(results(page)).to_contain_text("for “parcel”")

    with same_document(page):
        page.get_by_label(BOX).fill("refunded")
        expect(results(page)).to_contain_text("for “refunded”")
        expect(page).to_have_url(re.compile(r"/search/\?q=refunded$"))

    page.reload()
    expect(page.get_by_label(BOX)).to_have_value("refunded")
    expect(results(page)).to_contain_text("for “refunded”")


def test_search_works_without_javascript(signed_in_page, parcel):
    page = signed_in_page(parcel, java_script_enabled=False)
    page.goto("/?tab=styles")

    page.get_by_label(BOX).fill("QX-88213")
    page.get_by_label(BOX).press("Enter")

    expect(page).to_have_url(re.compile(r"/search/\?q=QX-88213$"))
    expect(page.get_by_role("heading", name="Search", exact=True)).to_be_visible()
    expect(results(page)).to_contain_text("1 memory and 1 document for “QX-88213”.")
    expect(results(page)).not_to_contain_text("bob")

    page.get_by_label(BOX).fill("x" * 1001)
    page.get_by_role("button", name="Search", exact=True).click()
    expect(results(page).locator(".field-error")).to_have_text(
        "The query is 1001 characters long; at most 1000."
    )
    expect(page.get_by_label(BOX)).to_have_attribute("aria-invalid", "true")

    page.get_by_label(BOX).fill("QX-88213")
    page.get_by_role("button", name="Search", exact=True).click()
    results(page).get_by_role("link", name="projects/parcel.md").click()
    expect(page).to_have_url(re.compile(r"/documents/mine/file/projects/parcel\.md$"))
    expect(page.locator("#doc-body")).to_contain_text("The QX-88213 parcel of alice arrived late.")


def test_nothing_close_says_no_matches_and_shows_the_closest_on_request(
    signed_in_page, parcel, url
):
    from search.embeddings import get_embedder
    from search.indexing import embed_rows, rows_needing_vectors
    from search.registry import sources

    for source in sources():  # vectors, so that something can come closest by meaning
        embedder = get_embedder(source.embedder_role)
        embed_rows(rows_needing_vectors(source, embedder.model), embedder)
    page = signed_in_page(parcel)
    page.goto(url("pages:search") + "?q=xylophone+quartet")

    expect(results(page)).to_contain_text("No matches for “xylophone quartet”.")
    expect(results(page)).not_to_contain_text("QX-88213")
    page.get_by_role("link", name="Show what came closest anyway").click()

    expect(page).to_have_url(re.compile(r"/search/\?q=xylophone%20quartet&closest=1$"))
    expect(results(page)).to_contain_text("Closest, though not a match:")
    expect(results(page).locator(".value")).to_have_text("Order QX-88213 of alice was refunded")
    expect(results(page)).not_to_contain_text("bob")
