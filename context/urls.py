"""The Documents pages, mounted under /documents/.

A document is named by its scope and its path: /documents/<scope>/file/<path>, with scope
"mine", "agents/<agent name>", "shared/<slug>" or "company". The action comes before the
path, so any path (even one ending in /edit) stays unambiguous.
"""

from django.urls import path, register_converter

from context import views


class ScopeConverter:
    """mine, company, agents/<name> (agent names as profiles.models.AGENT_NAME_PATTERN) or
    shared/<slug> (as context.models.SharedScope's)."""

    regex = r"mine|company|(?:agents|shared)/[a-z0-9][a-z0-9_-]{0,63}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ScopeConverter, "scope")

urlpatterns = [
    path("", views.documents_page, name="documents"),
    path("new/", views.document_new, name="document_new"),
    path("today/", views.today_log, name="documents_today"),
    path("versions/<int:version_id>/", views.version_page, name="document_version"),
    path("versions/<int:version_id>/restore/", views.version_restore, name="document_restore"),
    path("<scope:scope>/file/<path:path>", views.document_page, name="document"),
    path("<scope:scope>/folder/<path:path>", views.folder_page, name="document_folder"),
    path("<scope:scope>/edit/<path:path>", views.document_edit, name="document_edit"),
    path("<scope:scope>/delete/<path:path>", views.document_delete, name="document_delete"),
    path("<scope:scope>/history/<path:path>", views.document_history, name="document_history"),
    path("<scope:scope>/download/<path:path>", views.document_download, name="document_download"),
]
