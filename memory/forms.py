"""Forms of the Context page.

They validate the way the services do (memory_clean, parse_key) so errors show next to
the field before anything is written; the views then call one service.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from typing import TYPE_CHECKING, Any

from django import forms
from django.utils.text import slugify

from activity.actors import Actor
from lib.errors import InvalidInput
from memory.keys import ENTRY_KINDS, PLATFORM_PATTERN, SLUG_PATTERN
from memory.models import Memory
from memory.services import memory_clean
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
SLUG_MAX = 60  # derived slugs stay short; typed ones may use the full 80


@functools.cache
def timezone_names() -> tuple[str, ...]:
    return tuple(sorted(zoneinfo.available_timezones()))


def split_tags(text: str) -> list[str]:
    return [tag.strip() for tag in text.split(",") if tag.strip()]


def _add_service_error(form: forms.Form, error: InvalidInput, fields: dict[str, str]) -> None:
    """Attach a service error to the form field it names (`fields` maps service → form)."""
    form.add_error(fields.get(error.field or ""), error.message)


class ProfileFieldForm(forms.Form):
    """One profile key (name, role, company, timezone or summary); empty means delete it."""

    def __init__(self, *args: Any, key: str, user: AbstractBaseUser, **kwargs: Any) -> None:
        kwargs.setdefault("prefix", "profile")
        super().__init__(*args, **kwargs)
        self.key = key
        self.user = user
        label, help_text = PROFILE_FIELDS[key]
        if key == "summary":
            widget: forms.Widget = forms.Textarea(attrs={"rows": 4})
        elif key == "timezone":
            widget = forms.TextInput(attrs={"list": "timezones", "autocomplete": "off"})
        else:
            widget = forms.TextInput()
        self.fields[key] = forms.CharField(
            label=label,
            required=False,
            strip=True,
            widget=widget,
            help_text=f"{help_text} {CLEAR_HELP}",
        )

    @property
    def field(self) -> forms.BoundField:
        return self[self.key]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        value = cleaned.get(self.key, "")
        if value:
            try:
                memory_clean(key=self.key, value=value, actor=Actor.for_user(self.user))
            except InvalidInput as error:
                _add_service_error(self, error, {"value": self.key, "key": self.key})
        return cleaned


class StyleForm(forms.Form):
    """Tone and verbosity for one platform. An empty aspect removes that key."""

    platform = forms.CharField(
        label="Platform",
        max_length=32,
        help_text="Where you talk to the assistant: a-z, 0-9 and _ (e.g. slack, gmail).",
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
        platform = self.cleaned_data["platform"].strip().lower()
        if not re.fullmatch(PLATFORM_PATTERN, platform):
            raise forms.ValidationError("Use 1–32 characters of a-z, 0-9 and '_'.")
        if (
            self.adding
            and Memory.objects.filter(
                user=self.user, key__in=[f"tone_{platform}", f"verbosity_{platform}"]
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
                        _add_service_error(self, error, {"value": aspect, "key": "platform"})
        return cleaned


class EntryForm(forms.Form):
    """Add an entry (kind, slug, text, tags) or, with `memory`, edit its text and tags."""

    kind = forms.ChoiceField(label="Kind", choices=[(kind, kind.title()) for kind in ENTRY_KINDS])
    slug = forms.CharField(
        label="Slug",
        required=False,
        max_length=80,
        help_text="A short id such as weekly-review. Leave empty to make one from the text.",
    )
    value = forms.CharField(label="Text", widget=forms.Textarea(attrs={"rows": 3}))
    tags = forms.CharField(
        label="Tags", required=False, help_text="Comma-separated, e.g. work, reports."
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
            kwargs.setdefault("initial", {"value": memory.value, "tags": ", ".join(memory.tags)})
        else:
            kwargs.setdefault("prefix", "entry")
        super().__init__(*args, **kwargs)
        self.user = user
        self.memory = memory
        self.fields["value"].error_messages["required"] = "Write what the assistant should know."
        if memory is not None:
            del self.fields["kind"]
            del self.fields["slug"]

    @property
    def key(self) -> str:
        return self.cleaned_data["key"]

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"].strip().lower()
        if slug and not re.fullmatch(SLUG_PATTERN, slug):
            raise forms.ValidationError(
                "Start with a-z or 0-9 and use only a-z, 0-9, '_' and '-' (e.g. weekly-review)."
            )
        return slug

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if self.memory is not None:
            key = self.memory.key
        else:
            key = self._new_key(cleaned["kind"], cleaned["slug"], cleaned["value"])
            if key is None:
                return cleaned
        cleaned["key"] = key
        cleaned["tag_list"] = split_tags(cleaned.get("tags", ""))
        try:
            memory_clean(
                key=key,
                value=cleaned["value"],
                actor=Actor.for_user(self.user),
                tags=cleaned["tag_list"],
            )
        except InvalidInput as error:
            _add_service_error(self, error, {"value": "value", "tags": "tags", "key": "slug"})
        return cleaned

    def _new_key(self, kind: str, slug: str, value: str) -> str | None:
        taken = Memory.objects.filter(user=self.user, key__startswith=f"{kind}:")
        if slug:
            key = f"{kind}:{slug}"
            if taken.filter(key=key).exists():
                self.add_error("slug", f"You already have {key}; edit it in the list instead.")
                return None
            return key
        full = slugify(value)
        base = full[:SLUG_MAX]
        if len(full) > SLUG_MAX and "-" in base:
            base = base.rsplit("-", 1)[0]  # end on a whole word
        base = base.strip("-_")
        if not base:
            self.add_error("slug", "Could not make a slug from the text; type one (e.g. note-1).")
            return None
        existing = set(taken.values_list("key", flat=True))
        key, number = f"{kind}:{base}", 2
        while key in existing:
            key, number = f"{kind}:{base}-{number}", number + 1
        return key


class BudgetForm(forms.Form):
    token_budget = forms.IntegerField(
        label="Token budget",
        min_value=MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        help_text=f"How much the working memory may use: {MIN_TOKEN_BUDGET}–{MAX_TOKEN_BUDGET}.",
        widget=forms.NumberInput(attrs={"step": 100}),
    )


class EntryFilterForm(forms.Form):
    kind = forms.ChoiceField(
        label="Filter by kind",
        required=False,
        choices=[("", "All kinds"), *[(kind, kind.title()) for kind in ENTRY_KINDS]],
    )
    tag = forms.CharField(label="Filter by tag", required=False, max_length=40)
    q = forms.CharField(label="Search text", required=False, max_length=200)

    def filters(self) -> dict[str, str]:
        if not self.is_valid():
            return {"kind": "", "tag": "", "q": ""}
        return {
            "kind": self.cleaned_data["kind"],
            "tag": self.cleaned_data["tag"].strip().lower(),
            "q": self.cleaned_data["q"].strip(),
        }
