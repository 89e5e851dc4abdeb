from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from activity.actors import Actor
from lib.errors import InvalidInput
from profiles.services import agent_check_owner
from work.models import WorkItem, WorkKind
from work.services import work_create, work_update


class WorkItemForm(forms.ModelForm):
    class Meta:
        model = WorkItem
        fields = ("user", "agent", "title", "kind", "status", "tags", "body", "metadata")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.instance.pk and self.instance.deleted_at is not None:
            raise forms.ValidationError(
                "This item is deleted: restore it from Recently deleted work first. (Deleting "
                "it here removes it for good.)"
            )
        user = cleaned.get("user") if "user" in self.fields else self.instance.user
        if user is not None:
            try:
                agent_check_owner(agent=cleaned.get("agent"), user=user)
            except InvalidInput as error:
                self.add_error(error.field, error.message)
        kind = cleaned.get("kind")
        was = self.instance.kind if self.instance.pk else None
        if was is not None and kind != was and WorkKind.HEARTBEAT in (kind, was):
            self.add_error(
                "kind", "Heartbeat findings keep their kind, and no other item becomes one."
            )
        return cleaned


@admin.register(WorkItem)
class WorkItemAdmin(admin.ModelAdmin):
    form = WorkItemForm
    list_display = ("title", "user", "agent", "kind", "status", "created_at", "deleted_at")
    list_filter = ("kind", "status", "agent", "created_at", "deleted_at")
    search_fields = ("title", "user__username", "agent__name")
    list_select_related = ("user", "agent")
    autocomplete_fields = ("user", "agent")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request: HttpRequest, obj: WorkItem | None = None) -> tuple:
        return () if obj is None else ("user", "created_at", "updated_at", "deleted_at")

    def save_model(
        self, request: HttpRequest, obj: WorkItem, form: forms.ModelForm, change: bool
    ) -> None:
        actor = Actor.for_user(request.user)
        if change:
            # Through the service, so the work_updated event names what changed.
            work_update(
                user=obj.user,
                pk=obj.pk,
                actor=actor,
                title=obj.title,
                body=obj.body,
                kind=obj.kind,
                status=obj.status,
                tags=obj.tags,
            )
            if {"agent", "metadata"} & set(form.changed_data):
                WorkItem.objects.filter(pk=obj.pk).update(agent=obj.agent, metadata=obj.metadata)
            obj.refresh_from_db()
            return
        # Through the service, so the work_created event is recorded.
        item = work_create(
            user=obj.user,
            title=obj.title,
            body=obj.body,
            actor=actor,
            kind=obj.kind,
            status=obj.status,
            agent=obj.agent,
            metadata=obj.metadata,
            tags=obj.tags,
        )
        obj.pk = item.pk
        obj.refresh_from_db()
