"""Accounts in a real browser: the sign-in lockout page and changing a password."""

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

NEW_PASSWORD = "a-new-lantern-4711"


def submit_sign_in(page, username, password):
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_too_many_wrong_passwords_lock_sign_in_with_a_message(page, alice, url, settings):
    page.goto(url("login"))
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        submit_sign_in(page, "alice", "wrong-horse")
        expect(page.get_by_role("alert")).to_have_text(
            "That username and password do not match. Try again."
        )

    submit_sign_in(page, "alice", "wrong-horse")

    expect(page.get_by_role("heading", name="Sign-in is locked")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text(
        "Too many failed sign-ins from this address. Sign-in is locked; "
        "try again in about 15 minutes"
    )

    # Even the right password is refused while locked.
    page.get_by_role("link", name="Back to sign in").click()
    submit_sign_in(page, "alice", PASSWORD)
    expect(page.get_by_role("heading", name="Sign-in is locked")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)


def test_change_password_from_settings_without_javascript(signed_in_page, alice, url):
    page = signed_in_page(alice, java_script_enabled=False)

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Settings").click()
    page.get_by_role("link", name="Change your password").click()
    expect(page.get_by_role("heading", name="Change your password")).to_be_visible()
    page.get_by_label("Current password").fill(PASSWORD)
    page.get_by_label("New password", exact=True).fill(NEW_PASSWORD)
    page.get_by_label("Confirm new password").fill(NEW_PASSWORD)
    page.get_by_role("button", name="Change password").click()

    expect(page).to_have_url(url("pages:settings"))
    expect(page.get_by_role("status").filter(has_text="Your password was changed")).to_have_text(
        "Your password was changed. You are still signed in here; other sessions were signed out."
    )
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    submit_sign_in(page, "alice", NEW_PASSWORD)
    expect(page).to_have_url(url("pages:context"))
    expect(page.get_by_role("navigation", name="Main")).to_contain_text("alice")
