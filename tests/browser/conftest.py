"""Real-browser tests: Playwright drives Debian's chromium against pytest-django's live server.

Playwright's own browser download is not used; `make test` installs the `chromium` package
(`make browser`). Without it these tests fail, they never skip.

Fixtures:
- `browser`: one headless chromium for the whole package.
- `new_page(**context_options)`: a page in a fresh browser context (own cookies, 10 s timeouts).
- `page`: `new_page()` with the defaults.
- `signed_in_page(user, **context_options)`: a fresh page signed in through the real /login/ form.
- `url(name, *args)`: the live server's absolute URL for a URL name.
- `artifacts`: the git-ignored test-artifacts/ directory.
- `same_document(page)`: a context manager asserting its block caused no navigation or reload.
- `htmx_settled(page)`: waits until htmx has no request in flight.

A failing test leaves a screenshot of each of its pages in `test-artifacts/` (git-ignored), and a
test whose page threw an uncaught JavaScript error fails.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

CHROMIUM = Path(os.environ.get("MNEMO_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    # The machines have no outside network: keep chromium from trying to reach it.
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
PASSWORD = "correct-horse-battery"  # every user from the root conftest's factories
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

expect.set_options(timeout=TIMEOUT_MS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Keep each phase's report on the item, so fixtures can tell that the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.is_file() or not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"The browser tests need Debian's chromium at {CHROMIUM}, which is missing. "
            "Install it with `make browser` (`make test` does that first), or set "
            "MNEMO_CHROMIUM to another chromium binary.",
            pytrace=False,
        )
    # Playwright's sync API keeps an asyncio loop running in this thread, and Django refuses
    # ORM calls from a thread with a running loop. The tests' own ORM calls are plain
    # synchronous calls, so allow them for as long as Playwright runs (this package only).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def new_page(browser: Browser, live_server, request: pytest.FixtureRequest) -> Iterator[Callable]:
    """Open pages in fresh browser contexts; screenshot them if the test fails."""
    contexts: list[BrowserContext] = []
    page_errors: list[str] = []

    def open_page(**context_options: Any) -> Page:
        context = browser.new_context(base_url=live_server.url, **context_options)
        context.set_default_timeout(TIMEOUT_MS)
        context.set_default_navigation_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: page_errors.append(f"{page.url}: {error}"))
        return page

    yield open_page

    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid.split("::", 1)[-1])
        pages = [page for context in contexts for page in context.pages]
        for number, page in enumerate(pages, start=1):
            suffix = f"-{number}" if len(pages) > 1 else ""
            try:
                page.screenshot(path=ARTIFACTS / f"failed-{name}{suffix}.png", full_page=True)
            except Exception as error:  # a screenshot must not hide the failure
                print(f"Could not screenshot {page.url}: {error}")
    for context in contexts:
        context.close()
    assert not page_errors, f"Uncaught JavaScript errors: {page_errors}"


@pytest.fixture
def page(new_page: Callable[..., Page]) -> Page:
    return new_page()


@pytest.fixture
def signed_in_page(new_page: Callable[..., Page]) -> Callable[..., Page]:
    """signed_in_page(alice) -> a new page signed in as alice, on the Context page."""

    def sign_in(user, **context_options: Any) -> Page:
        page = new_page(**context_options)
        page.goto("/login/")
        page.get_by_label("Username").fill(user.get_username())
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()
        # The button shows before the page's scripts have run: a click on an htmx link
        # before htmx has processed the page would navigate instead of swapping.
        page.wait_for_load_state("load")
        return page

    return sign_in


@pytest.fixture
def url(live_server) -> Callable[..., str]:
    """url("pages:memory_history", pk) -> the live server's absolute URL for that page."""

    def absolute(name: str, *args: object) -> str:
        return live_server.url + reverse(name, args=args)

    return absolute


@pytest.fixture
def artifacts() -> Path:
    """The git-ignored test-artifacts/ directory, for screenshots worth keeping."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@contextmanager
def _same_document(page: Page) -> Iterator[None]:
    page.evaluate("window.__mnemoMarker = 1")
    yield
    assert page.evaluate("window.__mnemoMarker") == 1, "the page navigated or reloaded"


@pytest.fixture
def same_document() -> Callable[[Page], Any]:
    """`with same_document(page): ...` asserts the block's changes were htmx swaps in the same
    document: a JavaScript marker set before the block is still there after it."""
    return _same_document


def _htmx_settled(page: Page) -> None:
    # htmx marks each element with a request in flight with the class htmx-request.
    page.wait_for_function("() => window.htmx && !document.querySelector('.htmx-request')")


@pytest.fixture
def htmx_settled() -> Callable[[Page], None]:
    """htmx_settled(page) waits until htmx has no request in flight."""
    return _htmx_settled
