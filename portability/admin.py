"""Import and export jobs in the Django admin: read-only, like the other logs. A job is
written by portability/importing.py (its progress and summary by portability/report.py) or
portability/exporting.py alone (a page creates it, the worker runs it, beat's sweep sends a
stalled one again)."""

from django.contrib import admin

from lib.admin import ReadOnlyAdmin
from portability.models import ExportJob, ImportJob


@admin.register(ImportJob)
class ImportJobAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "user",
        "kind",
        "mode",
        "status",
        "processed",
        "total",
        "created",
        "updated",
        "skipped",
        "refused",
        "attempts",
    )
    list_filter = ("status", "kind", "mode")
    search_fields = ("user__username", "original_name")
    list_select_related = ("user",)
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = readonly_fields = (
        "user",
        "kind",
        "mode",
        "status",
        "original_name",
        "error",
        "created_at",
        "started_at",
        "progressed_at",
        "finished_at",
        "attempts",
        "total",
        "processed",
        "created",
        "updated",
        "skipped",
        "pending",
        "refused",
        "summary",
    )


@admin.register(ExportJob)
class ExportJobAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "user", "status", "processed", "total", "size")
    list_filter = ("status",)
    search_fields = ("user__username",)
    list_select_related = ("user",)
    ordering = ("-created_at", "-id")
    fields = readonly_fields = (
        "user",
        "status",
        "error",
        "filename",
        "size",
        "total",
        "processed",
        "attempts",
        "created_at",
        "started_at",
        "progressed_at",
        "finished_at",
        "expires_at",
    )
