"""The review inbox's document decisions (context/review_views.py), mounted at the root
(config/urls.py) beside the inbox itself (memory/urls.py)."""

from django.urls import path

from context import review_views

urlpatterns = [
    path(
        "context/inbox/documents/<int:pk>/accept/",
        review_views.document_proposal_accept_view,
        name="document_proposal_accept",
    ),
    path(
        "context/inbox/documents/<int:pk>/reject/",
        review_views.document_proposal_reject_view,
        name="document_proposal_reject",
    ),
]
