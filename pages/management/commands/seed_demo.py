"""Create the demo account and a few example memories and work items (embedded mode only,
idempotent). It writes to several layers (memory, work, profiles), so it lives in pages/, the
top app (docs/architecture.md)."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from activity.actors import Actor
from memory.models import Memory
from memory.services import memory_upsert
from profiles.services import agent_get_or_create, profile_for_user
from work.models import WorkItem
from work.services import work_create

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "mnemo-demo"  # noqa: S105 - a published demo login, embedded mode only

DEMO_MEMORIES = [
    ("name", "Kevin", None),
    ("role", "Head of Growth", None),
    ("company", "YARNNN", None),
    ("timezone", "Asia/Singapore", None),
    ("tone_slack", "casual", None),
    ("verbosity_slack", "brief", None),
    ("verbosity_gmail", "detailed", None),
    ("instruction:tldr-first", "Always include a TL;DR at the top.", None),
    ("preference:bullets", "Bullet points in reports.", None),
    ("fact:weekly-review", "Runs the growth review every Monday at 10:00.", 0.8),
]

DEMO_REPORT = """# Weekly growth notes

- Sign-ups up **12%** week over week.
- The onboarding email test ends on Friday.
"""


class Command(BaseCommand):
    help = "Create the demo account with example memories (embedded mode only; safe to rerun)."

    def handle(self, *args: object, **options: object) -> None:
        if not settings.EMBEDDED:
            self.stdout.write("Not in embedded mode (DATABASE_URL is set): no demo account.")
            return
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=DEMO_USERNAME)
            if created:
                user.set_password(DEMO_PASSWORD)
                user.save()
            profile_for_user(user)
            agent = agent_get_or_create(user=user, name="assistant", description="Demo agent")
            existing = set(Memory.objects.filter(user=user).values_list("key", flat=True))
            added = 0
            for key, value, confidence in DEMO_MEMORIES:
                if key in existing:
                    continue
                actor = Actor.for_agent(agent) if confidence else Actor.for_user(user)
                memory_upsert(user=user, key=key, value=value, actor=actor, confidence=confidence)
                added += 1
            if not WorkItem.objects.filter(user=user).exists():
                work_create(
                    user=user,
                    title="Weekly growth notes",
                    body=DEMO_REPORT,
                    actor=Actor.for_agent(agent),
                )
        self.stdout.write(f"Demo account '{DEMO_USERNAME}' ready ({added} memories added).")
