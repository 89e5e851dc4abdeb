from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.urls import reverse

MAX_TITLE_LENGTH = 200
MAX_BODY_LENGTH = 100_000  # characters of Markdown: a long report, not a data dump
MAX_TAGS = 10
MAX_TAG_LENGTH = 40


class WorkKind(models.TextChoices):
    REPORT = "report", "Report"
    DRAFT = "draft", "Draft"
    SUMMARY = "summary", "Summary"
    HEARTBEAT = "heartbeat", "Heartbeat finding"
    OTHER = "other", "Other"


class WorkStatus(models.TextChoices):
    IN_PROGRESS = "in_progress", "In progress"
    DONE = "done", "Done"
    ARCHIVED = "archived", "Archived"


class WorkItemQuerySet(models.QuerySet["WorkItem"]):
    def live(self) -> WorkItemQuerySet:
        """Items not deleted: what the Work pages, the tools and export see."""
        return self.filter(deleted_at__isnull=True)

    def deleted(self) -> WorkItemQuerySet:
        """Items in Recently deleted: deleted, restorable."""
        return self.filter(deleted_at__isnull=False)


class WorkItem(models.Model):
    """Something the assistant produced for the user, as markdown.

    Deleting one keeps the row with `deleted_at` set (work/services.py `work_delete`), so it
    can be restored as it was; every reader but Recently deleted takes `.live()` items.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="work_items"
    )
    agent = models.ForeignKey(
        "profiles.Agent",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="work_items",
        help_text="The agent that produced it, if any.",
    )
    title = models.CharField(max_length=MAX_TITLE_LENGTH)
    kind = models.CharField(max_length=16, choices=WorkKind.choices, default=WorkKind.REPORT)
    status = models.CharField(max_length=16, choices=WorkStatus.choices, default=WorkStatus.DONE)
    body = models.TextField(blank=True, help_text="Markdown.")
    tags = ArrayField(
        models.CharField(max_length=MAX_TAG_LENGTH),
        default=list,
        blank=True,
        help_text="Labels of a-z, 0-9, '_' and '-', sorted, without repeats.",
    )
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When it was deleted; empty: it is not."
    )

    objects = WorkItemQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # Recently deleted work: the user's deleted items, newest deletion first.
            models.Index(
                fields=["user", "-deleted_at"],
                name="work_user_deleted",
                condition=Q(deleted_at__isnull=False),
            ),
            models.Index(fields=["user", "-created_at"], name="work_user_recent"),
            # The Work page's and list_work's filter by kind (heartbeat findings, …).
            models.Index(fields=["user", "kind", "-created_at"], name="work_user_kind_recent"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=WorkKind.values), name="work_kind"),
            models.CheckConstraint(condition=Q(status__in=WorkStatus.values), name="work_status"),
            models.CheckConstraint(condition=~Q(title=""), name="work_title_not_empty"),
        ]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("work_detail", args=[self.pk])
