from django.conf import settings
from django.db import models
from django.db.models import Q


class SearchTool(models.TextChoices):
    SEARCH_MEMORY = "search_memory", "Agents: search_memory (memories)"
    MEMORY_SEARCH = "memory_search", "Agents: memory_search (documents)"
    PAGE = "page", "You: the search box"


class SearchLog(models.Model):
    """One search and how long it took, for the user's stats. No query text is kept.
    A system token's search of the global documents has no user."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="search_logs",
    )
    tool = models.CharField(max_length=16, choices=SearchTool.choices)
    results = models.PositiveIntegerField()
    latency_ms = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "-created_at"], name="searchlog_user")]
        constraints = [
            models.CheckConstraint(condition=Q(tool__in=SearchTool.values), name="searchlog_tool"),
            models.CheckConstraint(condition=Q(latency_ms__gte=0), name="searchlog_latency"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} by {self.user_id}: {self.latency_ms:.1f} ms"
