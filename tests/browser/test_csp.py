"""Every page works under the Content-Security-Policy: chromium reports no violation.

A violation shows up twice: as a `securitypolicyviolation` event in the page (reported here
through an exposed function, which the policy cannot block) and as a console message
("Refused to …" / "… Content Security Policy …"). Either fails the test, and so does a page
served without the policy.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, Response, expect

from activity.actors import Actor
from context.services import document_write
from memory.services import memory_upsert
from profiles.services import agent_get_or_create, token_create
from work.services import work_create

pytestmark = pytest.mark.django_db(transaction=True)

REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.__mnemoCspViolation(
    `${event.violatedDirective} blocked ${event.blockedURI || "inline"} ` +
    `at ${event.sourceFile || document.location.href}:${event.lineNumber}`
  );
});
"""


class Violations:
    """What the browser refused, from events and console messages, page by page."""

    def __init__(self, page: Page) -> None:
        self.found: list[str] = []
        page.expose_function(
            "__mnemoCspViolation", lambda text: self.found.append(f"{page.url}: {text}")
        )
        page.add_init_script(REPORT_VIOLATIONS)
        page.on("console", self._console)

    def _console(self, message) -> None:
        text = message.text
        if "Content Security Policy" in text or "Refused to" in text:
            self.found.append(f"console: {text}")


@pytest.fixture
def staff_user(alice):
    alice.is_staff = alice.is_superuser = True
    alice.save(update_fields=["is_staff", "is_superuser"])
    return alice


@pytest.fixture
def memory_everywhere(staff_user) -> dict[str, object]:
    """One of each thing the pages show: a memory with history, a document, a work item,
    an agent with a token and the activity all of that logged."""
    actor = Actor.for_user(staff_user)
    memory_upsert(user=staff_user, key="fact:tea", value="green tea", actor=actor)
    written = memory_upsert(user=staff_user, key="fact:tea", value="black tea", actor=actor)
    document_write(user=staff_user, path="notes/plan.md", content="# Plan\n\n- tea", actor=actor)
    agent = agent_get_or_create(user=staff_user, name="assistant")
    token_create(agent=agent, label="laptop")
    item = work_create(user=staff_user, title="Weekly report", body="# Done\n\n- tea", actor=actor)
    return {"memory": written.memory, "work": item}


def visit(page: Page, path: str) -> Response:
    response = page.goto(path)
    assert response is not None, path
    assert response.status == 200, f"{path}: {response.status}"
    page.wait_for_load_state("load")
    return response


def assert_policy(response: Response, path: str) -> str:
    policy = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in policy, f"{path} was served without the policy: {policy!r}"
    assert "unsafe-inline" not in policy.split("style-src")[0], policy
    return policy


def test_every_page_runs_under_the_content_security_policy(
    signed_in_page, new_page, staff_user, memory_everywhere, htmx_settled
):
    signed_out = new_page()
    found = Violations(signed_out)
    assert_policy(visit(signed_out, "/login/"), "/login/")
    expect(signed_out.get_by_role("button", name="Sign in")).to_be_visible()

    page = signed_in_page(staff_user)
    violations = Violations(page)
    memory = memory_everywhere["memory"]
    work = memory_everywhere["work"]
    paths = [
        "/",
        "/?tab=profile",
        "/?tab=styles",
        "/?tab=entries",
        "/documents/",
        "/documents/mine/file/notes/plan.md",
        "/search/?q=tea",
        "/activity/",
        "/work/",
        f"/work/{work.pk}/",
        "/agents/",
        "/settings/",
        f"/memories/{memory.pk}/history/",
        "/deleted/",
        "/admin/",
    ]
    for path in paths:
        assert_policy(visit(page, path), path)
        if not path.startswith("/admin/"):
            htmx_settled(page)

    # The Context page's tabs swap in with htmx, and its search answers as you type.
    visit(page, "/")
    page.get_by_role("link", name="Entries").click()
    expect(page.get_by_role("link", name="Entries")).to_have_attribute("aria-current", "page")
    expect(page.locator("#entry-list")).to_contain_text("fact:tea")
    page.get_by_role("link", name="Styles").click()
    expect(page.get_by_role("link", name="Styles")).to_have_attribute("aria-current", "page")
    htmx_settled(page)

    # Swagger UI has its own, relaxed style policy; scripts stay 'self' only.
    docs = visit(page, "/api/docs/")
    docs_policy = docs.headers.get("content-security-policy", "")
    assert "script-src 'self';" in docs_policy + ";", docs_policy
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Mnemo agent API")
    expect(page.locator(".opblock").first).to_be_visible()

    assert not found.found, found.found
    assert not violations.found, "\n".join(violations.found)
