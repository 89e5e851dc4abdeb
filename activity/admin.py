from django.contrib import admin
from django.http import HttpRequest

from activity.actors import ActorMixin
from activity.models import ActivityEvent


class AppendOnlyAdmin(admin.ModelAdmin):
    """Read-only admin for append-only logs: viewable, never added, changed or deleted."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.display(description="actor", ordering="actor_type")
    def actor(self, obj: ActorMixin) -> str:
        return obj.actor_label


@admin.register(ActivityEvent)
class ActivityEventAdmin(AppendOnlyAdmin):
    list_display = ("created_at", "event_type", "user", "actor", "payload")
    list_filter = ("event_type", "actor_type")
    search_fields = ("user__username", "actor_user__username", "actor_agent__name", "payload__key")
    list_select_related = ("user", "actor_user", "actor_agent")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = readonly_fields = (
        "created_at",
        "event_type",
        "user",
        "actor_type",
        "actor_user",
        "actor_agent",
        "payload",
    )
