"""Accounts: sign-in throttling (django-axes), password change, password reset by email."""

import ast
import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from axes.models import AccessAttempt, AccessLog
from django.core import mail
from django.core.management import call_command
from django.test import RequestFactory
from django.utils import timezone

from profiles.accounts import client_address
from tests.settings_process import load_settings

PASSWORD = "correct-horse-battery"  # every user from tests.factories
NEW_PASSWORD = "a-new-lantern-4711"
LOCMEM = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
NOT_SET_UP = (
    "Password reset by email is not set up on this server; ask your administrator, who can "
    "run <code>manage.py changepassword &lt;username&gt;</code>."
)
MISMATCH = "That username and password do not match. Try again."
LOCKED_BOTH = "Too many failed sign-ins for this account and from this address."
LOCKED_ACCOUNT = "Too many failed sign-ins for this account, from many addresses."
LOCKED_ADDRESS = "Too many failed sign-ins from this address."
TOO_MANY_RESETS = (
    "Too many reset requests from this address or for this email address. "
    "Try again in about 15 minutes."
)
RESET_LINK = re.compile(r"http://testserver(/password-reset/[^/\s]+/[^/\s]+/)")
CSRF = re.compile(r'"X-CSRFToken": "[^"]*"|name="csrfmiddlewaretoken" value="[^"]*"')


@pytest.fixture
def limit(settings):
    return settings.AXES_FAILURE_LIMIT


@pytest.fixture
def mailer(settings):
    """A configured mailer: Django's in-memory one (mail.outbox)."""
    settings.MAILERS = LOCMEM


def sign_in(client, username, password, *, path="/login/", address="127.0.0.1", **meta):
    return client.post(
        path, {"username": username, "password": password}, REMOTE_ADDR=address, **meta
    )


def signed_in_as(client):
    return client.session.get("_auth_user_id")


def fail(client, username, times, **kwargs):
    for _ in range(times):
        response = sign_in(client, username, "wrong-horse", **kwargs)
    return response


def age_attempts(by):
    AccessAttempt.objects.update(attempt_time=AccessAttempt.objects.get().attempt_time - by)


# Sign-in throttling ---------------------------------------------------------------------

ATTACKER = "203.0.113.66"
OWNER = "198.51.100.7"


def failures(**filters):
    return sum(
        AccessAttempt.objects.filter(**filters).values_list("failures_since_start", flat=True)
    )


def test_failures_below_the_limit_are_answered_as_wrong_passwords(client, alice, limit):
    for _ in range(limit - 1):
        response = sign_in(client, "alice", "wrong-horse")
        assert response.status_code == 200
        assert MISMATCH in response.content.decode()

    assert AccessAttempt.objects.get(username="alice").failures_since_start == limit - 1
    assert sign_in(client, "alice", PASSWORD)["Location"] == "/"
    assert signed_in_as(client) == str(alice.pk)


