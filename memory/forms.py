"""Forms of the Context page (pages/views/context_page.py and its tabs' modules).

They check the shape of what was typed. Where one Save makes several writes (the profile,
a platform's styles, an entry's kind and text) they also validate each value the way the
services do (memory_clean), so a refused field writes nothing; otherwise the view calls
the service and puts its errors on the fields.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any, ClassVar

from django import forms
from django.utils import timezone

from activity.actors import Actor
from lib.errors import InvalidInput
from lib.pages import add_service_error
from lib.tags import clean_platform, clean_tags, normalize_tag, tag_notes
from memory.keys import ENTRY_KINDS
from memory.models import MAX_SESSION_LENGTH, MAX_TAGS, Memory
from memory.validation import memory_clean
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

PROFILE_FIELDS: dict[str, tuple[str, str]] = {
    "name": ("Name", "What your assistant calls you."),
    "role": ("Role", "e.g. Head of Growth."),
    "company": ("Company", "Where you work."),
    "timezone": ("Timezone", "An IANA zone such as Europe/Paris or Asia/Singapore."),
    "summary": ("Summary", "A few lines about you and your work."),
}
CLEAR_HELP = "Clear the field and save to remove it."
# Entry kinds as people read them.
KIND_LABELS: dict[str, str] = {
    kind: {"bugfix": "Bug fix"}.get(kind, kind.capitalize()) for kind in ENTRY_KINDS
}


def split_tags(text: str) -> list[str]:
    return [tag.strip() for tag in text.split(",") if tag.strip()]


class ProfileForm(forms.Form):
    """The five profile keys in one form with one Save; an emptied field deletes its key.

    Every typed value is validated before anything is written, so a refused field saves
    nothing and the form comes back with all the text as typed.
    """

    def __init__(self, *args: Any, user: AbstractBaseUser, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", "profile")
        super().__init__(*args, **kwargs)
        self.user = user
        for key, (label, help_text) in PROFILE_FIELDS.items():
            if key == "summary":
                widget: forms.Widget = forms.Textarea(attrs={"rows": 4, "dir": "auto"})
            elif key == "timezone":
                widget = forms.TextInput(attrs={"list": "timezones", "autocomplete": "off"})
            else:
                widget = forms.TextInput(attrs={"dir": "auto"})  # a name in any script
            self.fields[key] = forms.CharField(
                label=label,
                required=False,
                strip=True,
                widget=widget,
                help_text=f"{help_text} {CLEAR_HELP}",
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        for key in PROFILE_FIELDS:
            if cleaned.get(key):
                try:
                    fields = memory_clean(
                        key=key, value=cleaned[key], actor=Actor.for_user(self.user)
                    )
                except InvalidInput as error:
                    self.add_error(key, error.message)
                else:
                    if key == "timezone":  # saved by its canonical name (lib/timezones.py)
                        cleaned[key] = fields["value"]
        return cleaned


class StyleForm(forms.Form):
    """Tone and verbosity for one platform. An empty aspect removes that key."""

    platform = forms.CharField(
        label="Platform",
        max_length=100,
        help_text="Where you talk to the assistant (e.g. Slack, Microsoft Teams): kept as "
        "a-z, 0-9 and _ (microsoft_teams).",
    )
    tone = forms.CharField(
        label="Tone", required=False, max_length=200, help_text="e.g. casual, formal."
    )
    verbosity = forms.CharField(
        label="Verbosity", required=False, max_length=200, help_text="e.g. brief, detailed."
    )

    def __init__(self, *args: Any, user: AbstractBaseUser, adding: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.user = user
        self.adding = adding
        if not adding:
            self.fields["platform"].widget = forms.HiddenInput()

    def clean_platform(self) -> str:
        try:
            platform = clean_platform(self.cleaned_data["platform"])
        except InvalidInput as error:
            raise forms.ValidationError(error.message) from error
        if (
            self.adding
            and Memory.objects.filter(
                user=self.user,
                owner_agent=None,
                key__in=[f"tone_{platform}", f"verbosity_{platform}"],
            ).exists()
        ):
            raise forms.ValidationError(
                f"'{platform}' already has styles; change them in its row below."
            )
        return platform

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        platform = cleaned.get("platform")
        if self.adding and not cleaned.get("tone") and not cleaned.get("verbosity"):
            self.add_error("tone", "Give a tone, a verbosity or both.")
        if platform:
            for aspect in ("tone", "verbosity"):
                if cleaned.get(aspect):
                    try:
                        memory_clean(
                            key=f"{aspect}_{platform}",
                            value=cleaned[aspect],
                            actor=Actor.for_user(self.user),
                        )
                    except InvalidInput as error:
                        add_service_error(self, error, {"value": aspect, "key": "platform"})
        return cleaned


class EntryForm(forms.Form):
    """Add an entry (kind, text, tags, and under "more" an optional key, the day it
    happened or was said and the conversation) or, with `memory`, edit its kind, text,
    tags, day and conversation.

    Adding checks the shape only: entry_create makes the key from the text (or takes the
    typed one), refuses a key that is taken, and the view puts its errors on the fields
    (SERVICE_FIELDS). Editing checks the text and tags as memory_update will before anything
    is written, since a changed kind is a second write (memory_rename).
    """

    # A service error's field -> this form's field, where the names differ.
    SERVICE_FIELDS: ClassVar[dict[str, str]] = {"slug": "key"}

    kind = forms.ChoiceField(label="Kind", choices=list(KIND_LABELS.items()))
    value = forms.CharField(label="Text", widget=forms.Textarea(attrs={"rows": 3, "dir": "auto"}))
    tags = forms.CharField(
        label="Tags", required=False, help_text="Comma-separated, e.g. work, reports."
    )
    key = forms.CharField(
        label="Key",
        required=False,
        max_length=80,
        help_text=(
            "Made from the text when left empty (e.g. prefers-oat-milk). Type one to choose "
            "it: a-z, 0-9, '_' and '-'."
        ),
    )
    # A day is as precise as people say it; agents may give the time (memory/occurrence.py).
    occurred_at = forms.DateField(
        label="Said or happened on",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        help_text="The day it happened or was said. Empty: today.",
        error_messages={"invalid": "Enter a date such as 2023-05-08."},
    )
    session = forms.CharField(
        label="Conversation",
        required=False,
        max_length=MAX_SESSION_LENGTH,
        help_text="Which conversation it came from, if it matters (e.g. planning-call).",
    )

    def __init__(
        self,
        *args: Any,
        user: AbstractBaseUser,
        memory: Memory | None = None,
        **kwargs: Any,
    ) -> None:
        if memory is not None:
            kwargs.setdefault("prefix", f"edit-{memory.pk}")
            kwargs.setdefault(
                "initial",
                {
                    "kind": memory.kind,
                    "value": memory.value,
                    "tags": ", ".join(memory.tags),
                    "occurred_at": local_day(memory),
                    "session": memory.session,
                },
            )
        else:
            kwargs.setdefault("prefix", "entry")
        super().__init__(*args, **kwargs)
        self.user = user
        self.memory = memory
        self.fields["value"].error_messages["required"] = "Write what the assistant should know."
        if memory is not None:
            del self.fields["key"]
            self.fields["kind"].required = False  # left out: the kind it has
            self.fields["occurred_at"].help_text = "The day it happened or was said."

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        cleaned["tag_list"] = split_tags(cleaned.get("tags", ""))
        if self.memory is not None and not self.errors:
            try:
                memory_clean(
                    key=self.memory.key,
                    value=cleaned["value"],
                    actor=Actor.for_user(self.user),
                    tags=cleaned["tag_list"],
                    user=self.user,
                    occurred_at=cleaned.get("occurred_at"),
                    session=cleaned.get("session"),
                )
            except InvalidInput as error:
                add_service_error(self, error, self.SERVICE_FIELDS)
        return cleaned


def local_day(memory: Memory) -> date:
    """The day the memory was said, in the zone the page shows (pages/middleware.py)."""
    return timezone.localdate(memory.occurred_at)


class BudgetForm(forms.Form):
    token_budget = forms.IntegerField(
        label="Token budget",
        min_value=MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        help_text=f"How much the working memory may use: {MIN_TOKEN_BUDGET}–{MAX_TOKEN_BUDGET}.",
        widget=forms.NumberInput(attrs={"step": 100}),
    )


class EntryFilterForm(forms.Form):
    # Whose entries: the user's memory (""), or one agent's own notes (its name). The
    # choices are the user's agents that have notes (agents_with_notes).
    agent = forms.ChoiceField(label="Whose", required=False, choices=[("", "Your memory")])
    kind = forms.ChoiceField(
        label="Filter by kind",
        required=False,
        choices=[("", "All kinds"), *KIND_LABELS.items()],
    )
    tag = forms.CharField(label="Filter by tag", required=False, max_length=40)
    q = forms.CharField(label="Search text", required=False, max_length=200)

    def __init__(self, *args: Any, agents: list[tuple[Any, int]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [
            ("", "Your memory"),
            *((agent.name, f"{agent.label}'s notes ({count})") for agent, count in agents),
        ]
        if not agents:  # no agent has notes: nothing to choose
            self.fields["agent"].widget = forms.HiddenInput()

    def filters(self) -> dict[str, str]:
        if not self.is_valid():
            return {"agent": "", "kind": "", "tag": "", "q": ""}
        return {
            "agent": self.cleaned_data["agent"],
            "kind": self.cleaned_data["kind"],
            # The rule tags are stored by: "Morning Routine" finds #morning-routine.
            "tag": normalize_tag(self.cleaned_data["tag"]),
            "q": self.cleaned_data["q"].strip(),
        }


# What the entry list's bulk form does with the selected entries, by its buttons' values.
BULK_ACTIONS: dict[str, str] = {
    "pin": "Pin",
    "unpin": "Unpin",
    "tag_add": "Add tags",
    "tag_remove": "Remove tags",
    "delete": "Delete",
}


class IdListField(forms.Field):
    """Ids sent as repeated fields (`ids=3&ids=7`): a list of positive integers."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[int]:
        if not value:
            return []
        values = value if isinstance(value, list | tuple) else [value]
        if not all(isinstance(item, str) and item.isdigit() for item in values):
            raise forms.ValidationError("That selection is not one this page made.")
        return [int(item) for item in values]


