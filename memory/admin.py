"""Memory admin. Every write goes through memory.services, so history and activity follow."""

from __future__ import annotations

import contextlib
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.timezone import localtime

from activity.actors import Actor
from activity.admin import AppendOnlyAdmin
from lib.admin import ReadOnlyAdmin
from lib.errors import NotFound, ServiceError
from lib.pages import add_service_error
from memory.keys import ENTRY_KINDS, PROFILE_KEYS, STYLE_ASPECTS, parse_key
from memory.models import Memory, MemoryHistory, MemoryProposal, Source
from memory.services import memory_delete, memory_upsert
from memory.validation import memory_clean

EDITABLE_FIELDS = (
    "user",
    "key",
    "value",
    "source",
    "confidence",
    "tags",
    "pinned",
    "occurred_at",
    "session",
)
USAGE_FIELDS = ("access_count", "last_accessed_at", "created_at", "updated_at")
HISTORY_ROWS = 20


class MemoryForm(forms.ModelForm):
    """Validates as memory_upsert does, so bad input is a field error instead of a 500."""

    actor: Actor  # set per request by MemoryAdmin.get_form
    source = forms.ChoiceField(choices=Source.choices, initial=Source.USER_STATED)
    confidence = forms.FloatField(
        required=False, help_text="Leave empty: 1.0 when stated by the user, 0.8 otherwise."
    )

    class Meta:
        model = Memory
        fields = EDITABLE_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # As for the write path (memory/occurrence.py): left empty, a new memory was said
        # now and an existing one keeps its time.
        self.fields["occurred_at"].required = False
        self.fields["occurred_at"].help_text = (
            "When what it says happened or was said. Empty: now for a new memory, "
            "unchanged for this one."
        )

    def clean_key(self) -> str:
        key = self.cleaned_data["key"]
        try:
            parse_key(key)
        except ServiceError as error:
            raise forms.ValidationError(error.message, code=error.code) from error
        return key

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        key = cleaned.get("key") if "key" in self.fields else self.instance.key
        user = cleaned.get("user") if "user" in self.fields else self.instance.user
        if not key or self.has_error("confidence"):
            return cleaned
        # A new memory here is the user's: its key must be free there (the unique key
        # now includes the audience, which this form does not edit, so Django skips it).
        adding = self.instance.pk is None
        if adding and Memory.objects.filter(user=user, owner_agent=None, key=key).exists():
            self.add_error("key", "The user's memory has this key already; change that one.")
            return cleaned
        try:
            cleaned.update(
                memory_clean(
                    key=key,
                    value=cleaned.get("value"),
                    actor=self.actor,
                    source=cleaned.get("source"),
                    confidence=cleaned.get("confidence"),
                    tags=cleaned.get("tags"),
                    user=user,
                    occurred_at=cleaned.get("occurred_at"),
                    session=cleaned.get("session"),
                )
            )
        except ServiceError as error:
            add_service_error(self, error)
        return cleaned


