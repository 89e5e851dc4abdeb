"""The review inbox (memory/review_views.py) and its look-alike notes
(memory/look_alike_views.py), mounted at the root (config/urls.py). The navigation's count
of it is pages/views/nav.py."""

from django.urls import path

from memory import look_alike_views, review_views

urlpatterns = [
    path("context/inbox/", review_views.inbox_page, name="review_inbox"),
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
    path("context/inbox/look-alike/", look_alike_views.look_alike_page, name="look_alike_notes"),
    path(
        "context/inbox/look-alike/merge/",
        look_alike_views.look_alike_merge,
        name="look_alike_merge",
    ),
    path(
        "context/inbox/look-alike/dismiss/",
        look_alike_views.look_alike_dismiss_view,
        name="look_alike_dismiss",
    ),
]
