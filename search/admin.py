from django.contrib import admin

from lib.admin import ReadOnlyAdmin
from search.models import SearchLog


@admin.register(SearchLog)
class SearchLogAdmin(ReadOnlyAdmin):
    """One row per search: which tool, how many results, how long it took (no query text)."""

    list_display = ("user", "tool", "results", "latency_ms", "created_at")
    list_filter = ("tool", "created_at")
    search_fields = ("user__username",)
    list_select_related = ("user",)
    date_hierarchy = "created_at"