class KindFilter(admin.SimpleListFilter):
    title = "kind"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [("profile", "profile"), ("style", "style"), *((k, k) for k in ENTRY_KINDS)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> QuerySet[Memory]:
        kind = self.value()
        if kind == "profile":
            return queryset.filter(key__in=PROFILE_KEYS)
        if kind == "style":
            return queryset.filter(key__regex=rf"^({'|'.join(STYLE_ASPECTS)})_")
        if kind in ENTRY_KINDS:
            return queryset.filter(key__startswith=f"{kind}:")
        return queryset


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    form = MemoryForm
    list_display = (
        "key",
        "user",
        "owner_agent",
        "short_value",
        "source",
        "confidence",
        "pinned",
        "access_count",
        "occurred_at",
        "updated_at",
    )
    list_filter = (KindFilter, "source", "pinned")
    search_fields = ("key", "value", "session", "user__username")
    list_select_related = ("user", "owner_agent")
    autocomplete_fields = ("user",)
    ordering = ("user__username", "key")

    def get_fieldsets(self, request: HttpRequest, obj: Memory | None = None) -> list[tuple]:
        if obj is None:
            return [(None, {"fields": EDITABLE_FIELDS})]
        return [
            (None, {"fields": EDITABLE_FIELDS}),
            ("Audience (empty: the user's memory)", {"fields": ("owner_agent",)}),
            ("Usage", {"fields": USAGE_FIELDS}),
            ("History", {"fields": ("history",)}),
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: Memory | None = None) -> tuple:
        # The key, the user and the audience (the agent whose own note it is) identify the
        # row; changing them would be a new memory. A new memory here is the user's.
        return () if obj is None else ("user", "owner_agent", "key", *USAGE_FIELDS, "history")

    def get_form(
        self, request: HttpRequest, obj: Memory | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        form = super().get_form(request, obj, change=change, **kwargs)
        form.actor = Actor.for_user(request.user)  # type: ignore[attr-defined]
        return form

    def save_model(
        self, request: HttpRequest, obj: Memory, form: forms.ModelForm, change: bool
    ) -> None:
        if change and not form.has_changed():
            return  # no history row for a save that changes nothing
        write = memory_upsert(
            user=obj.user,
            key=obj.key,
            value=obj.value,
            actor=Actor.for_user(request.user),
            source=obj.source,
            confidence=obj.confidence,
            tags=obj.tags,
            pinned=obj.pinned,
            occurred_at=obj.occurred_at,
            session=obj.session,
            owner_agent=obj.owner_agent if change else None,
        )
        obj.pk = write.memory.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        memory_delete(
            user=obj.user,
            key=obj.key,
            actor=Actor.for_user(request.user),
            owner_agent=obj.owner_agent,
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        actor = Actor.for_user(request.user)
        for memory in queryset.select_related("user", "owner_agent"):
            with contextlib.suppress(NotFound):  # deleted meanwhile
                memory_delete(
                    user=memory.user, key=memory.key, actor=actor, owner_agent=memory.owner_agent
                )

    @admin.display(description="value")
    def short_value(self, obj: Memory) -> str:
        return Truncator(obj.value).chars(80)

    @admin.display(description="changes")
    def history(self, obj: Memory) -> SafeString:
        rows = MemoryHistory.objects.filter(
            user_id=obj.user_id, key=obj.key, owner_agent_id=obj.owner_agent_id
        ).select_related("actor_user", "actor_agent")[:HISTORY_ROWS]
        items = format_html_join(
            "",
            '<li><a href="{}">{}</a>: {} by {} ({})</li>',
            (
                (
                    reverse("admin:memory_memoryhistory_change", args=[row.pk]),
                    date_format(localtime(row.created_at), "DATETIME_FORMAT"),
                    row.get_action_display(),
                    row.actor_label,
                    row.source,
                )
                for row in rows
            ),
        )
        query = urlencode({"user__id__exact": obj.user_id, "key": obj.key})
        return format_html(
            '<ul>{}</ul><a href="{}?{}">All changes to this key</a>',
            items,
            reverse("admin:memory_memoryhistory_changelist"),
            query,
        )


@admin.register(MemoryHistory)
class MemoryHistoryAdmin(AppendOnlyAdmin):
    list_display = ("created_at", "key", "user", "action", "source", "actor")
    list_filter = ("action", "source", "actor_type")
    search_fields = ("key", "user__username", "actor_user__username", "actor_agent__name")
    list_select_related = ("user", "actor_user", "actor_agent")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = readonly_fields = (
        "created_at",
        "user",
        "key",
        "memory",
        "action",
        "source",
        "actor_type",
        "actor_user",
        "actor_agent",
        "before",
        "after",
    )


@admin.register(MemoryProposal)
class MemoryProposalAdmin(ReadOnlyAdmin):
    """The review inboxes, to look at: only the user decides (on the inbox page), through
    memory/review.py."""

    list_display = ("created_at", "key", "user", "action", "trigger", "status", "actor")
    list_filter = ("status", "action", "trigger")
    search_fields = ("key", "user__username", "actor_agent__name")
    list_select_related = ("user", "actor_user", "actor_agent")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "user",
        "key",
        "action",
        "trigger",
        "status",
        "actor_type",
        "actor_agent",
        "reason",
        "before",
        "after",
        "requested_key",
        "expires_at",
        "decided_at",
        "decided_by",
        "applied",
    )

    @admin.display(description="proposed by")
    def actor(self, obj: MemoryProposal) -> str:
        return obj.actor_label
