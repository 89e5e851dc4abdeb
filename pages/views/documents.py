"""The Documents tab of the Context page: the user's documents by path, their agents' private
notes, each shared scope the user holds a grant to (editable with read_write, read-only with
read), and (read-only, when MNEMO_GLOBAL_READABLE is on) the company's.

Every write goes through context.services. A normal request gets the whole page, or a
redirect after a write; an htmx request aimed at #doc-panel gets just that panel, and after a
write the tree too (swapped out of band), so nothing reloads. Anything outside the user's
scopes is a 404 (a shared scope without a grant too); the company scope and read-only shared
scopes are never writable here (403).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods

from activity.actors import Actor
from context import history, selectors, services, tree, versions, well_known
from context.forms import DailyLineForm, DocumentCreateForm, DocumentEditForm
from context.models import Document, DocumentVersion, VersionAction
from context.paths import MAX_PATH_LENGTH, normalize_folder, normalize_path
from context.selectors import MINE, Scope
from lib.credentials import saved_warning
from lib.errors import Conflict, NotFound, ServiceError
from lib.markdown import render_markdown
from lib.pages import HtmxHttpRequest, add_service_error, done, render_page, target_partial, who
from memory.selectors import user_zone
from pages.views.context_shared import context_tab_links

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
    from django.template.response import TemplateResponse

    from context.tree import TreeEntry

PAGE = "pages/documents.html"
PANEL_ID = "doc-panel"
TREE_DEPTH = MAX_PATH_LENGTH  # a path never has more segments than characters


# ---------------------------------------------------------------- lookups (404 for anyone else's)


def _get_scope_for_user(user: AbstractBaseUser, key: str) -> Scope:
    scope = selectors.scope_get(user=user, key=key)
    if scope is None:
        raise Http404("No such document scope.")
    return scope


def _get_writable_scope_for_user(user: AbstractBaseUser, key: str, path: str) -> Scope:
    """The scope, if the user may change path in it (403 otherwise): a writable scope, and
    in a shared one no identity file or agent's notes, as the agent API refuses them."""
    scope = _get_scope_for_user(user, key)
    if not scope.writable:
        raise PermissionDenied(f"{scope.label}: read-only.")
    if not selectors.path_writable(scope=scope, path=path):
        raise PermissionDenied(selectors.shared_path_refusal(path))
    return scope


def _get_document_for_user(scope: Scope, path: str) -> Document:
    document = selectors.document_get(scope=scope, path=path)
    if document is None:
        raise Http404("No such document.")
    return document


def _get_version_for_user(user: AbstractBaseUser, version_id: int) -> DocumentVersion:
    version = selectors.version_get(user=user, version_id=version_id)
    if version is None:
        raise Http404("No such version.")
    return version


def _actor(request: HtmxHttpRequest) -> Actor:
    return Actor.for_user(request.user)


def document_url(scope: Scope, path: str) -> str:
    return reverse("pages:document", args=[scope.key, path])


# ---------------------------------------------------------------- the tree


@dataclass
class TreeNode:
    entry: TreeEntry
    url: str
    open: bool
    children: list[TreeNode] = field(default_factory=list)


@dataclass
class Section:
    scope: Scope
    nodes: list[TreeNode]


def _nest(scope: Scope, entries: list[TreeEntry], current_path: str) -> list[TreeNode]:
    """Turn document_tree's flat, depth-first list into nested folders; the folders holding
    the current document start open."""
    roots: list[TreeNode] = []
    parents: list[TreeNode] = []
    for entry in entries:
        node = _node(scope, entry, current_path)
        del parents[entry.depth - 1 :]
        (parents[-1].children if parents else roots).append(node)
        parents.append(node)
    return roots


def _node(scope: Scope, entry: TreeEntry, current_path: str = "") -> TreeNode:
    is_folder = entry.kind == "folder"
    return TreeNode(
        entry=entry,
        url=reverse(
            "pages:document_folder" if is_folder else "pages:document", args=[scope.key, entry.path]
        ),
        open=is_folder and current_path.startswith(f"{entry.path}/"),
    )


