"""The webhook URL when it is saved (profiles/services.py webhook_url_clean): Settings and the
admin refuse a URL lib/outbound.py refuses, say why, and change nothing; the admin's
MNEMO_OUTBOUND_ALLOW lets an inside receiver through."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from lib.outbound import CREDENTIALS_MESSAGE, INSIDE_MESSAGE
from profiles.models import Profile
from profiles.services import profile_for_user, profile_set_heartbeat
from tests.lib.test_outbound import SSRF_URLS

pytestmark = pytest.mark.django_db

ISSUE_URLS = SSRF_URLS[:7]  # the list in issue 25, in its order


def save(client, url: str):
    return client.post(
        "/settings/",
        {"setting": "heartbeat", "heartbeat_enabled": "on", "notify_webhook_url": url},
    )


def heartbeat_of(user) -> tuple:
    profile = Profile.objects.filter(user=user).first()
    if profile is None:
        return (False, "", "")
    return (profile.heartbeat_enabled, profile.notify_webhook_url, profile.webhook_secret)


@pytest.mark.parametrize("url", ISSUE_URLS)
def test_settings_refuse_the_issues_urls_and_say_why(client, alice, url):
    client.force_login(alice)

    response = save(client, url)

    html = response.content.decode()
    assert response.status_code == 400
    message = CREDENTIALS_MESSAGE if "@" in url else INSIDE_MESSAGE
    assert f'<p class="field-error" id="webhook-error">{escape(message)}</p>' in html
    assert heartbeat_of(alice) == (False, "", "")


def test_settings_refuse_a_url_already_saved_being_replaced(client, alice):
    profile_set_heartbeat(user=alice, enabled=True, webhook_url="https://hooks.example.com/m")
    before = heartbeat_of(alice)
    client.force_login(alice)
    for url in ISSUE_URLS:
        assert save(client, url).status_code == 400
    assert heartbeat_of(alice) == before


def test_the_admin_allows_inside_receivers_by_setting(client, alice, settings):
    settings.MNEMO_OUTBOUND_ALLOW = "10.0.0.0/8, 127.0.0.1:5432"
    client.force_login(alice)
    for url in ("http://10.0.0.1/", "http://127.0.0.1:5432/"):
        assert save(client, url).status_code in (200, 302)  # the new secret shown, or saved
        assert heartbeat_of(alice)[1] == url
    # Not more than it lists.
    for url in ("http://192.168.0.1/", "http://127.0.0.1:5433/", "http://169.254.169.254/"):
        assert save(client, url).status_code == 400
    assert heartbeat_of(alice)[1] == "http://127.0.0.1:5432/"


def _admin_form(profile: Profile, **changes) -> dict:
    data = {
        "user": profile.user_id,
        "token_budget": profile.token_budget,
        "profile_budget": profile.profile_budget,
        "llm_daily_tokens": profile.llm_daily_tokens,
        "notify_webhook_url": profile.notify_webhook_url,
        "webhook_secret": profile.webhook_secret,
    }
    data.update(changes)
    return data


def test_the_django_admin_refuses_an_inside_webhook_too(client, superuser, alice):
    profile = profile_for_user(alice)
    client.force_login(superuser)
    url = reverse("admin:profiles_profile_change", args=[profile.pk])

    for inside in ISSUE_URLS:
        response = client.post(url, _admin_form(profile, notify_webhook_url=inside))
        assert response.status_code == 200  # the form again, with its error
        assert response.context["adminform"].form.errors["notify_webhook_url"]
    assert heartbeat_of(alice) == (False, "", "")

    public = "https://hooks.example.com/m"
    response = client.post(url, _admin_form(profile, notify_webhook_url=public))
    assert response.status_code == 302
    assert heartbeat_of(alice)[1] == public