class EntryBulkForm(forms.Form):
    """The entry list's bulk actions (memory/bulk.py): the entries ticked (`ids`), and every
    entry of the page shown when `all_on_page` is ticked (the page lists them in `page_ids`,
    so "Select all on this page" works without JavaScript too). Re-tagging takes tags as
    typed, comma-separated; they are kept normalised (lib/tags.py)."""

    action = forms.ChoiceField(
        choices=list(BULK_ACTIONS.items()),
        error_messages={"required": "Choose what to do with the selected entries."},
    )
    ids = IdListField(required=False)
    page_ids = IdListField(required=False)
    all_on_page = forms.BooleanField(label="Select all on this page", required=False)
    tags = forms.CharField(
        label="Tags to add or remove",
        required=False,
        max_length=400,
        help_text="Comma-separated, e.g. work, reports.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", "bulk")
        super().__init__(*args, **kwargs)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        selected = set(cleaned.get("ids") or [])
        if cleaned.get("all_on_page"):
            selected |= set(cleaned.get("page_ids") or [])
        cleaned["selected"] = sorted(selected)
        if not selected and not self.errors:
            raise forms.ValidationError(
                "Select some entries first: tick their boxes, or Select all on this page."
            )
        cleaned["tag_list"] = split_tags(cleaned.get("tags", ""))
        action = cleaned.get("action", "")
        if action.startswith("tag_"):
            if not cleaned["tag_list"]:
                verb = "add" if action == "tag_add" else "remove"
                self.add_error("tags", f"Type the tags to {verb}, e.g. work, reports.")
            else:
                try:
                    kept = clean_tags(cleaned["tag_list"], limit=MAX_TAGS)
                except InvalidInput as error:
                    self.add_error("tags", error.message)
                else:
                    if not kept:  # every label was an emoji or punctuation alone
                        verb = "add" if action == "tag_add" else "remove"
                        notes = "; ".join(tag_notes(cleaned["tag_list"]))
                        self.add_error("tags", f"No tag to {verb}: {notes}.")
        return cleaned


# What the user types to delete all their memories (pages/views/context_bulk.py delete_all).
DELETE_ALL_PHRASE = "delete all"


class DeleteAllForm(forms.Form):
    confirm = forms.CharField(
        label=f"Type “{DELETE_ALL_PHRASE}” to confirm",
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )

    def clean_confirm(self) -> str:
        typed = " ".join(self.cleaned_data["confirm"].lower().split())
        if typed != DELETE_ALL_PHRASE:
            raise forms.ValidationError(
                f"Type “{DELETE_ALL_PHRASE}” exactly to delete all your memories. "
                "Nothing was deleted."
            )
        return typed
