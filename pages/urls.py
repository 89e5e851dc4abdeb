"""The pages that span layers, mounted at the root (config/urls.py), their names in the
`pages` namespace (`pages:context`). The paths are the ones people have bookmarked.

A document is named by its scope and its path: /documents/<scope>/file/<path>, with scope
"mine", "agents/<agent name>", "shared/<slug>" or "company". The action comes before the
path, so any path (even one ending in /edit) stays unambiguous.
"""

from django.urls import path, register_converter

from pages.views import (
    activity,
    context_bulk,
    context_entries,
    context_history,
    context_page,
    context_profile,
    context_styles,
    documents,
    documents_deleted,
    nav,
    search,
    settings,
)

app_name = "pages"


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
    # The Context page (pages/views/context_page.py): its tabs and the preview.
    path("", context_page.context_page, name="context"),
    path("preview/", context_page.context_preview, name="context_preview"),
    path("preview/budget/", context_page.budget_save, name="budget_save"),
    # Its Profile, Styles and Entries tabs' writes (pages/views/context_profile.py,
    # context_styles.py, context_entries.py; many entries at once, context_bulk.py).
    path("profile/", context_profile.profile_save, name="profile_save"),
    path("styles/add/", context_styles.style_add, name="style_add"),
    path("styles/<str:platform>/", context_styles.style_save, name="style_save"),
    path("styles/<str:platform>/remove/", context_styles.style_remove, name="style_remove"),
    path("entries/add/", context_entries.entry_add, name="entry_add"),
    path("memories/<int:pk>/", context_entries.entry_row, name="entry_row"),
    path("memories/<int:pk>/edit/", context_entries.entry_edit, name="entry_edit"),
    path("memories/<int:pk>/pin/", context_entries.entry_pin, name="entry_pin"),
    path("memories/<int:pk>/delete/", context_entries.entry_delete, name="entry_delete"),
    path("memories/<int:pk>/share/", context_entries.note_share, name="note_share"),
    path("entries/bulk/", context_bulk.entries_bulk, name="entries_bulk"),
    path("memories/delete-all/", context_bulk.delete_all, name="delete_all"),
    path("memories/batches/<uuid:batch>/undo/", context_bulk.batch_undo, name="batch_undo"),
    # Each memory's history and Recently deleted (pages/views/context_history.py).
    path("memories/<int:pk>/history/", context_history.memory_history, name="memory_history"),
    path("history/<int:history_id>/", context_history.history_detail, name="history_detail"),
    path(
        "history/<int:history_id>/restore/", context_history.history_restore, name="history_restore"
    ),
    path("deleted/", context_history.deleted_memories, name="deleted_memories"),
    # Its Documents tab (pages/views/documents.py).
    path("documents/", documents.documents_page, name="documents"),
    path("documents/new/", documents.document_new, name="document_new"),
    path("documents/today/", documents.today_log, name="documents_today"),
    # Recently deleted documents (pages/views/documents_deleted.py).
    path("documents/deleted/", documents_deleted.deleted_documents, name="deleted_documents"),
    path(
        "documents/deleted/<int:version_id>/restore/",
        documents_deleted.deleted_document_restore,
        name="deleted_document_restore",
    ),
    path("documents/versions/<int:version_id>/", documents.version_page, name="document_version"),
    path(
        "documents/versions/<int:version_id>/restore/",
        documents.version_restore,
        name="document_restore",
    ),
    path("documents/<scope:scope>/file/<path:path>", documents.document_page, name="document"),
    path(
        "documents/<scope:scope>/folder/<path:path>",
        documents.folder_page,
        name="document_folder",
    ),
    path("documents/<scope:scope>/edit/<path:path>", documents.document_edit, name="document_edit"),
    path(
        "documents/<scope:scope>/delete/<path:path>",
        documents.document_delete,
        name="document_delete",
    ),
    path(
        "documents/<scope:scope>/history/<path:path>",
        documents.document_history,
        name="document_history",
    ),
    path(
        "documents/<scope:scope>/download/<path:path>",
        documents.document_download,
        name="document_download",
    ),
    # The search box's page, over memories and documents (pages/views/search.py).
    path("search/", search.search_page, name="search"),
    # Settings (pages/views/settings.py); its password, export and import pages are their
    # apps' (profiles/urls.py, portability/urls.py).
    path("settings/", settings.settings_page, name="settings"),
    path("settings/memory/", settings.memory_pause, name="memory_pause"),
    path("settings/learning/", settings.learning_settings, name="learning_settings"),
    # The activity log (pages/views/activity.py).
    path("activity/", activity.activity_page, name="activity"),
    # The navigation's Inbox count (pages/views/nav.py).
    path("context/inbox/count/", nav.inbox_count, name="inbox_count"),
]