def test_the_limit_locks_the_address_and_even_the_right_password_is_refused(client, alice, limit):
    response = fail(client, "alice", limit)

    assert response.status_code == 429
    html = response.content.decode()
    assert '<h1 id="locked-title">Sign-in is locked</h1>' in html
    assert LOCKED_ADDRESS in html
    assert "try again in about 15 minutes" in html
    assert "from this address; from another, sign-in still works" in html
    assert 890 <= int(response["Retry-After"]) <= 900
    assert response["Cache-Control"] == "no-store"

    response = sign_in(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert LOCKED_ADDRESS in response.content.decode()
    assert signed_in_as(client) is None
    # A try while locked out is not counted, so the lock still ends when first announced.
    assert AccessAttempt.objects.get().failures_since_start == limit


def test_an_attackers_address_is_locked_and_the_owner_signs_in_from_another(client, alice, limit):
    """Issue 25: five wrong passwords from anywhere no longer lock the owner out."""
    locked = fail(client, "alice", limit, address=ATTACKER)
    assert locked.status_code == 429
    assert LOCKED_ADDRESS in locked.content.decode()

    # The attacker's right password, from the locked address: refused unchecked, not counted.
    response = sign_in(client, "alice", PASSWORD, address=ATTACKER)
    assert response.status_code == 429
    assert LOCKED_ADDRESS in response.content.decode()
    assert signed_in_as(client) is None
    assert failures(username="alice") == limit

    # The owner, from an address that has not failed, with the right password.
    assert sign_in(client, "alice", PASSWORD, address=OWNER)["Location"] == "/"
    assert signed_in_as(client) == str(alice.pk)
    client.post("/logout/")

    # Signing in cleared nothing of the attacker's: their address stays locked.
    assert failures(username="alice", ip_address=ATTACKER) == limit
    assert sign_in(client, "alice", PASSWORD, address=ATTACKER).status_code == 429
    assert signed_in_as(client) is None


def test_failures_from_one_address_lock_it_across_usernames(client, alice, limit):
    for number in range(limit):
        sign_in(client, f"guess{number}", "wrong-horse", address="10.0.0.1")

    response = sign_in(client, "alice", PASSWORD, address="10.0.0.1")
    assert response.status_code == 429
    assert LOCKED_ADDRESS in response.content.decode()
    assert signed_in_as(client) is None

    # The account itself has no failures: from another address it signs in.
    assert sign_in(client, "alice", PASSWORD, address="10.0.0.2")["Location"] == "/"
    assert signed_in_as(client) == str(alice.pk)


def test_guessing_spread_over_many_addresses_is_bounded_per_account(client, alice, limit, settings):
    ceiling = settings.MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT
    assert ceiling == 5 * limit == 25  # the default
    # The owner signed in from home once: an address the account is known at.
    assert sign_in(client, "alice", PASSWORD, address="192.0.2.10")["Location"] == "/"
    client.post("/logout/")

    # Each attacking address stays under the address limit.
    answers = []
    for number in range(ceiling):
        address = f"203.0.113.{number // (limit - 1)}"
        answers.append(sign_in(client, "alice", "wrong-horse", address=address))

    assert [answer.status_code for answer in answers] == [200] * (ceiling - 1) + [429]
    assert LOCKED_ACCOUNT in answers[-1].content.decode()
    assert 890 <= int(answers[-1]["Retry-After"]) <= 900
    assert failures(username="alice") == ceiling

    # More addresses get no more guesses: refused unchecked, right password or not.
    for number in range(10):
        response = sign_in(client, "alice", PASSWORD, address=f"198.51.100.{number}")
        assert response.status_code == 429
        html = response.content.decode()
        assert LOCKED_ACCOUNT in html
        assert "from a network you have signed in from in the last 90 days" in html
        assert signed_in_as(client) is None
    assert failures(username="alice") == ceiling

    # Other accounts are not held, from those same new addresses.
    assert sign_in(client, "bob", PASSWORD, address="198.51.100.1").status_code == 200

    # The owner, from the address the account is known at, signs in.
    assert sign_in(client, "alice", PASSWORD, address="192.0.2.10")["Location"] == "/"
    assert signed_in_as(client) == str(alice.pk)
    client.post("/logout/")

    # The lock lifts for everyone once the failures are older than the window.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=15, seconds=1))
    assert sign_in(client, "alice", PASSWORD, address="198.51.100.1")["Location"] == "/"


def test_an_address_known_long_ago_is_held_by_the_account_lock(client, alice, settings):
    settings.MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT = 8
    assert sign_in(client, "alice", PASSWORD, address="192.0.2.10")["Location"] == "/"
    client.post("/logout/")
    AccessLog.objects.update(attempt_time=timezone.now() - timedelta(days=91))
    for number in range(8):
        sign_in(client, "alice", "wrong-horse", address=f"203.0.113.{number}")

    response = sign_in(client, "alice", PASSWORD, address="192.0.2.10")

    assert response.status_code == 429
    assert LOCKED_ACCOUNT in response.content.decode()


def test_both_locks_on_one_page(client, alice, limit, settings):
    settings.MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT = limit + 1
    fail(client, "alice", limit, address=ATTACKER)
    fail(client, "alice", 1, address="203.0.113.67")

    response = sign_in(client, "alice", PASSWORD, address=ATTACKER)

    assert response.status_code == 429
    assert LOCKED_BOTH in response.content.decode()


def test_the_lockout_page_under_asgi(async_client, alice, limit):
    """Production serves ASGI, where axes' middleware takes its async path."""
    post = async_to_sync(async_client.post)
    for _ in range(limit):
        response = post("/login/", {"username": "alice", "password": "wrong-horse"})

    assert response.status_code == 429
    assert LOCKED_ADDRESS in response.content.decode()
    assert post("/login/", {"username": "alice", "password": PASSWORD}).status_code == 429


def test_the_admin_login_is_throttled_and_shows_the_lockout_page(client, superuser, limit):
    admin_login = "/admin/login/?next=/admin/"
    response = fail(client, "root", limit - 1, path=admin_login)
    assert response.status_code == 200
    assert "Please enter the correct username and password" in response.content.decode()

    response = fail(client, "root", 1, path=admin_login)
    assert response.status_code == 429
    assert LOCKED_ADDRESS in response.content.decode()
    assert f'<a href="{admin_login}">Back to sign in</a>' in response.content.decode()

    assert sign_in(client, "root", "admin-pass-1", path=admin_login).status_code == 429
    assert sign_in(client, "root", "admin-pass-1").status_code == 429  # the pages' /login/ too
    assert signed_in_as(client) is None


def test_the_admins_owner_signs_in_from_another_address(client, superuser, limit):
    admin_login = "/admin/login/?next=/admin/"
    assert fail(client, "root", limit, path=admin_login, address=ATTACKER).status_code == 429

    response = sign_in(client, "root", "admin-pass-1", path=admin_login, address=OWNER)

    assert response["Location"] == "/admin/"
    assert signed_in_as(client) == str(superuser.pk)


def test_the_lock_expires_by_itself(client, alice, limit):
    fail(client, "alice", limit)

    age_attempts(timedelta(minutes=10))
    response = sign_in(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert "try again in about 5 minutes" in response.content.decode()
    assert 290 <= int(response["Retry-After"]) <= 300

    age_attempts(timedelta(minutes=5, seconds=1))
    assert sign_in(client, "alice", PASSWORD)["Location"] == "/"
    assert signed_in_as(client) == str(alice.pk)


def test_the_lockout_length_follows_the_setting(client, alice, limit, settings):
    settings.AXES_COOLOFF_TIME = timedelta(minutes=60)
    fail(client, "alice", limit)

    age_attempts(timedelta(minutes=30))
    response = sign_in(client, "alice", PASSWORD)
    assert response.status_code == 429
    assert "try again in about 30 minutes" in response.content.decode()


def test_a_successful_sign_in_clears_the_accounts_failures_from_that_address(client, alice, limit):
    fail(client, "alice", limit - 1)
    fail(client, "alice", 2, address=ATTACKER)
    assert sign_in(client, "alice", PASSWORD)["Location"] == "/"
    assert not AccessAttempt.objects.filter(username="alice", ip_address="127.0.0.1").exists()
    assert failures(username="alice", ip_address=ATTACKER) == 2
    client.post("/logout/")

    response = fail(client, "alice", limit - 1)

    assert response.status_code == 200
    assert sign_in(client, "alice", PASSWORD)["Location"] == "/"


def test_a_successful_sign_in_does_not_clear_the_addresss_failures_at_another_account(
    client, alice, bob, limit
):
    """Else anyone with an account could sign in between guesses at someone else's."""
    fail(client, "bob", limit - 1)
    assert sign_in(client, "alice", PASSWORD)["Location"] == "/"
    client.post("/logout/")

    response = fail(client, "bob", 1)

    assert response.status_code == 429
    assert LOCKED_ADDRESS in response.content.decode()


def test_axes_reset_username_unlocks_an_account(client, alice, limit):
    fail(client, "alice", limit)

    call_command("axes_reset_username", "alice")

    assert sign_in(client, "alice", PASSWORD)["Location"] == "/"


@pytest.fixture
def behind_proxy(settings):
    """MNEMO_BEHIND_PROXY=true as config/accounts.py sets it up, trusting loopback."""
    settings.MNEMO_BEHIND_PROXY = True
    settings.MNEMO_TRUSTED_PROXIES = ["127.0.0.0/8", "::1/128"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.USE_X_FORWARDED_HOST = True
    return settings


def test_behind_a_trusted_proxy_the_address_is_the_one_it_appended(
    client, alice, limit, behind_proxy
):
    for number in range(limit):
        # The client varies what it sends; the proxy (on loopback) appends what it saw.
        sign_in(
            client,
            f"guess{number}",
            "wrong-horse",
            address="127.0.0.1",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{number}, 203.0.113.7",
        )
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.7"}

    locked = sign_in(
        client, "alice", PASSWORD, address="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.7"
    )
    assert locked.status_code == 429
    assert LOCKED_ADDRESS in locked.content.decode()

    other = sign_in(
        client, "alice", PASSWORD, address="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.8"
    )
    assert other["Location"] == "/"
    assert AccessLog.objects.get(username="alice").ip_address == "203.0.113.8"


def test_behind_proxies_the_client_is_the_first_untrusted_entry_from_the_right(
    client, alice, behind_proxy
):
    behind_proxy.MNEMO_TRUSTED_PROXIES = ["10.0.0.0/8"]
    # client -> edge proxy 10.0.0.3 -> inner proxy 10.0.0.2 -> Mnemo
    sign_in(
        client,
        "alice",
        "wrong-horse",
        address="10.0.0.2",
        HTTP_X_FORWARDED_FOR="192.0.2.1, 203.0.113.9, 10.0.0.3",
    )

    assert AccessAttempt.objects.get().ip_address == "203.0.113.9"


def test_behind_a_proxy_an_untrusted_peers_x_forwarded_for_is_ignored(
    client, alice, limit, behind_proxy
):
    """Issue 25: with no proxy in front, a client's own X-Forwarded-For defeated the lock."""
    for number in range(limit):
        response = sign_in(
            client,
            f"guess{number}",
            "wrong-horse",
            address=ATTACKER,
            HTTP_X_FORWARDED_FOR=f"198.51.100.{number}",
        )
    assert response.status_code == 429

    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}
    response = sign_in(
        client, "alice", PASSWORD, address=ATTACKER, HTTP_X_FORWARDED_FOR="198.51.100.99"
    )
    assert response.status_code == 429
    assert signed_in_as(client) is None


def test_without_a_proxy_x_forwarded_for_is_ignored(client, alice, limit, settings):
    settings.MNEMO_BEHIND_PROXY = False
    for number in range(limit):
        sign_in(
            client, f"guess{number}", "wrong-horse", HTTP_X_FORWARDED_FOR=f"198.51.100.{number}"
        )

    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"127.0.0.1"}
    assert sign_in(client, "alice", PASSWORD).status_code == 429


@pytest.mark.parametrize(
    ("remote_addr", "expected"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("2001:DB8:1:2:a:b:c:d", "2001:db8:1:2::"),
        ("2001:db8:1:2::ffff", "2001:db8:1:2::"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("", None),
        ("not-an-address", None),
    ],
)
def test_client_address(remote_addr, expected):
    request = RequestFactory().get("/", REMOTE_ADDR=remote_addr)

    assert client_address(request) == expected


def test_an_ipv6_host_cannot_dodge_the_address_lock_by_changing_address(client, alice, limit):
    for number in range(limit):
        response = sign_in(client, "alice", "wrong-horse", address=f"2001:db8:1:2::{number + 1}")

    assert response.status_code == 429
    other_host_same_network = sign_in(client, "alice", PASSWORD, address="2001:db8:1:2::ff")
    assert other_host_same_network.status_code == 429
    assert sign_in(client, "alice", PASSWORD, address="2001:db8:1:3::1")["Location"] == "/"


def test_force_login_still_works(client, alice):
    """The suite signs in with force_login, which picks the ModelBackend (axes' has no get_user)."""
    client.force_login(alice)

    assert client.get("/settings/").status_code == 200


# Password change ------------------------------------------------------------------------


def test_settings_page_links_to_password_change(client, alice):
    client.force_login(alice)

    html = client.get("/settings/").content.decode()

    assert '<a href="/settings/password/">Change your password</a>' in html


def test_password_change_needs_sign_in(client, db):
    response = client.get("/settings/password/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/settings/password/"


def test_password_change_page_is_a_plain_form(client, alice):
    client.force_login(alice)

    html = client.get("/settings/password/").content.decode()

    assert '<form method="post" action="/settings/password/" novalidate>' in html
    for name, label in [
        ("old_password", "Current password"),
        ("new_password1", "New password"),
        ("new_password2", "Confirm new password"),
    ]:
        assert f'<label for="id_{name}">{label}</label>' in html
        assert f'name="{name}" type="password"' in html


def test_password_change_with_a_wrong_current_password_changes_nothing(client, alice):
    client.force_login(alice)

    response = client.post(
        "/settings/password/",
        {
            "old_password": "wrong-horse",
            "new_password1": NEW_PASSWORD,
            "new_password2": NEW_PASSWORD,
        },
    )

    assert response.status_code == 200
    assert "Your old password was entered incorrectly" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


def test_password_change_with_mismatched_new_passwords_changes_nothing(client, alice):
    client.force_login(alice)

    response = client.post(
        "/settings/password/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": "other-9137"},
    )

    assert response.status_code == 200
    assert "The two password fields" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


def test_password_change_keeps_you_signed_in_and_says_so(client, alice, django_user_model):
    from django.test import Client

    elsewhere = Client()
    elsewhere.force_login(alice)
    client.force_login(alice)

    response = client.post(
        "/settings/password/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )

    assert response.status_code == 302
    assert response["Location"] == "/settings/"
    page = client.get("/settings/")
    assert page.status_code == 200
    assert "Your password was changed. You are still signed in here" in page.content.decode()
    assert django_user_model.objects.get(pk=alice.pk).check_password(NEW_PASSWORD)
    # Other sessions of the account end.
    assert elsewhere.get("/settings/")["Location"] == "/login/?next=/settings/"


# Password reset -------------------------------------------------------------------------


def test_sign_in_page_links_to_password_reset(client, db):
    html = client.get("/login/").content.decode()

    assert '<a href="/password-reset/">Forgot your password?</a>' in html


def test_reset_by_email_end_to_end(client, alice, mailer):
    page = client.get("/password-reset/").content.decode()
    assert 'name="email" type="email"' in page

    response = client.post("/password-reset/", {"email": "ALICE@example.com"})

    assert response.status_code == 302
    assert response["Location"] == "/password-reset/sent/"
    assert "Check your email" in client.get("/password-reset/sent/").content.decode()
    [email] = mail.outbox
    assert email.to == ["alice@example.com"]
    assert email.subject == "Reset your Mnemo password"
    assert 'the Mnemo account "alice" on testserver' in email.body
    link = RESET_LINK.search(email.body).group(1)

    response = client.get(link)
    assert response.status_code == 302
    set_password_url = response["Location"]
    assert set_password_url.endswith("/set-password/")
    assert "Set a new password" in client.get(set_password_url).content.decode()
    response = client.post(
        set_password_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert response["Location"] == "/password-reset/done/"
    assert "Your password is set" in client.get("/password-reset/done/").content.decode()

    assert sign_in(client, "alice", PASSWORD).status_code == 200  # the old one is gone
    assert sign_in(client, "alice", NEW_PASSWORD)["Location"] == "/"
    assert signed_in_as(client) == str(alice.pk)
    client.post("/logout/")
    # The link works once.
    assert "This reset link is not valid" in client.get(link, follow=True).content.decode()


def test_reset_lifts_the_accounts_sign_in_lock(client, alice, mailer, limit):
    fail(client, "alice", limit)
    client.post("/password-reset/", {"email": "alice@example.com"})
    link = RESET_LINK.search(mail.outbox[0].body).group(1)
    set_password_url = client.get(link)["Location"]

    client.post(set_password_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})

    assert sign_in(client, "alice", NEW_PASSWORD)["Location"] == "/"


def test_reset_request_does_not_reveal_whether_an_account_exists(client, alice, mailer):
    known = client.post("/password-reset/", {"email": "alice@example.com"}, follow=True)
    unknown = client.post("/password-reset/", {"email": "nobody@example.com"}, follow=True)

    assert known.redirect_chain == unknown.redirect_chain == [("/password-reset/sent/", 302)]
    assert CSRF.sub("", known.content.decode()) == CSRF.sub("", unknown.content.decode())
    assert [email.to for email in mail.outbox] == [["alice@example.com"]]


def test_reset_requests_are_limited_per_address(client, alice, mailer, limit):
    for number in range(limit):
        email = "alice@example.com" if number == 0 else f"nobody{number}@example.com"
        assert client.post("/password-reset/", {"email": email}).status_code == 302

    known = client.post("/password-reset/", {"email": "alice@example.com"})
    unknown = client.post("/password-reset/", {"email": "nobody@example.com"})

    for response in (known, unknown):
        assert response.status_code == 429
        assert TOO_MANY_RESETS in response.content.decode()
        assert 890 <= int(response["Retry-After"]) <= 900
    assert len(mail.outbox) == 1
    # Another address may still ask.
    other = client.post("/password-reset/", {"email": "alice@example.com"}, REMOTE_ADDR="10.0.0.2")
    assert other.status_code == 302
    assert len(mail.outbox) == 2


def test_reset_requests_are_limited_per_email_address(client, alice, mailer, limit):
    for number in range(limit):
        response = client.post(
            "/password-reset/", {"email": "alice@example.com"}, REMOTE_ADDR=f"10.0.0.{number}"
        )
        assert response.status_code == 302

    response = client.post(
        "/password-reset/", {"email": "Alice@Example.com"}, REMOTE_ADDR="10.0.1.1"
    )

    assert response.status_code == 429
    assert len(mail.outbox) == limit


@pytest.mark.parametrize(
    "mailers",
    [{}, {"default": {"BACKEND": "django.core.mail.backends.dummy.EmailBackend"}}],
    ids=["no-email-url", "dummy-backend"],
)
def test_reset_says_when_email_is_not_set_up(client, alice, settings, mailers):
    settings.MAILERS = mailers

    page = client.get("/password-reset/").content.decode()
    assert NOT_SET_UP in page
    assert 'name="email"' not in page

    response = client.post("/password-reset/", {"email": "alice@example.com"})
    assert response.status_code == 200
    assert NOT_SET_UP in response.content.decode()
    assert mail.outbox == []

    sent = client.get("/password-reset/sent/").content.decode()
    assert NOT_SET_UP in sent
    assert "Check your email" not in sent


def test_the_sign_in_lockout_page_offers_the_reset(client, alice, limit):
    html = fail(client, "alice", limit).content.decode()

    assert '<a href="/password-reset/">Reset it by email</a>' in html


# Settings from the environment ----------------------------------------------------------

ACCOUNT_VARIABLES = (
    "MNEMO_LOGIN_",
    "MNEMO_BEHIND_PROXY",
    "MNEMO_TRUSTED_PROXIES",
    "EMAIL_URL",
    "DEFAULT_FROM_EMAIL",
)


def _load(tmp_path, names, **environment):
    return load_settings(tmp_path, names, drop=ACCOUNT_VARIABLES, **environment)


def test_settings_defaults(tmp_path):
    names = [
        "AXES_FAILURE_LIMIT",
        "AXES_COOLOFF_TIME",
        "MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT",
        "MNEMO_BEHIND_PROXY",
        "MNEMO_TRUSTED_PROXIES",
        "MAILERS",
    ]
    result = _load(tmp_path, names)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["5", "0:15:00", "25", "False", "[]", "{}"]


def test_behind_a_proxy_loopback_is_trusted_by_default(tmp_path):
    result = _load(tmp_path, ["MNEMO_TRUSTED_PROXIES"], MNEMO_BEHIND_PROXY="true")

    assert result.returncode == 0, result.stderr
    assert ast.literal_eval(result.stdout) == ["127.0.0.0/8", "::1/128"]


def test_trusted_proxies_from_the_environment(tmp_path):
    result = _load(
        tmp_path,
        ["MNEMO_TRUSTED_PROXIES"],
        MNEMO_BEHIND_PROXY="true",
        MNEMO_TRUSTED_PROXIES=" 172.16.0.0/12, 192.0.2.7,2001:db8::/32 ",
    )

    assert result.returncode == 0, result.stderr
    assert ast.literal_eval(result.stdout) == ["172.16.0.0/12", "192.0.2.7/32", "2001:db8::/32"]


def test_the_account_limit_follows_the_address_limit(tmp_path):
    result = _load(tmp_path, ["MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT"], MNEMO_LOGIN_FAILURE_LIMIT="3")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["15"]


def test_settings_from_the_environment(tmp_path):
    result = _load(
        tmp_path,
        ["AXES_FAILURE_LIMIT", "AXES_COOLOFF_TIME", "MNEMO_BEHIND_PROXY", "DEFAULT_FROM_EMAIL"],
        MNEMO_LOGIN_FAILURE_LIMIT="3",
        MNEMO_LOGIN_LOCKOUT_MINUTES="60",
        MNEMO_BEHIND_PROXY="true",
        DEFAULT_FROM_EMAIL="mnemo@example.com",
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "1:00:00", "True", "mnemo@example.com"]


@pytest.mark.parametrize(
    ("url", "options"),
    [
        (
            "smtp://user:p%40ss@mail.example.com:587?tls=True",
            {
                "host": "mail.example.com",
                "port": 587,
                "username": "user",
                "password": "p@ss",
                "use_tls": True,
                "use_ssl": False,
            },
        ),
        (
            "smtp://mail.example.com?ssl=true",
            {"host": "mail.example.com", "use_tls": False, "use_ssl": True},
        ),
        (
            "smtp+tls://mail.example.com",
            {"host": "mail.example.com", "use_tls": True, "use_ssl": False},
        ),
        (
            "smtp://mail.example.com?tls=false",
            {"host": "mail.example.com", "use_tls": False, "use_ssl": False},
        ),
    ],
)
def test_email_url_becomes_the_default_mailer(tmp_path, url, options):
    result = _load(tmp_path, ["MAILERS"], EMAIL_URL=url)

    assert result.returncode == 0, result.stderr
    assert ast.literal_eval(result.stdout) == {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": options | {"timeout": 10},
        }
    }


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"MNEMO_LOGIN_FAILURE_LIMIT": "0"}, "MNEMO_LOGIN_FAILURE_LIMIT=0 must be at least 1."),
        (
            {"MNEMO_LOGIN_LOCKOUT_MINUTES": "soon"},
            "MNEMO_LOGIN_LOCKOUT_MINUTES='soon' is not a whole number.",
        ),
        ({"MNEMO_BEHIND_PROXY": "maybe"}, "MNEMO_BEHIND_PROXY='maybe' is not a boolean"),
        (
            {"MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT": "5"},
            "MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT=5 must be at least 6.",
        ),
        (
            {"MNEMO_TRUSTED_PROXIES": "10.0.0.1"},
            "MNEMO_TRUSTED_PROXIES is set but MNEMO_BEHIND_PROXY is not true",
        ),
        (
            {"MNEMO_BEHIND_PROXY": "true", "MNEMO_TRUSTED_PROXIES": "192.168.1.1/24"},
            "MNEMO_TRUSTED_PROXIES: 192.168.1.1/24 has host bits set.",
        ),
        (
            {"MNEMO_BEHIND_PROXY": "true", "MNEMO_TRUSTED_PROXIES": "proxy.internal"},
            "MNEMO_TRUSTED_PROXIES: 'proxy.internal' does not appear to be an IPv4 or IPv6",
        ),
        ({"EMAIL_URL": "smtp://u:s3cret@h?tls=maybe"}, "EMAIL_URL: tls='maybe' is not a boolean"),
        (
            {"EMAIL_URL": "smtp://u:s3cret@h?tls=true&ssl=true"},
            "EMAIL_URL: use tls or ssl, not both.",
        ),
        ({"EMAIL_URL": "smtp://u:s3cret@h?starttls=1"}, "EMAIL_URL: unknown option 'starttls'"),
        ({"EMAIL_URL": "ftp://u:s3cret@h"}, "EMAIL_URL: Invalid email schema ftp."),
    ],
)
def test_bad_account_settings_stop_the_process_with_a_message(tmp_path, environment, message):
    result = _load(tmp_path, ["MAILERS"], **environment)

    assert result.returncode != 0
    assert message in result.stderr
    assert "s3cret" not in result.stderr
