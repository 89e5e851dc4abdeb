"""An import's profile.json goes through the same webhook check as Settings
(portability/applying.py _import_settings → profiles/services.py profile_set_heartbeat):
a URL inside the network is refused with the reason and no setting of it changes."""

from __future__ import annotations

import json

import pytest

from lib.outbound import CREDENTIALS_MESSAGE, INSIDE_MESSAGE
from portability import format as fmt
from portability.models import ImportStatus
from profiles.models import Profile
from profiles.services import profile_update
from tests.lib.test_outbound import SSRF_URLS
from tests.portability.test_import import make_archive, run_import

pytestmark = pytest.mark.django_db

ISSUE_URLS = SSRF_URLS[:7]  # the list in issue 25, in its order


def profile_json(url: str) -> bytes:
    return json.dumps(
        {"token_budget": 3000, "heartbeat_enabled": True, "notify_webhook_url": url}
    ).encode()


@pytest.mark.parametrize("url", ISSUE_URLS)
def test_an_imported_inside_webhook_is_refused_and_no_setting_changes(alice, url):
    profile_update(user=alice, token_budget=2000)

    job = run_import(alice, make_archive({fmt.PROFILE: profile_json(url)}))

    assert job.status == ImportStatus.DONE, job.error
    refused = [(i["section"], i["reason"]) for i in job.items if i["outcome"] == "refused"]
    message = CREDENTIALS_MESSAGE if "@" in url else INSIDE_MESSAGE
    assert refused == [("settings", message)]
    profile = Profile.objects.get(user=alice)
    assert (profile.token_budget, profile.heartbeat_enabled, profile.notify_webhook_url) == (
        2000,
        False,
        "",
    )


def test_an_imported_webhook_the_admin_allows_is_set(alice, settings):
    settings.MNEMO_OUTBOUND_ALLOW = "10.0.0.0/8"

    job = run_import(alice, make_archive({fmt.PROFILE: profile_json("http://10.0.0.1/hook")}))

    assert job.status == ImportStatus.DONE, job.error
    profile = Profile.objects.get(user=alice)
    assert (profile.heartbeat_enabled, profile.notify_webhook_url) == (
        True,
        "http://10.0.0.1/hook",
    )
