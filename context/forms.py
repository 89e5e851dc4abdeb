"""Forms of the Documents pages (pages/views/documents.py).

They check what the services check (path rules, body size) so errors show next to the
field before anything is written; the views then call one service and attach anything
the service still refuses to the field it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms

from context.paths import InvalidPath, normalize_path
from context.selectors import (
    document_get,
    path_writable,
    shared_path_refusal,
    writable_scopes,
)
from context.services import MAX_BODY_BYTES

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

CONTENT_ROWS = 18


def clean_body(text: str) -> str:
    """Browsers send textarea lines as CRLF; documents keep LF. Refuse what services refuse
    (CharField already refuses NUL characters)."""
    text = text.replace("\r\n", "\n")
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > MAX_BODY_BYTES:
        raise forms.ValidationError(
            f"Content is {size} bytes long; the largest document allowed is "
            f"{MAX_BODY_BYTES} bytes (1 MB).",
            code="too_large",
        )
    return text


def _content_field(label: str = "Content") -> forms.CharField:
    return forms.CharField(
        label=label,
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": CONTENT_ROWS, "spellcheck": "true", "dir": "auto"}),
        help_text="Markdown: # headings, - lists, **bold**, [links](https://example.com).",
    )


class DocumentCreateForm(forms.Form):
    """A new document: where it goes, its path and its first content."""

    scope = forms.ChoiceField(label="Where")
    path = forms.CharField(
        label="Path",
        strip=False,
        help_text="Folders come from the path, e.g. projects/alpha/notes.md or MEMORY.md.",
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "placeholder": "notes/ideas.md", "dir": "auto"}
        ),
    )
    content = _content_field()

    def __init__(self, *args: Any, user: AbstractBaseUser, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", "new")
        super().__init__(*args, **kwargs)
        self.scopes = {scope.key: scope for scope in writable_scopes(user=user)}
        self.fields["scope"].choices = [(key, scope.label) for key, scope in self.scopes.items()]
        if len(self.scopes) == 1:
            self.fields["scope"].widget = forms.HiddenInput()
        self.fields["path"].error_messages["required"] = "Give the document a path."

    def clean_path(self) -> str:
        try:
            return normalize_path(self.cleaned_data["path"])
        except InvalidPath as error:
            raise forms.ValidationError(error.message, code=error.rule) from error

    def clean_content(self) -> str:
        return clean_body(self.cleaned_data["content"])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        scope, path = self.scopes.get(cleaned.get("scope", "")), cleaned.get("path")
        cleaned["scope_obj"] = scope
        if scope is not None and path and not path_writable(scope=scope, path=path):
            self.add_error("path", shared_path_refusal(path))
        elif scope is not None and path and document_get(scope=scope, path=path) is not None:
            self.add_error(
                "path", f"'{path}' already exists in {scope.label}; open it there to edit it."
            )
        return cleaned


class DocumentEditForm(forms.Form):
    """The whole new body of a document, and the version the editor started from."""

    content = _content_field()
    base_version = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput())

    def clean_content(self) -> str:
        return clean_body(self.cleaned_data["content"])


class DailyLineForm(forms.Form):
    """One line for today's log; the service stamps it with the time."""

    line = forms.CharField(
        label="Add a line to today's log",
        max_length=2000,
        help_text="Saved as “- HH:MM your line” in your timezone.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "dir": "auto"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", "daily")
        super().__init__(*args, **kwargs)
        self.fields["line"].error_messages["required"] = "Write what happened first."

    def clean_line(self) -> str:
        return clean_body(self.cleaned_data["line"])
