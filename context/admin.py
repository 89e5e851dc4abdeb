from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from activity.actors import Actor
from activity.admin import AppendOnlyAdmin
from context.models import (
    Document,
    DocumentChunk,
    DocumentProposal,
    DocumentVersion,
    ScopeGrant,
    SharedScope,
)
from context.paths import InvalidPath, normalize_path
from context.services import document_delete, document_write
from context.shared_scopes import scope_grant_revoke, scope_grant_set
from lib.admin import ReadOnlyAdmin
from lib.errors import InvalidInput, NotFound
from profiles.services import agent_check_owner

SCOPES = {
    "global": {"user__isnull": True, "shared_scope__isnull": True},
    "user": {"user__isnull": False, "agent__isnull": True},
    "agent": {"agent__isnull": False},
    "shared": {"shared_scope__isnull": False},
}


class DocumentForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ("user", "agent", "shared_scope", "path", "body")

    def clean_path(self) -> str:
        try:
            return normalize_path(self.cleaned_data["path"])
        except InvalidPath as error:
            raise forms.ValidationError(error.message, code=error.rule) from error

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if not self.has_error("user"):
            try:
                agent_check_owner(agent=cleaned.get("agent"), user=cleaned.get("user"))
            except InvalidInput as error:
                self.add_error(error.field, error.message)
        if cleaned.get("shared_scope") and (cleaned.get("user") or cleaned.get("agent")):
            self.add_error("shared_scope", "A shared scope's documents belong to no user or agent.")
        return cleaned


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple]:
        return [(scope, scope) for scope in SCOPES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> QuerySet[Document]:
        scope = self.value()
        return queryset.filter(**SCOPES[scope]) if scope in SCOPES else queryset


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    form = DocumentForm
    list_display = ("path", "scope", "user", "agent", "updated_at")
    list_filter = (ScopeFilter, "updated_at")
    search_fields = ("path", "user__username", "agent__name", "shared_scope__slug")
    list_select_related = ("user", "agent", "shared_scope")
    autocomplete_fields = ("user", "agent", "shared_scope")
    ordering = ("path", "id")

    def get_readonly_fields(self, request: HttpRequest, obj: Document | None = None) -> tuple:
        # A document's scope and path are its identity; moving one is a new document.
        if obj is None:
            return ()
        return ("user", "agent", "shared_scope", "path", "created_at", "updated_at")

    def save_model(
        self, request: HttpRequest, obj: Document, form: forms.ModelForm, change: bool
    ) -> None:
        if change and not form.has_changed():
            return  # no version for a save that changes nothing
        saved = document_write(
            user=obj.user,
            agent=obj.agent,
            shared_scope=obj.shared_scope,
            path=obj.path,
            content=obj.body,
            actor=Actor.for_user(request.user),
        )
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        document_delete(
            user=obj.user,
            agent=obj.agent,
            shared_scope=obj.shared_scope,
            path=obj.path,
            actor=Actor.for_user(request.user),
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        actor = Actor.for_user(request.user)
        for document in queryset.select_related("user", "agent", "shared_scope"):
            try:
                document_delete(
                    user=document.user,
                    agent=document.agent,
                    shared_scope=document.shared_scope,
                    path=document.path,
                    actor=actor,
                )
            except NotFound:
                continue  # deleted meanwhile

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple:
        # A document's chunks are its search index and go with it; deleting the document
        # needs no permission on them (their own admin is read-only).
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(DocumentChunk._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    @admin.display(description="scope")
    def scope(self, obj: Document) -> str:
        return obj.scope


class ScopeGrantInline(admin.TabularInline):
    model = ScopeGrant
    extra = 1
    autocomplete_fields = ("user",)
    fields = ("user", "access", "created_at")
    readonly_fields = ("created_at",)


@admin.register(SharedScope)
class SharedScopeAdmin(admin.ModelAdmin):
    """Named scopes shared with some users (read or read-write); their agents read them
    beside the user's own documents. A revoked grant (a deleted row) is gone on the next
    request. A scope that still holds documents cannot be deleted: delete them first."""

    list_display = ("slug", "description", "grant_count", "created_at")
    search_fields = ("slug", "description")
    inlines = (ScopeGrantInline,)

    def get_readonly_fields(self, request: HttpRequest, obj: SharedScope | None = None) -> tuple:
        # Agents and pages name a scope by its slug; renaming it would move it under them.
        return ("created_at",) if obj is None else ("slug", "created_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[SharedScope]:
        return super().get_queryset(request).annotate(grant_total=Count("grants"))

    @admin.display(description="grants", ordering="grant_total")
    def grant_count(self, obj: SharedScope) -> int:
        return obj.grant_total

    def save_formset(
        self, request: HttpRequest, form: forms.ModelForm, formset: Any, change: bool
    ) -> None:
        """Grants change through context/shared_scopes.py, as the share_scope command's do."""
        if formset.model is not ScopeGrant:
            super().save_formset(request, form, formset, change)
            return
        scope = form.instance
        # What the admin's change message lists (ModelAdmin.construct_change_message).
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        for grant_form in formset.forms:
            data = grant_form.cleaned_data
            if not data or not (grant_form.has_changed() or data.get("DELETE")):
                continue
            before = ScopeGrant.objects.filter(pk=grant_form.instance.pk).first()
            if before is not None and (data.get("DELETE") or before.user_id != data["user"].pk):
                scope_grant_revoke(scope=scope, user=before.user)
                formset.deleted_objects.append(before)
            if not data.get("DELETE"):
                grant = scope_grant_set(scope=scope, user=data["user"], access=data["access"])
                formset.new_objects.append(grant)


@admin.register(DocumentVersion)
class DocumentVersionAdmin(AppendOnlyAdmin):
    """Every change to every document; restore from the Documents page or the services."""

    list_display = ("path", "action", "scope_owner", "actor", "created_at")
    list_filter = ("action", "actor_type", "created_at")
    search_fields = ("path", "user__username", "agent__name")
    list_select_related = ("user", "agent", "shared_scope", "actor_user", "actor_agent")
    date_hierarchy = "created_at"

    @admin.display(description="owner")
    def scope_owner(self, obj: DocumentVersion) -> str:
        if obj.shared_scope_id is not None:
            return obj.shared_scope.name
        if obj.user_id is None:
            return "global"
        return f"{obj.user} (agent {obj.agent})" if obj.agent_id else str(obj.user)


@admin.register(DocumentChunk)
class DocumentChunkAdmin(AppendOnlyAdmin):
    """What search indexes: written by the document services, never by hand."""

    list_display = ("document", "ordinal", "user", "embedding_model", "words")
    list_filter = ("embedding_model",)
    search_fields = ("document__path", "user__username", "text")
    list_select_related = ("document", "user")
    exclude = ("embedding", "search_vector")

    @admin.display(description="words")
    def words(self, obj: DocumentChunk) -> int:
        return len(obj.text.split())


@admin.register(DocumentProposal)
class DocumentProposalAdmin(ReadOnlyAdmin):
    """Agents' changes to users' identity files, waiting in their review inboxes: to look
    at; only the user decides (on the inbox page), through context/review.py."""

    list_display = ("created_at", "path", "user", "action", "status", "actor")
    list_filter = ("status", "action")
    search_fields = ("path", "user__username", "actor_agent__name")
    list_select_related = ("user", "actor_user", "actor_agent")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "user",
        "path",
        "action",
        "status",
        "actor_type",
        "actor_agent",
        "content",
        "before",
        "base_version",
        "expires_at",
        "decided_at",
        "decided_by",
        "applied",
    )

    @admin.display(description="proposed by")
    def actor(self, obj: DocumentProposal) -> str:
        return obj.actor_label
