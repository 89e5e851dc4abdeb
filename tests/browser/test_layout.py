"""Issue 30's layout fixes, each in a real browser at a phone's width (390 px) where it is a
layout matter: an agent's long names wrap, a finished progress bar spans its card, *Delete
all* says what it did once, beside its Undo, and the Undo replaces it; the Entries tab's two
search landmarks have names of their own; the API docs (Swagger UI) follow the theme."""

from __future__ import annotations

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from playwright.sync_api import Page, expect

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert
from portability.exporting import export_job_create, export_job_run
from portability.importing import import_job_create, import_job_run
from profiles.services import agent_get_or_create, token_create

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
# The elements whose right edge passes the viewport's, to name in a failure.
STICKING_OUT = """
width => [...document.querySelectorAll("body *")]
  .filter((element) => element.getBoundingClientRect().right > width + 0.5)
  .slice(0, 5)
  .map((element) => element.tagName.toLowerCase() + (element.id ? "#" + element.id : ""))
"""


def assert_fits(page: Page, width: int) -> None:
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= width, (scroll_width, page.evaluate(STICKING_OUT, width))


# Everything an agent can be called, at its longest and without a space to break at.
LONG_DISPLAY_NAME = "Assistent" * 11 + "X"  # 100 characters
LONG_NAME = "a" * 64
LONG_DESCRIPTION = "D" * 200
LONG_LABEL = "L" * 100


def test_an_agent_with_the_longest_names_fits_a_phone(signed_in_page, alice):
    """A long agent name made /agents/ 898 px wide on a phone: now each long word wraps
    inside its card."""
    agent = agent_get_or_create(
        user=alice, name=LONG_NAME, display_name=LONG_DISPLAY_NAME, description=LONG_DESCRIPTION
    )
    token_create(agent=agent, label=LONG_LABEL)
    page = signed_in_page(alice, viewport=PHONE)
    page.goto("/agents/")
    card = page.locator(f"#agent-{agent.pk}")
    expect(card.get_by_role("heading", level=2)).to_contain_text(LONG_DISPLAY_NAME)
    expect(card).to_contain_text(LONG_NAME)
    expect(card).to_contain_text(LONG_DESCRIPTION)
    expect(card).to_contain_text(LONG_LABEL)
    assert_fits(page, PHONE["width"])

    # A new token, shown once in its own box, fits too.
    card.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_be_visible()
    assert_fits(page, PHONE["width"])
    box = card.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= PHONE["width"]


# The bar's width, and the width inside its card's padding.
BAR_AND_CARD = """
bar => {
  const card = bar.closest(".card");
  const style = getComputedStyle(card);
  const inside = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [bar.getBoundingClientRect().width, inside];
}
"""


def test_a_finished_progress_bar_spans_its_card(signed_in_page, alice):
    """It was the browser's 160 px in a 1,100 px card."""
    job = import_job_create(
        user=alice,
        kind="chatgpt",
        mode="merge",
        upload=SimpleUploadedFile("memories.txt", b"Likes jazz\nLives in Lyon\n"),
    )
    import_job_run(job.pk)
    export = export_job_create(user=alice)
    export_job_run(export.pk)
    page = signed_in_page(alice)
    bars = ((f"/settings/import/{job.pk}/", "#import-bar"), (export.url(), "#export-bar"))
    for path, bar in bars:
        for viewport in (DESKTOP, PHONE):
            page.set_viewport_size(viewport)
            page.goto(path)
            expect(page.locator(bar)).to_have_attribute("value", "100")
            width, inside = page.locator(bar).evaluate(BAR_AND_CARD)
            assert inside > 300, (path, viewport, inside)
            assert abs(width - inside) <= 1, (path, viewport, width, inside)


