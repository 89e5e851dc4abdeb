import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.django_db(transaction=True)


def test_sign_in_through_the_login_form_lands_on_the_context_page(signed_in_page, alice, url):
    page = signed_in_page(alice)

    expect(page).to_have_url(url("pages:context"))
    expect(page.get_by_role("navigation", name="Main")).to_contain_text("alice")


def test_wrong_password_is_refused(page, alice, url):
    page.goto(url("pages:context"))
    expect(page).to_have_url(url("login") + "?next=/")

    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("wrong-horse")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("alert")).to_have_text(
        "That username and password do not match. Try again."
    )
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
