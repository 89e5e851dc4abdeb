"""Heartbeat runs in the Django admin: read-only, like the other logs. They are written by
briefing/heartbeat.py alone."""

from django.contrib import admin

from briefing.models import HeartbeatRun
from lib.admin import ReadOnlyAdmin


@admin.register(HeartbeatRun)
class HeartbeatRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "started_at", "user", "trigger", "outcome", "webhook_status")
    list_filter = ("outcome", "trigger", "webhook_status")
    search_fields = ("user__username", "reason")
    list_select_related = ("user",)
    ordering = ("-started_at", "-id")
    raw_id_fields = ("user", "work_item")