def test_delete_all_says_it_once_beside_its_undo_and_the_undo_replaces_it(
    signed_in_page, alice, same_document
):
    """The message was a flash at the top, its Undo far below in the entry list, and after
    the Undo the two messages stood together."""
    you = Actor.for_user(alice)
    for number in range(20):
        memory_upsert(user=alice, key=f"fact:n{number}", value=f"Note {number}", actor=you)
    page = signed_in_page(alice, viewport=PHONE)
    page.goto("/memories/delete-all/")
    page.get_by_label("Type “delete all” to confirm").fill("delete all")
    page.get_by_role("button", name="Delete all 20 memories").click()
    expect(page).to_have_url(re.compile(r"/\?tab=entries&batch=[0-9a-f-]+#bulk-result$"))
    assert Memory.objects.filter(user=alice).count() == 0

    result = page.locator("#bulk-result")
    message = result.get_by_text("Deleted 20 memories together")
    undo = result.get_by_role("button", name="Undo that")
    # Said once, where the page opens, with its Undo beside it.
    expect(message).to_be_in_viewport()
    expect(undo).to_be_in_viewport()
    expect(page.get_by_text(re.compile("Deleted"))).to_have_count(1)
    expect(page.locator("#flash .flash")).to_have_count(0)
    said, button = message.bounding_box(), undo.bounding_box()
    assert said is not None
    assert button is not None
    assert abs(button["y"] - said["y"]) < 80, (said, button)
    assert_fits(page, PHONE["width"])

    with same_document(page):
        undo.click()
        expect(result).to_have_text("20 put back.")
    # Replaced, not stacked: nothing on the page says they are deleted any more.
    expect(page.get_by_text(re.compile("Deleted"))).to_have_count(0)
    expect(page.locator("#flash .flash")).to_have_count(0)
    expect(page.locator("#entry-list li.entry")).to_have_count(20)
    assert Memory.objects.filter(user=alice).count() == 20


def test_the_entries_tab_names_each_search_landmark(signed_in_page, alice):
    """Two unnamed role="search" landmarks on one page (axe landmark-unique)."""
    memory_upsert(user=alice, key="fact:tea", value="Drinks tea", actor=Actor.for_user(alice))
    page = signed_in_page(alice, viewport=PHONE)
    page.goto("/?tab=entries")
    searches = page.get_by_role("search")
    expect(searches).to_have_count(2)
    expect(page.get_by_role("search", name="Site search")).to_be_visible()
    expect(page.get_by_role("search", name="Filter entries")).to_be_visible()


SWAGGER_DARK = "rgb(28, 32, 34)"  # html.dark-mode's background in Swagger UI's own styles
SWAGGER_LIGHT = "rgb(250, 250, 250)"  # drf-spectacular's page
BODY_BACKGROUND = "getComputedStyle(document.body).backgroundColor"
TITLE_COLOUR = "getComputedStyle(document.querySelector('.swagger-ui .info .title')).color"


def open_docs(page: Page) -> None:
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Mnemo agent API")


def test_the_api_docs_follow_the_systems_theme(new_page):
    dark = new_page(color_scheme="dark")
    open_docs(dark)
    expect(dark.locator("html")).to_have_class(re.compile(r"\bdark-mode\b"))
    assert dark.evaluate(BODY_BACKGROUND) == SWAGGER_DARK
    assert dark.evaluate(TITLE_COLOUR) == "rgb(210, 214, 215)"  # light text on dark

    light = new_page(color_scheme="light")
    open_docs(light)
    expect(light.locator("html")).not_to_have_class(re.compile(r"\bdark-mode\b"))
    assert light.evaluate(BODY_BACKGROUND) == SWAGGER_LIGHT

    # The system changes its mind: the open page follows.
    light.emulate_media(color_scheme="dark")
    expect(light.locator("html")).to_have_class(re.compile(r"\bdark-mode\b"))
    assert light.evaluate(BODY_BACKGROUND) == SWAGGER_DARK


def test_the_api_docs_follow_the_theme_chosen_on_the_site(new_page):
    page = new_page(color_scheme="light")
    page.goto("/login/")
    page.get_by_role("combobox", name="Theme").select_option("dark")
    open_docs(page)
    expect(page.locator("html")).to_have_class(re.compile(r"\bdark-mode\b"))
    assert page.evaluate(BODY_BACKGROUND) == SWAGGER_DARK

    # Chosen again in another tab: the docs follow at once.
    other = page.context.new_page()
    other.goto("/login/")
    other.get_by_role("combobox", name="Theme").select_option("light")
    expect(page.locator("html")).not_to_have_class(re.compile(r"\bdark-mode\b"))
    assert page.evaluate(BODY_BACKGROUND) == SWAGGER_LIGHT

    # Light chosen on a dark system wins there too.
    dark_system = new_page(color_scheme="dark")
    dark_system.goto("/login/")
    dark_system.get_by_role("combobox", name="Theme").select_option("light")
    open_docs(dark_system)
    expect(dark_system.locator("html")).not_to_have_class(re.compile(r"\bdark-mode\b"))
    assert dark_system.evaluate(BODY_BACKGROUND) == SWAGGER_LIGHT
