from django.urls import path

from memory import review_views, views

urlpatterns = [
    path("", views.context_page, name="context"),
    path("preview/", views.context_preview, name="context_preview"),
    path("preview/budget/", views.budget_save, name="budget_save"),
    path("profile/", views.profile_save, name="profile_save"),
    path("styles/add/", views.style_add, name="style_add"),
    path("styles/<str:platform>/", views.style_save, name="style_save"),
    path("styles/<str:platform>/remove/", views.style_remove, name="style_remove"),
    path("entries/add/", views.entry_add, name="entry_add"),
    path("memories/<int:pk>/", views.entry_row, name="entry_row"),
    path("memories/<int:pk>/edit/", views.entry_edit, name="entry_edit"),
    path("memories/<int:pk>/pin/", views.entry_pin, name="entry_pin"),
    path("memories/<int:pk>/delete/", views.entry_delete, name="entry_delete"),
    path("memories/<int:pk>/history/", views.memory_history, name="memory_history"),
    path("history/<int:history_id>/", views.history_detail, name="history_detail"),
    path("history/<int:history_id>/restore/", views.history_restore, name="history_restore"),
    path("deleted/", views.deleted_memories, name="deleted_memories"),
    # The review inbox (memory/review_views.py).
    path("context/inbox/", review_views.inbox_page, name="review_inbox"),
    path("context/inbox/count/", review_views.inbox_count, name="review_inbox_count"),
    path("context/inbox/decide/", review_views.proposals_bulk, name="proposals_bulk"),
    path(
        "context/inbox/<int:pk>/accept/",
        review_views.proposal_accept_view,
        name="proposal_accept",
    ),
    path(
        "context/inbox/<int:pk>/reject/",
        review_views.proposal_reject_view,
        name="proposal_reject",
    ),
]
