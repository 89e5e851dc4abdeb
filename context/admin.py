from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from context.models import Document
from context.paths import InvalidPath, normalize_path
from lib.errors import InvalidInput
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
        return () if obj is None else ("created_at", "updated_at")

    @admin.display(description="scope")
    def scope(self, obj: Document) -> str:
        return obj.scope