def _sections(user: AbstractBaseUser, current: tuple[str, str]) -> list[Section]:
    current_scope, current_path = current
    sections = []
    for scope in selectors.document_scopes(user=user):
        entries = tree.document_tree(**scope.where, depth=TREE_DEPTH)
        path = current_path if scope.key == current_scope else ""
        sections.append(Section(scope=scope, nodes=_nest(scope, entries, path)))
    return sections


def _today_url(user: AbstractBaseUser) -> str:
    """Today's daily file when it exists; otherwise the page that offers to start it."""
    mine = selectors.scope_mine(user=user)
    path = selectors.daily_log_path(user=user)
    if selectors.document_get(scope=mine, path=path) is not None:
        return document_url(mine, path)
    return reverse("pages:documents_today")


def _tree_context(user: AbstractBaseUser, panel: dict[str, Any]) -> dict[str, Any]:
    sections = _sections(user, panel.get("current", ("", "")))
    return {"sections": sections, "today_url": _today_url(user)}


# ---------------------------------------------------------------- responses


def _panel_partial(request: HtmxHttpRequest, *, changed: bool = False) -> str | None:
    """For an htmx request aimed at the panel: the panel, or after a change the panel and
    the tree (out of band). None: the whole page."""
    return target_partial(request, {PANEL_ID: "panel_and_tree" if changed else "doc_panel"})


def _wants_panel(request: HtmxHttpRequest) -> bool:
    return _panel_partial(request) is not None


def _respond(
    request: HtmxHttpRequest,
    panel: dict[str, Any],
    *,
    status: int = 200,
    changed: bool = False,
    push_url: str | None = None,
) -> TemplateResponse:
    """The whole page, or for htmx the panel (and after a change, the tree out of band)."""
    partial = _panel_partial(request, changed=changed)
    if partial is not None:
        context = {**panel, **(_tree_context(request.user, panel) if changed else {})}
        response = render_page(request, PAGE, context, partial=partial, status=status)
        if push_url:
            response.headers["HX-Push-Url"] = push_url
        return response
    context = {
        "tabs": context_tab_links(),
        "tab": "documents",
        "nav_section": "context",
        **_tree_context(request.user, panel),
        **panel,
    }
    return render_page(request, PAGE, context, status=status)


def _show_changed(
    request: HtmxHttpRequest,
    scope: Scope,
    document: Document,
    note: str,
    message: str | None = None,
    *,
    written: bool = True,
) -> HttpResponse:
    """After a change: htmx gets the document's panel and the tree; a plain POST is
    redirected to the document with `message` (default: the note) as a flash. With
    `written`, a credential in the document is warned about (the user may keep one there;
    agents read it)."""
    url = document_url(scope, document.path)
    credential = document.credential if written else None
    warning = saved_warning(credential) if credential is not None else ""
    if _wants_panel(request):
        panel = _document_panel(request, scope, document, note=note, warning=warning)
        return _respond(request, panel, changed=True, push_url=url)
    response = done(request, message or note, url)
    if warning:
        messages.warning(request, warning)
    return response


# ---------------------------------------------------------------- panels


def _where(scope: Scope, path: str) -> dict[str, Any]:
    """Scope (read-only for a path the user may not change there), breadcrumbs (each
    folder above the path with its folder page) and name."""
    scope = selectors.scope_at(scope=scope, path=path)
    parts = path.split("/")
    crumbs = [
        {
            "name": part,
            "url": reverse("pages:document_folder", args=[scope.key, "/".join(parts[:i])]),
        }
        for i, part in enumerate(parts[:-1], start=1)
    ]
    return {"scope": scope, "crumbs": crumbs, "name": parts[-1], "current": (scope.key, path)}


def _document_panel(
    request: HtmxHttpRequest,
    scope: Scope,
    document: Document,
    *,
    note: str = "",
    warning: str = "",
    daily_form: DailyLineForm | None = None,
) -> dict[str, Any]:
    is_today = scope.key == MINE and document.path == selectors.daily_log_path(user=request.user)
    return {
        **_where(scope, document.path),
        "panel": "document",
        "document": document,
        "body_html": render_markdown(document.body),
        "note": note,
        "warning": warning,
        "is_today": is_today,
        "daily_form": daily_form or DailyLineForm(),
    }


