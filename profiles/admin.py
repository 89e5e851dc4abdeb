"""Admin for people, agents and tokens. A token's hash is never shown; its secret only once."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest

from lib.errors import InvalidInput
from profiles.models import Agent, AgentToken, Profile, SystemToken
from profiles.services import (
    clean_read_rules,
    system_token_create,
    token_create,
    token_revoke,
    webhook_url_clean,
)

TOKEN_INFO_FIELDS = ("prefix", "active", "created_at", "last_used_at", "revoked_at")


class ProfileAdminForm(forms.ModelForm):
    """The admin checks the webhook URL as Settings and imports do (lib/outbound.py): an
    address inside the network is allowed through MNEMO_OUTBOUND_ALLOW, not here. (The
    model and fields come from ProfileAdmin, through ModelAdmin.get_form.)"""

    def clean_notify_webhook_url(self) -> str:
        try:
            return webhook_url_clean(url=self.cleaned_data.get("notify_webhook_url") or "")
        except InvalidInput as error:
            raise ValidationError(error.message) from None


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    form = ProfileAdminForm
    list_display = ("user", "token_budget", "memory_paused", "auto_learn", "updated_at")
    list_filter = ("memory_paused", "auto_learn")
    search_fields = ("user__username", "user__email")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    ordering = ("user__username",)
    readonly_fields = ("created_at", "updated_at")


class AgentAdminForm(forms.ModelForm):
    """The admin's agent form: its read rules checked and normalised as the Agents page's
    are (profiles/services.py clean_read_rules). (The model and fields come from
    AgentAdmin.)"""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        fields = ("memory_rule", "memory_tags", "document_rule", "document_folders")
        if any(field in self.errors for field in fields):
            return cleaned
        try:
            rules = clean_read_rules(**{field: cleaned.get(field) or [] for field in fields})
        except InvalidInput as error:
            self.add_error(error.field if error.field in self.fields else None, error.message)
            return cleaned
        cleaned.update(vars(rules))
        return cleaned


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentAdminForm
    list_display = ("name", "user", "description", "memory_rule", "document_rule", "created_at")
    list_filter = ("created_at",)
    search_fields = ("name", "description", "user__username")
    list_select_related = ("user",)
    autocomplete_fields = ("user",)
    ordering = ("user__username", "name")
    readonly_fields = ("created_at",)


class TokenAdmin(admin.ModelAdmin):
    """What both kinds of token share: the hash hidden, a revoke action, an active column."""

    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "created_at")
    ordering = ("-created_at",)
    exclude = ("token_hash",)
    actions = ("revoke_selected",)

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        tokens = list(queryset.filter(revoked_at__isnull=True))
        for token in tokens:
            token_revoke(token=token)
        self.message_user(request, f"Revoked {len(tokens)} token(s).", messages.SUCCESS)

    @admin.display(description="active", boolean=True, ordering="revoked_at")
    def active(self, obj: AgentToken | SystemToken) -> bool:
        return obj.is_active


@admin.register(AgentToken)
class AgentTokenAdmin(TokenAdmin):
    list_display = ("prefix", "label", "agent", "owner", "active", "created_at", "last_used_at")
    search_fields = ("prefix", "label", "agent__name", "agent__user__username")
    list_select_related = ("agent__user",)
    autocomplete_fields = ("agent",)

    def get_fields(self, request: HttpRequest, obj: AgentToken | None = None) -> tuple:
        return ("agent", "label") if obj is None else ("agent", "label", *TOKEN_INFO_FIELDS)

    def get_readonly_fields(self, request: HttpRequest, obj: AgentToken | None = None) -> tuple:
        return () if obj is None else ("agent", *TOKEN_INFO_FIELDS)

    def save_model(
        self, request: HttpRequest, obj: AgentToken, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)  # only the label is editable
            return
        issued = token_create(agent=obj.agent, label=obj.label)
        obj.pk = issued.token.pk
        obj.refresh_from_db()
        messages.success(
            request,
            f"New token for agent {obj.agent}: {issued.raw} — copy it now, "
            "it will not be shown again.",
        )

    @admin.display(description="user", ordering="agent__user__username")
    def owner(self, obj: AgentToken) -> str:
        return str(obj.agent.user)


@admin.register(SystemToken)
class SystemTokenAdmin(TokenAdmin):
    """Tokens bound to no user, for the global (company) documents only."""

    list_display = ("prefix", "label", "active", "created_at", "last_used_at")
    search_fields = ("prefix", "label")

    def get_fields(self, request: HttpRequest, obj: SystemToken | None = None) -> tuple:
        return ("label",) if obj is None else ("label", *TOKEN_INFO_FIELDS)

    def get_readonly_fields(self, request: HttpRequest, obj: SystemToken | None = None) -> tuple:
        return () if obj is None else TOKEN_INFO_FIELDS

    def save_model(
        self, request: HttpRequest, obj: SystemToken, form: forms.ModelForm, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)  # only the label is editable
            return
        issued = system_token_create(label=obj.label)
        obj.pk = issued.token.pk
        obj.refresh_from_db()
        messages.success(
            request,
            f"New system token: {issued.raw} — copy it now, it will not be shown again. "
            "It reads and writes only the global (company) documents.",
        )
