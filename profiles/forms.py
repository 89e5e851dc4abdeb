"""Forms for the Agents page and sign-up. Writes still go through profiles.services."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from profiles.models import Agent, AgentToken


class AgentForm(forms.Form):
    name = forms.CharField(
        label="Agent name",
        max_length=Agent._meta.get_field("name").max_length,
        help_text="Lowercase letters, digits, '_' and '-', e.g. claude-desktop.",
    )
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=Agent._meta.get_field("description").max_length,
        help_text="Optional: where this agent runs or what it does.",
    )


class TokenForm(forms.Form):
    label = forms.CharField(
        label="Token label",
        required=False,
        max_length=AgentToken._meta.get_field("label").max_length,
        help_text="Optional, e.g. laptop.",
    )


class MemoryPauseForm(forms.Form):
    paused = forms.TypedChoiceField(
        choices=[("1", "Pause"), ("0", "Resume")], coerce=lambda value: value == "1"
    )


class ReviewSettingForm(forms.Form):
    """The Settings page's review rule. `setting` names the form, so a POST without it
    (or with another) is refused instead of read as "review off"."""

    setting = forms.ChoiceField(choices=[("review", "review")], widget=forms.HiddenInput)
    review_agent_memories = forms.BooleanField(
        label="Agents' new memories wait for my review", required=False
    )


class SignupForm(UserCreationForm):
    """Username, password and confirmation; the user is created by signup_create_user."""

    class Meta(UserCreationForm.Meta):
        fields = ("username",)