def _edit_panel(
    scope: Scope,
    document: Document,
    form: DocumentEditForm,
    *,
    base_version: int | str | None,
    conflict: str = "",
) -> dict[str, Any]:
    return {
        **_where(scope, document.path),
        "panel": "edit",
        "document": document,
        "form": form,
        "base_version": base_version,
        "conflict": conflict,
        "newer_html": render_markdown(document.body) if conflict else "",
    }


def _history_panel(request: HtmxHttpRequest, scope: Scope, path: str) -> dict[str, Any]:
    document = selectors.document_get(scope=scope, path=path)
    if document is None and not selectors.document_has_history(scope=scope, path=path):
        raise Http404("No such document.")
    rows = list(selectors.versions_with_actors(history.document_versions(**scope.where, path=path)))
    for row in rows:
        row.who = who(request, row)
        row.restorable = document is None or row.body != document.body
    path = document.path if document else rows[0].path
    return {
        **_where(scope, path),
        "panel": "history",
        "path": path,
        "document": document,
        "versions": rows,
    }


def _version_panel(request: HtmxHttpRequest, version: DocumentVersion) -> dict[str, Any]:
    scope = selectors.scope_of_row(user=request.user, row=version)
    document = selectors.document_get(scope=scope, path=version.path)
    version.who = who(request, version)
    return {
        **_where(scope, version.path),
        "panel": "version",
        "version": version,
        "document": document,
        "body_html": render_markdown(version.body),
        "changes": selectors.version_changes(version),
        "restorable": selectors.path_writable(scope=scope, path=version.path)
        and (document is None or document.body != version.body),
    }


def _deleted_panel(version: DocumentVersion) -> dict[str, Any]:
    return {"panel": "deleted", "deleted": version}


def _today_panel(request: HtmxHttpRequest, form: DailyLineForm | None = None) -> dict[str, Any]:
    user = request.user
    path = selectors.daily_log_path(user=user)
    return {
        "panel": "today",
        "today_path": path,
        "timezone_name": str(user_zone(user)),
        "daily_form": form or DailyLineForm(),
        "current": (MINE, path),
    }


def _undo_offer(request: HtmxHttpRequest) -> DocumentVersion | None:
    """After a delete without JavaScript, the redirect carries ?undo=<version id>."""
    version_id = request.GET.get("undo", "")
    if not version_id.isdigit():
        return None
    version = selectors.version_get(user=request.user, version_id=int(version_id))
    if (
        version is None
        or version.action != VersionAction.DELETE
        or (version.user_id is None and version.shared_scope_id is None)
    ):
        return None
    scope = selectors.scope_of_row(user=request.user, row=version)
    return version if selectors.document_get(scope=scope, path=version.path) is None else None


# ---------------------------------------------------------------- pages


@login_required
@require_http_methods(["GET", "HEAD"])
def documents_page(request: HtmxHttpRequest) -> TemplateResponse:
    undo = _undo_offer(request)
    if undo is not None:
        return _respond(request, _deleted_panel(undo))
    has_documents = selectors.documents_exist(user=request.user)
    return _respond(request, {"panel": "intro", "has_documents": has_documents})


@login_required
@require_http_methods(["GET", "HEAD"])
def document_page(request: HtmxHttpRequest, scope: str, path: str) -> TemplateResponse:
    found = _get_scope_for_user(request.user, scope)
    document = _get_document_for_user(found, path)
    return _respond(request, _document_panel(request, found, document))


@login_required
@require_http_methods(["GET", "HEAD"])
def folder_page(request: HtmxHttpRequest, scope: str, path: str) -> TemplateResponse:
    found = _get_scope_for_user(request.user, scope)
    try:
        folder = normalize_folder(path)
        entries = tree.document_tree(**found.where, path=folder)
    except ServiceError as error:
        raise Http404("No such folder.") from error
    panel = {
        **_where(found, folder),
        "panel": "folder",
        "entries": [_node(found, entry) for entry in entries],
        "current": (found.key, f"{folder}/"),
    }
    return _respond(request, panel)


