"""Turns and LLM calls in the Django admin: read-only, like the other logs. They are
written by learning/services.py and llm/client.py alone."""

from django.contrib import admin
from django.http import HttpRequest

from lib.admin import ReadOnlyAdmin
from llm.models import LLMCall, Turn

# What a call shows, on its own page and inline on its turn's.
CALL_FIELDS = (
    "created_at",
    "purpose",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "outcome",
    "error",
)


class LLMCallInline(admin.TabularInline):
    model = LLMCall
    extra = 0
    can_delete = False
    show_change_link = True
    fields = readonly_fields = CALL_FIELDS
    ordering = ("created_at", "id")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Turn)
class TurnAdmin(ReadOnlyAdmin):
    list_display = ("id", "received_at", "user", "agent", "status", "processed_at", "attempts")
    list_filter = ("status",)
    search_fields = ("user__username", "agent__name", "client_turn_id")
    list_select_related = ("user", "agent")
    ordering = ("-received_at", "-id")
    date_hierarchy = "received_at"
    fields = readonly_fields = (
        "user",
        "agent",
        "client_turn_id",
        "status",
        "skipped_reason",
        "received_at",
        "processed_at",
        "attempts",
        "claimed_at",
        "user_message",
        "assistant_reply",
        "tool_outputs",
        "outcome",
    )
    inlines = (LLMCallInline,)


@admin.register(LLMCall)
class LLMCallAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "user",
        "purpose",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
        "outcome",
        "turn",
    )
    list_filter = ("purpose", "outcome", "model")
    search_fields = ("user__username", "model", "purpose", "error")
    list_select_related = ("user", "turn")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = readonly_fields = ("user", "turn", *CALL_FIELDS)
