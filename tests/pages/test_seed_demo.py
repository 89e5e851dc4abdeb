"""`manage.py seed_demo` (pages/management/commands/seed_demo.py): the embedded demo account,
its memories and its report, written through the layers' services; safe to rerun."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from activity.models import ActivityEvent
from memory.models import Memory
from pages.management.commands.seed_demo import DEMO_MEMORIES, DEMO_PASSWORD, DEMO_USERNAME
from work.models import WorkItem

pytestmark = pytest.mark.django_db


def seed() -> str:
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_the_demo_account_is_seeded_once(settings):
    settings.EMBEDDED = True

    assert "10 memories added" in seed()
    assert "0 memories added" in seed()

    user = get_user_model().objects.get(username=DEMO_USERNAME)
    assert user.check_password(DEMO_PASSWORD)
    assert set(Memory.objects.filter(user=user).values_list("key", flat=True)) == {
        key for key, _, _ in DEMO_MEMORIES
    }
    assert list(WorkItem.objects.filter(user=user).values_list("title", flat=True)) == [
        "Weekly growth notes"
    ]
    # Written through the services: each write left its activity event.
    assert ActivityEvent.objects.filter(user=user).count() >= len(DEMO_MEMORIES) + 1


def test_no_demo_account_outside_embedded_mode(settings):
    settings.EMBEDDED = False

    assert "no demo account" in seed()
    assert not get_user_model().objects.filter(username=DEMO_USERNAME).exists()