@login_required
@require_http_methods(["GET", "HEAD"])
def document_download(request: HtmxHttpRequest, scope: str, path: str) -> HttpResponse:
    found = _get_scope_for_user(request.user, scope)
    document = _get_document_for_user(found, path)
    filename = posixpath.basename(document.path)
    if not filename.lower().endswith(".md"):
        filename += ".md"
    response = HttpResponse(document.body, content_type="text/markdown; charset=utf-8")
    response.headers["Content-Disposition"] = content_disposition_header(True, filename)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


# ---------------------------------------------------------------- create, edit, delete


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def document_new(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    if request.method != "POST":
        initial = {"scope": request.GET.get("scope", MINE), "path": request.GET.get("path", "")}
        form = DocumentCreateForm(user=user, initial=initial)
        return _respond(request, {"panel": "new", "form": form})
    form = DocumentCreateForm(request.POST, user=user)
    if form.is_valid():
        scope: Scope = form.cleaned_data["scope_obj"]
        try:
            document = services.document_write(
                **scope.where,
                path=form.cleaned_data["path"],
                content=form.cleaned_data["content"],
                actor=_actor(request),
                create_only=True,
            )
        except ServiceError as error:
            add_service_error(form, error)
    if form.errors:
        return _respond(request, {"panel": "new", "form": form}, status=_error_status(request))
    return _show_changed(request, scope, document, f"Created {document.path}.")


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def document_edit(request: HtmxHttpRequest, scope: str, path: str) -> HttpResponse:
    found = _get_writable_scope_for_user(request.user, scope, path)
    if request.method != "POST":
        document = _get_document_for_user(found, path)
        form = DocumentEditForm(initial={"content": document.body})
        latest = versions.document_latest_version_id(document)
        return _respond(request, _edit_panel(found, document, form, base_version=latest))
    return _save(request, found, path)


def _save(request: HtmxHttpRequest, scope: Scope, path: str) -> HttpResponse:
    """Write the edited body unless it changed meanwhile: then keep the user's text in the
    form, show the newer version beside it, and let a second Save replace it."""
    document = selectors.document_get(scope=scope, path=path)
    if document is None and not selectors.document_has_history(scope=scope, path=path):
        raise Http404("No such document.")
    form = DocumentEditForm(request.POST)
    if not form.is_valid():
        return _edit_error(request, scope, document or _unsaved(scope, path), form)
    content = form.cleaned_data["content"]
    base_version = form.cleaned_data["base_version"]
    if document is None and base_version is not None:
        # The conflict notice says what happened and what Save does now: one message.
        gone = _unsaved(scope, path)
        return _edit_error(request, scope, gone, form, conflict="deleted")
    note = "No change."
    try:
        if document is None or content != document.body:
            document = services.document_write(
                **scope.where,
                path=path,
                content=content,
                actor=_actor(request),
                base_version=base_version,
            )
            note = "Saved."
    except Conflict:
        # The service's message tells an API caller to reload and retry; the page keeps
        # the text and says so in its conflict notice instead.
        document = _get_document_for_user(scope, path)
        return _edit_error(request, scope, document, form, conflict="changed")
    except ServiceError as error:
        add_service_error(form, error)
        return _edit_error(request, scope, document or _unsaved(scope, path), form)
    return _show_changed(
        request, scope, document, note, f"{note[:-1]}: {document.path}.", written=note == "Saved."
    )


def _unsaved(scope: Scope, path: str) -> Document:
    """A stand-in for a document deleted while it was being edited."""
    return Document(**scope.where, path=normalize_path(path))


def _edit_error(
    request: HtmxHttpRequest,
    scope: Scope,
    document: Document,
    form: DocumentEditForm,
    *,
    conflict: str = "",
) -> TemplateResponse:
    """The edit form again with the user's text. After a conflict it carries the newest
    version's id (none for a deleted document), so saving again is a deliberate choice to
    replace what changed; otherwise the version the user started from."""
    if conflict:
        base_version = versions.document_latest_version_id(document)
    else:
        base_version = form.data.get("base_version") or None
    panel = _edit_panel(scope, document, form, base_version=base_version, conflict=conflict)
    status = 409 if conflict else 400
    return _respond(request, panel, status=_error_status(request, status))


def _error_status(request: HtmxHttpRequest, status: int = 400) -> int:
    """htmx swaps only 2xx answers, so the form with its errors comes back as 200 there."""
    return 200 if _wants_panel(request) else status


@login_required
@require_http_methods(["POST"])
def document_delete(request: HtmxHttpRequest, scope: str, path: str) -> HttpResponse:
    found = _get_writable_scope_for_user(request.user, scope, path)
    document = _get_document_for_user(found, path)
    version = services.document_delete(**found.where, path=document.path, actor=_actor(request))
    undo_url = f"{reverse('pages:documents')}?undo={version.pk}"
    if _wants_panel(request):
        return _respond(request, _deleted_panel(version), changed=True, push_url=undo_url)
    return done(request, f"Deleted {document.path}.", undo_url)


# ---------------------------------------------------------------- history and restore


@login_required
@require_http_methods(["GET", "HEAD"])
def document_history(request: HtmxHttpRequest, scope: str, path: str) -> TemplateResponse:
    found = _get_scope_for_user(request.user, scope)
    return _respond(request, _history_panel(request, found, path))


@login_required
@require_http_methods(["GET", "HEAD"])
def version_page(request: HtmxHttpRequest, version_id: int) -> TemplateResponse:
    version = _get_version_for_user(request.user, version_id)
    return _respond(request, _version_panel(request, version))


@login_required
@require_http_methods(["POST"])
def version_restore(request: HtmxHttpRequest, version_id: int) -> HttpResponse:
    version = _get_version_for_user(request.user, version_id)
    scope = selectors.scope_of_row(user=request.user, row=version)
    if not scope.writable:
        raise PermissionDenied(f"{scope.label}: read-only.")
    if not selectors.path_writable(scope=scope, path=version.path):
        raise PermissionDenied(selectors.shared_path_refusal(version.path))
    try:
        document = history.document_restore(
            user=request.user,
            shared_scope=scope.shared,
            version_id=version.pk,
            actor=_actor(request),
        )
    except NotFound as error:
        raise Http404(error.message) from error
    return _show_changed(request, scope, document, f"Restored {document.path}.")


# ---------------------------------------------------------------- today's log


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def today_log(request: HtmxHttpRequest) -> HttpResponse:
    """Today's daily file in the user's timezone; while it does not exist, a page that says
    so and offers to add the first line."""
    user = request.user
    mine = selectors.scope_mine(user=user)
    if request.method == "POST":
        return _add_daily_line(request, mine)
    document = selectors.document_get(scope=mine, path=selectors.daily_log_path(user=user))
    if document is None:
        return _respond(request, _today_panel(request))
    url = document_url(mine, document.path)
    if _wants_panel(request):
        return _respond(request, _document_panel(request, mine, document), push_url=url)
    return HttpResponseRedirect(url)


def _add_daily_line(request: HtmxHttpRequest, mine: Scope) -> HttpResponse:
    form = DailyLineForm(request.POST)
    if form.is_valid():
        try:
            document = well_known.append_daily_memory(
                user=request.user, content=form.cleaned_data["line"], actor=_actor(request)
            )
        except ServiceError as error:
            form.add_error("line", error.message)
    if form.errors:
        path = selectors.daily_log_path(user=request.user)
        existing = selectors.document_get(scope=mine, path=path)
        if existing is None:
            panel = _today_panel(request, form)
        else:
            panel = _document_panel(request, mine, existing, daily_form=form)
        return _respond(request, panel, status=_error_status(request))
    return _show_changed(request, mine, document, "Added to today's log.")
