"""Recently deleted documents, beside the memories' (pages/views/context_history.py) and the work
items' (work/views.py): the documents deleted in the last days and not restored since, the
user's own, their agents' and those of the shared scopes they may write, each with who
deleted it and when, Restore and its versions.

Restore goes through context.history.document_restore with create_only: a document written
at the same path since is never overwritten from here; the row says so and links to it (its
history can still restore the deleted version over it, deliberately).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from activity.actors import Actor
from context import history, selectors
from lib.errors import NotFound, VersionConflict
from lib.pages import HtmxHttpRequest, done, render_page, who

if TYPE_CHECKING:
    from django.template.response import TemplateResponse

PAGE = "pages/documents_deleted.html"


@login_required
@require_http_methods(["GET", "HEAD"])
def deleted_documents(request: HtmxHttpRequest) -> TemplateResponse:
    days = settings.MNEMO_UNDO_DAYS  # as the memories' Recently deleted
    since = timezone.now() - timedelta(days=days)
    rows = selectors.deleted_document_list(user=request.user, since=since)
    for row in rows:
        row.version.who = who(request, row.version)
    return render_page(request, PAGE, {"rows": rows, "days": days})


@login_required
@require_http_methods(["POST"])
def deleted_document_restore(request: HtmxHttpRequest, version_id: int) -> HttpResponse:
    """Restore a deleted document unless a document exists at its path now. htmx gets the
    row back (restored, or saying what is there now); a plain POST goes to the document, or
    back to the list with the reason."""
    version = selectors.version_get(user=request.user, version_id=version_id)
    if version is None:
        raise Http404("No such version.")
    scope = selectors.scope_of_row(user=request.user, row=version)
    if not scope.writable:
        raise PermissionDenied(f"{scope.label}: read-only.")
    if not selectors.path_writable(scope=scope, path=version.path):
        raise PermissionDenied(selectors.shared_path_refusal(version.path))
    try:
        restored = history.document_restore(
            user=request.user,
            shared_scope=scope.shared,
            version_id=version.pk,
            actor=Actor.for_user(request.user),
            create_only=True,
        )
    except VersionConflict as conflict:
        if not request.htmx:
            messages.error(request, conflict.message)
            return HttpResponseRedirect(reverse("pages:deleted_documents"))
        restored = None
    except NotFound as error:
        raise Http404(error.message) from error
    if restored is not None and not request.htmx:
        url = reverse("pages:document", args=[scope.key, restored.path])
        return done(request, f"Restored {restored.path}.", url)
    version.who = who(request, version)
    current = selectors.document_get(scope=scope, path=version.path)
    row = selectors.DeletedDocument(version=version, scope=scope, current=current)
    context = {"row": row, "restored": restored, "conflict": restored is None}
    return render_page(request, PAGE, context, partial="deleted_row")
