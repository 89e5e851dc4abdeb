"""Every page, in both themes, at a desktop's and a phone's width (issue 18, points 2 and 3;
issue 30, point 5).

One walk per theme (the system's setting, emulated) visits every page a person can reach,
seeded so each shows real content (and an agent with the longest names there are), and on
each page, at 1280, 390 and 360 px wide:

- axe-core (bundled by the axe-playwright-python package, so nothing is fetched at test time)
  finds no violation of any impact (best practices such as landmark-unique, region and
  heading-order too); its report is printed when it does;
- every form control is drawn at 3:1 against what is behind it (its border or its
  background), and the keyboard's focus ring too (WCAG 1.4.11, which axe does not check);
- landmarks of one role have names that tell them apart, and each search landmark has one
  (axe 4.12 skips a `<form role="search">` without a name);
- at the phone widths the page does not scroll sideways, a table whose header row is hidden
  shows each cell's column name, a row of tabs stays on one line and placeholders fit their
  boxes;
- a full-page screenshot is saved as test-artifacts/screenshots/<page>-<width>-<theme>.png.

All problems of the walk are gathered and reported together, page by page. The theme switch
(light, dark, system), its storage and its no-flash start have their own tests below.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.base import AXE_SCRIPT
from django.conf import settings as django_settings
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from playwright.sync_api import Page, Response, expect

from activity import events
from activity.actors import Actor
from config import urls as site_urls
from context.services import DocumentReviewRequired, document_delete, document_write
from llm.models import CallOutcome, LLMCall, Turn, TurnStatus
from memory.outcomes import ReviewRequired
from memory.services import memory_delete, memory_upsert
from portability.exporting import export_job_create, export_job_run
from portability.importing import import_job_create, import_job_run
from profiles.services import agent_get_or_create, token_create, token_revoke
from tests.browser.conftest import ARTIFACTS
from work.models import WorkKind
from work.services import work_create, work_delete

# Error pages that no page of Mnemo's links to on purpose are reached through these views,
# answered by the site's own handlers (config/urls.py) like any other error.


def _forbidden(request: HttpRequest) -> HttpResponse:
    raise PermissionDenied


def _broken(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a page that fails, for the 500 page")


def _database_down(request: HttpRequest) -> HttpResponse:
    raise OperationalError("connection refused")


urlpatterns = [
    path("test-errors/403/", _forbidden),
    path("test-errors/500/", _broken),
    path("test-errors/503/", _database_down),
    *site_urls.urlpatterns,
]
handler400 = site_urls.handler400
handler403 = site_urls.handler403
handler404 = site_urls.handler404
handler500 = site_urls.handler500

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls(__name__)]

WIDTHS = (1280, 390, 360)
PHONES = (390, 360)
HEIGHT = 900
SCREENSHOTS = ARTIFACTS / "screenshots"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
AXE_OPTIONS = {"resultTypes": ["violations"]}

# A colour in the page's computed style, as [r, g, b, alpha], and the page's own checks.
CHECKS = """
() => {
  const parse = (text) => {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return [0, 0, 0, 0];
    const parts = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
  };
  const over = (top, below) => {
    const a = top[3];
    return [0, 1, 2].map((i) => top[i] * a + below[i] * (1 - a)).concat([1]);
  };
  const behind = (element) => {
    const layers = [];
    for (let node = element; node; node = node.parentElement) {
      const colour = parse(getComputedStyle(node).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] === 1) break;
    }
    let colour = [255, 255, 255, 1];
    if (!layers.length || layers[layers.length - 1][3] < 1) {
      colour = parse(getComputedStyle(document.documentElement).backgroundColor);
      if (colour[3] === 0) colour = [255, 255, 255, 1];
    }
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return colour;
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const visible = (element) => {
    const box = element.getBoundingClientRect();
    const style = getComputedStyle(element);
    return box.width > 0 && box.height > 0 && style.visibility !== "hidden";
  };
  const describe = (element) => {
    const id = element.id ? "#" + element.id : "";
    const name = element.getAttribute("name") ? `[name=${element.getAttribute("name")}]` : "";
    const text = (element.textContent || "").trim().slice(0, 30);
    return `${element.tagName.toLowerCase()}${id}${name}${text ? ` "${text}"` : ""}`;
  };
  const problems = [];

  // Controls: their border, or their background, stands out at 3:1 from what is behind.
  const controls = document.querySelectorAll(
    "input:not([type=hidden]):not([type=checkbox]):not([type=radio]), select, textarea, " +
      "button:not(.link), a.button"
  );
  for (const control of controls) {
    if (!visible(control)) continue;
    const style = getComputedStyle(control);
    const around = behind(control.parentElement || document.documentElement);
    const own = over(parse(style.backgroundColor), around);
    let best = ratio(own, around);
    if (parseFloat(style.borderTopWidth) > 0 && style.borderTopStyle !== "none") {
      best = Math.max(best, ratio(over(parse(style.borderTopColor), around), around));
    }
    if (best < 3) problems.push(`control at ${best.toFixed(2)}:1 (< 3:1): ${describe(control)}`);
  }

  // Placeholders fit their boxes.
  const canvas = document.createElement("canvas").getContext("2d");
  for (const input of document.querySelectorAll("input[placeholder], textarea[placeholder]")) {
    if (!visible(input)) continue;
    const style = getComputedStyle(input);
    canvas.font = `${style.fontStyle} ${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const width = canvas.measureText(input.placeholder).width;
    if (input.tagName === "INPUT" && width > room + 0.5) {
      const sizes = `${Math.round(width)} px in ${Math.round(room)} px`;
      problems.push(`placeholder cut (${sizes}): ${describe(input)}`);
    }
  }

  // A table whose header row is hidden shows each cell's column name before it.
  for (const table of document.querySelectorAll("main table")) {
    if (!visible(table)) continue;
    const head = table.tHead;
    if (!head || getComputedStyle(head).display !== "none") continue;
    // A column whose header is only for screen readers (a row's buttons) needs no label.
    const names = Array.from(head.rows[0].cells).map((cell) => {
      const hidden = cell.querySelector(".sr-only");
      return hidden && hidden.textContent === cell.textContent ? "" : cell.textContent.trim();
    });
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        Array.from(row.cells).forEach((cell, index) => {
          if (!names[index] || !cell.textContent.trim() || !visible(cell)) return;
          const shown = getComputedStyle(cell, "::before").content;
          if (shown !== JSON.stringify(names[index])) {
            const name = `its column name "${names[index]}"`;
            problems.push(`table cell without ${name} (shows ${shown}): ${describe(cell)}`);
          }
        });
      }
    }
  }

  // A row of tabs stays on one line.
  for (const tabs of document.querySelectorAll(".tabs")) {
    const tops = new Set(
      Array.from(tabs.children)
        .filter(visible)
        .map((tab) => Math.round(tab.getBoundingClientRect().top))
    );
    if (tops.size > 1) problems.push(`the tabs wrap onto ${tops.size} lines: ${describe(tabs)}`);
  }

  // Landmarks of one role are told apart by their names; a search landmark has one.
  const landmarkRoles = {
    NAV: "navigation", ASIDE: "complementary", SECTION: "region", FORM: "form",
  };
  const nameOf = (element) => {
    const ids = element.getAttribute("aria-labelledby");
    if (ids) {
      return ids.split(/\\s+/).map((id) => document.getElementById(id)?.textContent || "")
        .join(" ").trim();
    }
    return (element.getAttribute("aria-label") || "").trim();
  };
  const landmarks = new Set();
  const landmarkSelector = "[role=search], [role=navigation], [role=region], [role=form], " +
    "[role=complementary], nav, aside, section[aria-label], section[aria-labelledby], " +
    "form[aria-label], form[aria-labelledby]";
  for (const element of document.querySelectorAll(landmarkSelector)) {
    if (!visible(element)) continue;
    const role = element.getAttribute("role") || landmarkRoles[element.tagName];
    const name = nameOf(element);
    if (role === "search" && !name) {
      problems.push(`a search landmark without a name: ${describe(element)}`);
    }
    const key = `${role} "${name}"`;
    if (landmarks.has(key)) problems.push(`two landmarks are ${key}: ${describe(element)}`);
    landmarks.add(key);
  }

  // Every page names its icon (so browsers do not ask for a missing /favicon.ico).
  if (!document.querySelector("link[rel=icon]")) problems.push("no <link rel=icon>");

  return {
    problems,
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    theme: getComputedStyle(document.documentElement).colorScheme,
  };
}
"""

# The keyboard's focus ring on the element Tab reaches first (the skip link), at 3:1.
FOCUS_RING = """
() => {
  const element = document.activeElement;
  const style = getComputedStyle(element);
  return {
    tag: element.tagName.toLowerCase(),
    text: (element.textContent || "").trim(),
    outlineStyle: style.outlineStyle,
    outlineWidth: parseFloat(style.outlineWidth),
    outlineColor: style.outlineColor,
    background: getComputedStyle(element.parentElement).backgroundColor,
    pageBackground: getComputedStyle(document.documentElement).backgroundColor,
  };
}
"""

# The elements that stick out past the right edge, to name in a report.
WIDER_THAN = """
width => Array.from(document.querySelectorAll("body *"))
  .filter((element) => element.getBoundingClientRect().right > width + 0.5)
  .slice(0, 6)
  .map((element) => element.tagName.toLowerCase() + (element.id ? "#" + element.id : "") +
       (typeof element.className === "string" && element.className
         ? "." + element.className.trim().split(/ +/).join(".") : ""))
"""


@dataclass
class Visit:
    """One page of the walk: its name (for the screenshots), where it is, what it answers."""

    name: str
    path: str
    status: int = 200
    # What the page must show, so a walk that landed elsewhere (sign-in, an empty list) fails.
    shows: str = ""
    setup: Callable[[Page], None] | None = None


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.problems.append(f"{where}: {what}")


def seed(user, settings) -> dict[str, Any]:
    """Something on every page: memories with history, a deleted one and a proposal, documents
    with versions (the user's and an agent's) and a deleted one, work with a markdown table, a
    deleted item and a heartbeat finding, an agent with a live and a revoked token, a processed
    turn with its observations and LLM calls, a finished import and export, and the activity
    all of that logged."""
    settings.MNEMO_LLM_MODEL = "gpt-4o-mini"
    settings.MNEMO_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    me = Actor.for_user(user)
    agent = agent_get_or_create(user=user, name="assistant", display_name="Desk assistant")
    by_agent = Actor.for_agent(agent)

    memory_upsert(user=user, key="name", value="Alice Example", actor=me)
    memory_upsert(user=user, key="timezone", value="Europe/Paris", actor=me)
    memory_upsert(user=user, key="tone_slack", value="Casual and brief.", actor=me)
    memory_upsert(user=user, key="tone_email", value="Formal, with a greeting.", actor=me)
    memory_upsert(user=user, key="fact:tea", value="Drinks green tea", actor=me, tags=["food"])
    tea = memory_upsert(user=user, key="fact:tea", value="Drinks black tea", actor=me).memory
    memory_upsert(
        user=user, key="preference:bullets", value="Bullet points in reports", actor=by_agent
    )
    # Near it, and adds a word: stored beside it, and the two look alike (issue 26).
    memory_upsert(
        user=user,
        key="preference:short-bullets",
        value="Bullet points in short reports",
        actor=by_agent,
    )
    memory_upsert(user=user, key="fact:phone", value="An old phone number", actor=me)
    memory_delete(user=user, key="fact:phone", actor=me)
    with pytest.raises(ReviewRequired):
        memory_upsert(user=user, key="fact:tea", value="Drinks oolong tea", actor=by_agent)
    # An agent's change to an identity file waits in the inbox too.
    document_write(user=user, path="SOUL.md", content="Be calm.", actor=me)
    with pytest.raises(DocumentReviewRequired):
        document_write(user=user, path="SOUL.md", content="Be calm.\nTea first.", actor=by_agent)

    plan = "# Plan\n\n- tea with the team\n- a longer line about the quarterly report\n"
    document_write(user=user, path="notes/plan.md", content=plan, actor=me)
    document_write(user=user, path="notes/plan.md", content=plan + "- and cake\n", actor=me)
    document_write(
        user=user, agent=agent, path="journal.md", content="# Journal\n\nTea noted.", actor=by_agent
    )
    document_write(user=user, path="drafts/old-plan.md", content="An old plan.", actor=me)
    document_delete(user=user, path="drafts/old-plan.md", actor=me)
    plan_document = user.documents.get(agent=None, path="notes/plan.md")
    versions = list(plan_document.versions.order_by("id").values_list("id", flat=True))

    report = work_create(
        user=user,
        title="Weekly report on the tea budget",
        body=(
            "# Done\n\n| Item | Cups | Note |\n|---|---|---|\n| green tea | 12 | the usual |\n"
            "| black tea | 30 | a long week of meetings and more meetings |\n\n"
            "```\nsummary --all --format=wide --include-everything-we-know-about-tea\n```\n"
        ),
        actor=by_agent,
        agent=agent,
        tags=["weekly"],
    )
    work_create(
        user=user,
        title="The kettle is late again",
        body="Checked the checklist: the kettle order has not shipped.",
        actor=Actor.system(),
        kind=WorkKind.HEARTBEAT,
    )

    draft = work_create(user=user, title="A draft nobody wanted", body="Draft.", actor=by_agent)
    work_delete(user=user, pk=draft.pk, actor=me)

    token_create(agent=agent, label="laptop")
    token_revoke(token=token_create(agent=agent, label="old phone").token)

    # An agent with the longest names there are, each one word: every page that names it
    # still fits a phone (issue 30: a long agent name made /agents/ 898 px wide).
    long_named = agent_get_or_create(
        user=user,
        name=("researchassistant" * 4)[:64],
        display_name="Forschungsassistentin" * 4 + "Quartalsplanung"[:16],
        description="Notes" * 40,
    )
    token_create(agent=long_named, label="Laptop" * 16)
    memory_upsert(
        user=user,
        key="fact:budget-review",
        value="Reviews the quarterly budget on Fridays",
        actor=Actor.for_agent(long_named),
    )

    turn = Turn.objects.create(
        user=user,
        agent=agent,
        user_message="Remember that I prefer tabs over spaces.",
        assistant_reply="Noted: tabs.",
        tool_outputs=[{"name": "pytest", "text": "12 passed"}],
        status=TurnStatus.DONE,
        outcome={
            "profile": {"status": "noop", "attempts": 1, "prompt_tokens": 900},
            "capture": {
                "method": "llm",
                "failed": False,
                "observations": [
                    {
                        "kind": "preference",
                        "text": "Prefers tabs over spaces",
                        "status": "created",
                        "key": "preference:tabs",
                    },
                    {
                        "kind": "fact",
                        "text": "Drinks black tea",
                        "status": "duplicate",
                        "key": "fact:tea",
                    },
                ],
            },
            "prompt_tokens": 900,
            "completion_tokens": 40,
        },
    )
    LLMCall.objects.create(
        user=user,
        turn=turn,
        purpose="consolidation",
        model="gpt-4o-mini",
        prompt_tokens=900,
        completion_tokens=40,
        latency_ms=640,
        outcome=CallOutcome.OK,
    )
    events.turn_reported(user=user, actor=by_agent, turn_id=turn.pk, learning=True)
    events.turn_processed(
        user=user,
        turn_id=turn.pk,
        outcome={"profile": "noop", "captured": 1, "duplicates": 1, "proposals": 0},
    )

    job = import_job_create(
        user=user,
        kind="chatgpt",
        mode="merge",
        upload=SimpleUploadedFile("memories.txt", b"Likes jazz\nLives in Lyon\n"),
    )
    import_job_run(job.pk)
    export = export_job_create(user=user)
    export_job_run(export.pk)

    history = tea.history.order_by("id").first()
    return {
        "tea": tea,
        "history": history,
        "versions": versions,
        "work": report,
        "turn": turn,
        "job": job,
        "export": export,
    }


def signed_in_visits(seeded: dict[str, Any]) -> list[Visit]:
    tea, work, turn, job = seeded["tea"], seeded["work"], seeded["turn"], seeded["job"]
    first_version = seeded["versions"][0]
    return [
        Visit("context", "/", shows="What your assistant knows about you"),
        Visit("context-profile", "/?tab=profile", shows="Alice Example"),
        Visit("context-styles", "/?tab=styles", shows="Casual and brief."),
        Visit("context-entries", "/?tab=entries", shows="Drinks black tea"),
        Visit("search", "/search/?q=tea", shows="Drinks black tea"),
        Visit("documents", "/documents/", shows="notes/"),
        Visit("document", "/documents/mine/file/notes/plan.md", shows="tea with the team"),
        Visit("document-edit", "/documents/mine/edit/notes/plan.md", shows="plan.md"),
        Visit("document-new", "/documents/new/", shows="Path"),
        Visit("document-folder", "/documents/mine/folder/notes", shows="plan.md"),
        Visit("document-history", "/documents/mine/history/notes/plan.md", shows="plan.md"),
        Visit("document-version", f"/documents/versions/{first_version}/", shows="tea"),
        Visit("document-agent", "/documents/agents/assistant/file/journal.md", shows="Tea noted"),
        Visit("documents-today", "/documents/today/", shows="Today"),
        Visit("documents-deleted", "/documents/deleted/", shows="drafts/old-plan.md"),
        Visit("entry-edit", f"/memories/{tea.pk}/edit/", shows="Editing"),
        Visit("memory-history", f"/memories/{tea.pk}/history/", shows="Drinks green tea"),
        Visit("history-entry", f"/history/{seeded['history'].pk}/", shows="Drinks green tea"),
        Visit("deleted", "/deleted/", shows="An old phone number"),
        Visit("inbox", "/context/inbox/", shows="Tea first."),
        Visit("look-alike", "/context/inbox/look-alike/", shows="Bullet points in short reports"),
        Visit("activity", "/activity/", shows="fact:tea"),
        Visit("turns", "/turns/", shows="1 observation captured"),
        Visit("turn", f"/turns/{turn.pk}/", shows="Prefers tabs over spaces"),
        Visit("work", "/work/", shows="Weekly report on the tea budget"),
        Visit("work-findings", "/work/?kind=heartbeat", shows="The kettle is late again"),
        Visit("work-detail", f"/work/{work.pk}/", shows="a long week of meetings"),
        Visit("work-deleted", "/work/deleted/", shows="A draft nobody wanted"),
        Visit("agents", "/agents/", shows="old phone"),
        Visit("settings", "/settings/", shows="gpt-4o-mini"),
        Visit("password-change", "/settings/password/", shows="Change your password"),
        Visit("import", "/settings/import/", shows="memories.txt"),
        Visit("import-job", f"/settings/import/{job.pk}/", shows="preference:likes-jazz"),
        Visit("export-job", f"/settings/export/{seeded['export'].pk}/", shows="Download mnemo"),
        Visit("not-found", "/no-such-page/", status=404, shows="Page not found"),
        Visit("forbidden", "/test-errors/403/", status=403, shows="Not allowed"),
        Visit("server-error", "/test-errors/500/", status=500, shows="Something went wrong"),
        Visit("unavailable", "/test-errors/503/", status=503, shows="Mnemo is unavailable"),
    ]


def signed_out_visits(user) -> list[Visit]:
    user.refresh_from_db()  # a reset token is made from the last sign-in's time
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    reset = f"/password-reset/{uid}/{default_token_generator.make_token(user)}/"
    return [
        Visit("sign-in", "/login/", shows="Sign in"),
        Visit("sign-up", "/signup/", shows="Create an account"),
        Visit("password-reset", "/password-reset/", shows="Reset your password"),
        Visit("password-reset-sent", "/password-reset/sent/", shows="password"),
        Visit("password-reset-link", reset, shows="Confirm new password"),
        Visit(
            "password-reset-bad-link",
            f"/password-reset/{uid}/not-a-token/",
            shows="This reset link is not valid",
        ),
        Visit(
            "password-reset-done",
            "/password-reset/done/",
            shows="Your password is set",
        ),
    ]


def lock_out(page: Page) -> None:
    """Wrong passwords until sign-in locks: the locked-out page (last: it locks this address)."""
    for attempt in range(1, django_settings.AXES_FAILURE_LIMIT + 1):
        page.get_by_label("Username").fill("mallory")
        page.get_by_label("Password").fill("wrong-horse")
        page.get_by_role("button", name="Sign in").click()
        if attempt < django_settings.AXES_FAILURE_LIMIT:
            expect(page.get_by_role("alert")).to_contain_text("do not match")
    expect(page.get_by_role("heading", name="Sign-in is locked")).to_be_visible()


LOCKED_OUT = Visit("sign-in-locked", "/login/", shows="Sign-in is locked", setup=lock_out)


def settle(page: Page) -> None:
    page.wait_for_load_state("load")
    page.wait_for_function("() => !window.htmx || !document.querySelector('.htmx-request')")


def check_axe(page: Page, where: str, findings: Findings) -> None:
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE_SCRIPT)  # evaluated by the driver: the page's CSP does not apply
    results = page.evaluate("options => axe.run(document, options)", AXE_OPTIONS)
    for violation in results["violations"]:
        nodes = "\n".join(
            f"      {', '.join(map(str, node['target']))}: {node.get('failureSummary', '')}"
            for node in violation["nodes"][:8]
        )
        findings.add(
            where,
            f"axe {violation['id']} ({violation['impact']}): {violation['help']}\n{nodes}",
        )


def check_page(page: Page, where: str, width: int, findings: Findings) -> None:
    result = page.evaluate(CHECKS)
    for problem in result["problems"]:
        findings.add(where, problem)
    if width in PHONES and result["scrollWidth"] > width:
        wide = page.evaluate(WIDER_THAN, width)
        findings.add(
            where, f"scrolls sideways: {result['scrollWidth']} px wide at {width} px ({wide})"
        )


def check_focus_ring(page: Page, where: str, findings: Findings) -> None:
    page.keyboard.press("Tab")
    ring = page.evaluate(FOCUS_RING)
    if ring["outlineStyle"] == "none" or ring["outlineWidth"] < 2:
        findings.add(where, f"no focus ring on {ring['tag']} {ring['text']!r}: {ring}")
        return
    ratio = contrast(ring["outlineColor"], ring["background"], ring["pageBackground"])
    if ratio < 3:
        findings.add(where, f"focus ring at {ratio:.2f}:1 (< 3:1): {ring}")


def _rgb(text: str, below: tuple[float, ...] = (255, 255, 255)) -> tuple[float, ...]:
    numbers = [float(n) for n in re.findall(r"[\d.]+", text)]
    alpha = numbers[3] if len(numbers) > 3 else 1.0
    return tuple(c * alpha + b * (1 - alpha) for c, b in zip(numbers[:3], below, strict=True))


def contrast(colour: str, background: str, page_background: str) -> float:
    behind = _rgb(background, _rgb(page_background))

    def luminance(rgb: tuple[float, ...]) -> float:
        linear = [
            v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
            for v in (c / 255 for c in rgb)
        ]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]

    light, dark = sorted([luminance(_rgb(colour, behind)), luminance(behind)], reverse=True)
    return (light + 0.05) / (dark + 0.05)


def walk(page: Page, visits: list[Visit], theme: str, findings: Findings) -> None:
    def failed_resource(response: Response) -> None:
        # A stylesheet, script or icon that does not load is a problem of the page that asked.
        if response.status >= 400 and response.request.resource_type != "document":
            findings.add(page.url, f"{response.url} answered {response.status}")

    page.on("response", failed_resource)
    for visit in visits:
        page.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})
        if visit.setup is not None:
            page.goto(visit.path)
            visit.setup(page)
        else:
            response = page.goto(visit.path)
            assert response is not None, visit.path
            if response.status != visit.status:
                findings.add(visit.name, f"answered {response.status}, not {visit.status}")
                continue
        settle(page)
        if visit.shows not in page.inner_text("body"):
            findings.add(visit.name, f"does not show {visit.shows!r}: is it the page meant?")
            continue
        for width in WIDTHS:
            where = f"{visit.name} at {width} px ({theme})"
            page.set_viewport_size({"width": width, "height": HEIGHT})
            page.wait_for_function("width => window.innerWidth === width", arg=width)
            check_axe(page, where, findings)
            check_page(page, where, width, findings)
            screenshot = SCREENSHOTS / f"{visit.name}-{width}-{theme}.png"
            page.screenshot(path=screenshot, full_page=True)
            findings.screenshots.append(screenshot)
        check_focus_ring(page, f"{visit.name} ({theme})", findings)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_page_is_accessible_and_fits_a_phone(
    theme, new_page, signed_in_page, alice, settings
):
    settings.MNEMO_OPEN_SIGNUP = True
    seeded = seed(alice, settings)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob(f"*-{theme}.png"):
        old.unlink()
    findings = Findings()

    page = signed_in_page(alice, color_scheme=theme)
    assert page.evaluate("getComputedStyle(document.documentElement).colorScheme") == theme
    visits = signed_in_visits(seeded)
    walk(page, visits, theme, findings)

    signed_out = new_page(color_scheme=theme)
    signed_out_pages = [*signed_out_visits(alice), LOCKED_OUT]
    walk(signed_out, signed_out_pages, theme, findings)

    pages = len(visits) + len(signed_out_pages)
    assert not findings.problems, (
        f"{len(findings.problems)} problems on {pages} pages:\n\n" + "\n\n".join(findings.problems)
    )
    assert len(findings.screenshots) == pages * len(WIDTHS)
    for screenshot in findings.screenshots:
        data = screenshot.read_bytes()
        assert data.startswith(PNG_SIGNATURE), screenshot
        assert len(data) > 1000, screenshot


# The theme switch -----------------------------------------------------------------------------

LIGHT_BACKGROUND = "rgb(246, 247, 249)"  # --bg of each theme (static/css/mnemo.css)
DARK_BACKGROUND = "rgb(18, 20, 25)"
PAGE_BACKGROUND = "getComputedStyle(document.documentElement).backgroundColor"
STORED = "localStorage.getItem('mnemo-theme')"
# Run before any of the page's own scripts: which theme <html> has when <body> first exists,
# that is before anything of the page can be drawn.
THEME_AT_FIRST_PAINT = """
new MutationObserver((records, observer) => {
  if (!document.body) return;
  window.__themeAtBody = document.documentElement.getAttribute("data-theme") || "system";
  observer.disconnect();
}).observe(document, {childList: true, subtree: true});
"""


def test_the_theme_switch_overrides_the_system_and_is_kept(signed_in_page, alice):
    page = signed_in_page(alice, color_scheme="dark")
    page.context.add_init_script(THEME_AT_FIRST_PAINT)
    switch = page.get_by_role("combobox", name="Theme")
    expect(switch).to_be_visible()
    expect(switch).to_have_value("system")
    assert page.evaluate(PAGE_BACKGROUND) == DARK_BACKGROUND  # the system's setting

    # With the keyboard: focus the switch, choose the next option, Light.
    switch.focus()
    page.keyboard.press("ArrowDown")
    expect(switch).to_have_value("light")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    assert page.evaluate(PAGE_BACKGROUND) == LIGHT_BACKGROUND
    assert page.evaluate(STORED) == "light"

    # Kept on the next page, and in place before the page is drawn: no flash of dark.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    expect(page.get_by_role("heading", name="Settings", exact=True)).to_be_visible()
    assert page.evaluate("window.__themeAtBody") == "light"
    assert page.evaluate(PAGE_BACKGROUND) == LIGHT_BACKGROUND
    expect(page.get_by_role("combobox", name="Theme")).to_have_value("light")

    # Another tab of the same browser follows a change made in this one.
    other = page.context.new_page()
    other.goto("/activity/")
    expect(other.locator("html")).to_have_attribute("data-theme", "light")
    page.get_by_role("combobox", name="Theme").select_option("dark")
    expect(other.locator("html")).to_have_attribute("data-theme", "dark")
    expect(other.get_by_role("combobox", name="Theme")).to_have_value("dark")
    assert other.evaluate(PAGE_BACKGROUND) == DARK_BACKGROUND

    # System again: nothing stored, the page follows the system's setting.
    page.get_by_role("combobox", name="Theme").select_option("system")
    expect(page.locator("html")).not_to_have_attribute("data-theme", re.compile("."))
    assert page.evaluate(STORED) is None
    page.emulate_media(color_scheme="light")
    assert page.evaluate(PAGE_BACKGROUND) == LIGHT_BACKGROUND
    page.emulate_media(color_scheme="dark")
    assert page.evaluate(PAGE_BACKGROUND) == DARK_BACKGROUND


# Every colour token of the page, by name, as <html> computes them.
TOKENS = """
() => {
  const names = new Set();
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      for (const inner of rule.cssRules ? [...rule.cssRules] : [rule]) {
        if (!inner.style) continue;
        for (const name of inner.style) if (name.startsWith("--")) names.add(name);
      }
    }
  }
  const style = getComputedStyle(document.documentElement);
  return Object.fromEntries([...names].sort().map((name) => [name, style.getPropertyValue(name)]));
}
"""


def test_a_chosen_theme_is_the_same_as_the_systems(new_page):
    """The walk above checks the themes as the system picks them; the switch's choice must
    give exactly the same colours (static/css/mnemo.css writes the dark ones twice)."""
    tokens = {}
    for system, chosen in (("dark", None), ("light", "dark"), ("light", None), ("dark", "light")):
        page = new_page(color_scheme=system)
        page.goto("/login/")
        if chosen:
            page.get_by_role("combobox", name="Theme").select_option(chosen)
        tokens[system, chosen] = page.evaluate(TOKENS)
    assert len(tokens["dark", None]) >= 18
    assert tokens["light", "dark"] == tokens["dark", None]
    assert tokens["dark", "light"] == tokens["light", None]
    assert tokens["dark", None] != tokens["light", None]


def test_without_javascript_the_page_follows_the_system_and_hides_the_switch(new_page):
    for scheme, background in (("dark", DARK_BACKGROUND), ("light", LIGHT_BACKGROUND)):
        page = new_page(java_script_enabled=False, color_scheme=scheme)
        page.goto("/login/")
        expect(page.get_by_role("button", name="Sign in")).to_be_visible()
        assert page.evaluate(PAGE_BACKGROUND) == background
        expect(page.locator("[data-theme-control]")).to_be_hidden()


def test_the_error_pages_have_the_switch_and_the_navigation(new_page):
    page = new_page(color_scheme="light")
    response = page.goto("/no-such-page/")
    assert response is not None
    assert response.status == 404
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link")).to_have_text(
        ["Context", "Inbox", "Activity", "Turns", "Work", "Agents", "Settings"]
    )
    page.get_by_role("combobox", name="Theme").select_option("dark")
    assert page.evaluate(PAGE_BACKGROUND) == DARK_BACKGROUND
    nav.get_by_role("link", name="Work").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()  # signed out: sign-in
    assert page.evaluate(PAGE_BACKGROUND) == DARK_BACKGROUND


def test_the_icon_is_served_and_favicon_ico_leads_to_it(page):
    page.goto("/login/")
    icon = page.locator("link[rel=icon]")
    expect(icon).to_have_attribute("type", "image/svg+xml")
    linked = page.request.get(icon.get_attribute("href"))
    assert linked.status == 200
    assert linked.headers["content-type"].startswith("image/svg+xml")
    assert b"<svg" in linked.body()

    habit = page.request.get("/favicon.ico", max_redirects=0)
    assert habit.status == 301
    assert habit.headers["location"] == icon.get_attribute("href")
    followed = page.request.get("/favicon.ico")
    assert followed.status == 200
    assert followed.body() == linked.body()
