"""Other scripts in a real browser: entries added in Chinese, Russian and Arabic with no key
typed are kept under a key made from the text; Arabic documents and memories read right to
left with their breadcrumb in order; an agent named in Cyrillic is shown by that name on
the Agents page, in Activity and in the Inbox."""

import pytest
from playwright.sync_api import expect

from activity.actors import Actor
from context.services import document_write
from memory.entries import derive_slug
from memory.models import Memory
from memory.outcomes import ReviewRequired
from memory.services import memory_upsert
from profiles.services import agent_create

pytestmark = pytest.mark.django_db(transaction=True)

ENTRIES = ["我喜欢喝绿茶", "Я люблю зелёный чай", "أحب الشاي الأخضر"]
ARABIC = "أحب الشاي الأخضر في الصباح"


def direction(locator) -> str:
    return locator.evaluate("element => getComputedStyle(element).direction")


def text_box(locator) -> dict[str, float]:
    """Where the element's text is drawn (not its box, which spans the line either way)."""
    return locator.evaluate(
        """element => {
            const range = document.createRange();
            range.selectNodeContents(element);
            const text = range.getBoundingClientRect();
            const box = element.getBoundingClientRect();
            return {left: text.left - box.left, right: box.right - text.right};
        }"""
    )


def test_entries_in_other_scripts_are_added_with_no_key_typed(signed_in_page, alice, same_document):
    page = signed_in_page(alice)

    with same_document(page):
        page.get_by_role("link", name="Entries").click()
        form = page.locator("#entry-add")
        for text in ENTRIES:
            form.get_by_label("Kind", exact=True).select_option("preference")
            form.get_by_label("Text", exact=True).fill(text)
            form.get_by_role("button", name="Add entry").click()
            expect(form.get_by_role("status")).to_contain_text(text)
            expect(form.locator(".field-error")).to_have_count(0)

    assert dict(Memory.objects.filter(user=alice).values_list("value", "key")) == {
        text: f"preference:{derive_slug(text)}" for text in ENTRIES
    }
    assert derive_slug(ENTRIES[0]) == "wo-xi-huan-he-lu-cha"
    page.reload()
    listed = page.locator("ul.entries .value")
    expect(listed).to_have_count(3)
    for text in ENTRIES:
        expect(page.locator("ul.entries .value", has_text=text)).to_have_count(1)


def test_arabic_reads_right_to_left_and_its_breadcrumb_in_order(signed_in_page, alice, url):
    document_write(
        user=alice,
        path="ملاحظات/شاي.md",
        content=f"# الشاي\n\n{ARABIC}\n\nAn English line stays left to right.\n",
        actor=Actor.for_user(alice),
    )
    memory_upsert(user=alice, key="preference:tea", value=ARABIC, actor=Actor.for_user(alice))
    page = signed_in_page(alice)
    page.set_viewport_size({"width": 1200, "height": 900})

    page.goto(url("pages:document", "mine", "ملاحظات/شاي.md"))
    body = page.locator("#doc-body")
    arabic = body.locator("p", has_text=ARABIC)
    english = body.locator("p", has_text="An English line")
    assert direction(body.locator("h1")) == direction(arabic) == "rtl"
    assert direction(english) == "ltr"
    # Drawn against the right edge, and the English line against the left.
    assert text_box(arabic)["right"] < 2 < text_box(arabic)["left"]
    assert text_box(english)["left"] < 2 < text_box(english)["right"]
    expect(page.locator("#doc-panel-title")).to_have_text("شاي.md")
    assert direction(page.locator("#doc-panel-title")) == "rtl"

    # The breadcrumb reads scope / folder / file in the page's order: each crumb is set
    # apart, so the two Arabic names do not run together into one right-to-left phrase.
    crumbs = page.locator(".crumbs")
    scope = crumbs.locator(".badge").bounding_box()
    folder = crumbs.get_by_role("link", name="ملاحظات").bounding_box()
    leaf = crumbs.locator(".crumb-leaf").bounding_box()
    assert scope["x"] < folder["x"] < leaf["x"]
    expect(crumbs.locator(".crumb-leaf")).to_have_text("شاي.md")

    page.goto("/?tab=entries")
    value = page.locator("ul.entries .value", has_text=ARABIC)
    assert direction(value) == "rtl"
    assert text_box(value)["right"] < 2 < text_box(value)["left"]


def test_an_agent_named_in_cyrillic_is_shown_by_that_name(signed_in_page, alice):
    agent = agent_create(user=alice, display_name="Асистент")
    assert agent.name == "asistent"
    memory_upsert(user=alice, key="fact:city", value="Lives in Lisbon", actor=Actor.for_user(alice))
    memory_upsert(
        user=alice, key="fact:tea", value="Drinks green tea", actor=Actor.for_agent(agent)
    )
    # An agent's change to what the user stated waits in the Inbox.
    with pytest.raises(ReviewRequired):
        memory_upsert(
            user=alice, key="fact:city", value="Lives in Porto", actor=Actor.for_agent(agent)
        )
    page = signed_in_page(alice)

    page.goto("/agents/")
    card = page.locator(f"#agent-{agent.pk}")
    expect(card.get_by_role("heading", level=2)).to_have_text("agent Асистент")
    expect(card).to_contain_text("In paths and tokens: asistent")

    page.goto("/activity/")
    expect(page.locator("td[data-label='Who'] .badge.agent").first).to_have_text("Асистент")
    expect(page.locator("td[data-label='Who']", has_text="asistent")).to_have_count(0)

    page.goto("/context/inbox/")
    expect(page.locator(".proposal .badge.agent")).to_have_text("Асистент")

    # Renamed on the Agents page, every page follows; the name in tokens stays.
    page.goto("/agents/")
    card.locator("summary", has_text="Rename").click()
    card.get_by_label("Name", exact=True).fill("Помощник")
    card.get_by_role("button", name="Save name").click()
    expect(card.get_by_role("status")).to_have_text("Renamed: pages now call it “Помощник”.")
    expect(card.get_by_role("heading", level=2)).to_have_text("agent Помощник")
    agent.refresh_from_db()
    assert (agent.name, agent.display_name) == ("asistent", "Помощник")
    page.goto("/context/inbox/")
    expect(page.locator(".proposal .badge.agent")).to_have_text("Помощник")
