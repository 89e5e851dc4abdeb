from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from activity.actors import Actor
from context.models import Document
from context.paths import InvalidPath, normalize_path
from context.services import document_delete, document_write
from lib.errors import InvalidInput, NotFound
from profiles.services import agent_check_owner

SCOPES = {
    "global": {"user__isnull": True},
    "user": {"user__isnull": False, "agent__isnull": True},
    "agent": {"agent__isnull": False},
}


class DocumentForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ("user", "agent", "path", "body")

    def clean_path(self) -> str:
        try:
            return normalize_path(self.cleaned_data["path"])
        except InvalidPath as error:
            raise forms.ValidationError(error.message, code=error.rule) from error

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if not self.has_error("user"):
            try:
                agent_check_owner(agent=cleaned.get("agent"), user=cleaned.get("user"))
            except InvalidInput as error:
                self.add_error(error.field, error.message)
        return cleaned


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [(scope, scope) for scope in SCOPES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> QuerySet[Document]:
        scope = self.value()
        return queryset.filter(**SCOPES[scope]) if scope in SCOPES else queryset


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    form = DocumentForm
    list_display = ("path", "scope", "user", "agent", "updated_at")
    list_filter = (ScopeFilter, "updated_at")
    search_fields = ("path", "user__username", "agent__name")
    list_select_related = ("user", "agent")
    autocomplete_fields = ("user", "agent")
    ordering = ("path", "id")

    def get_readonly_fields(self, request: HttpRequest, obj: Document | None = None) -> tuple:
        # A document's scope and path are its identity; moving one is a new document.
        return () if obj is None else ("user", "agent", "path", "created_at", "updated_at")

    def save_model(
        self, request: HttpRequest, obj: Document, form: forms.ModelForm, change: bool
    ) -> None:
        if change and not form.has_changed():
            return  # no version for a save that changes nothing
        saved = document_write(
            user=obj.user,
            agent=obj.agent,
            path=obj.path,
            content=obj.body,
            actor=Actor.for_user(request.user),
        )
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        document_delete(
            user=obj.user, agent=obj.agent, path=obj.path, actor=Actor.for_user(request.user)
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        actor = Actor.for_user(request.user)
        for document in queryset.select_related("user", "agent"):
            try:
                document_delete(
                    user=document.user, agent=document.agent, path=document.path, actor=actor
                )
            except NotFound:
                continue  # deleted meanwhile

    @admin.display(description="scope")
    def scope(self, obj: Document) -> str:
        return obj.scope
