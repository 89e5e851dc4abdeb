from django.contrib import admin

from activity.actors import ActorMixin
from activity.models import ActivityEvent
from lib.admin import ReadOnlyAdmin


class AppendOnlyAdmin(ReadOnlyAdmin):
    """Read-only admin for append-only logs of who did what: with their actor column."""

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
