"""Forms for the Agents page and sign-up. Writes still go through profiles.services."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from profiles.models import (
    MAX_LLM_DAILY_TOKENS,
    MAX_TOKEN_BUDGET,
    MIN_LLM_DAILY_TOKENS,
    MIN_TOKEN_BUDGET,
    Agent,
    AgentToken,
    Profile,
    ReadRule,
)
from profiles.naming import clean_display_name
from profiles.services import RANGE_MESSAGES


class AgentForm(forms.Form):
    name = forms.CharField(
        label="Agent name",
        max_length=Agent._meta.get_field("display_name").max_length,
        help_text="Any name in any script, e.g. Claude Desktop or Асистент. Paths and tokens "
        "use a plain form of it (claude-desktop, asistent).",
    )
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=Agent._meta.get_field("description").max_length,
        help_text="Optional: where this agent runs or what it does.",
    )


class AgentRenameForm(forms.Form):
    """An agent's name as pages show it, in any script; its name in paths and tokens stays."""

    display_name = forms.CharField(
        label="Name",
        max_length=Agent._meta.get_field("display_name").max_length,
        help_text="How pages name this agent. Its name in paths and tokens stays as it is.",
    )

    def clean_display_name(self) -> str:
        name = clean_display_name(self.cleaned_data["display_name"])
        if not name:
            raise forms.ValidationError("Give the agent a name.")
        return name


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


def _range_errors(field: str, low: int, high: int) -> dict[str, str]:
    message = RANGE_MESSAGES[field].format(low=low, high=high)
    return {"min_value": message, "max_value": message, "invalid": message, "required": message}


class LearningSettingsForm(forms.Form):
    """The Settings page's "Learning from turns": the switch and the two budgets. Every field
    is required (an unchecked box is off), so a stray POST never resets a budget."""

    auto_learn = forms.BooleanField(label="Learn from the turns my agents report", required=False)
    profile_budget = forms.IntegerField(
        label="Profile budget (tokens)",
        min_value=MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        error_messages=_range_errors("profile_budget", MIN_TOKEN_BUDGET, MAX_TOKEN_BUDGET),
    )
    llm_daily_tokens = forms.IntegerField(
        label="Daily LLM budget (tokens)",
        min_value=MIN_LLM_DAILY_TOKENS,
        max_value=MAX_LLM_DAILY_TOKENS,
        error_messages=_range_errors(
            "llm_daily_tokens", MIN_LLM_DAILY_TOKENS, MAX_LLM_DAILY_TOKENS
        ),
    )


class HeartbeatSettingsForm(forms.Form):
    """The Settings page's heartbeat: the switch and the webhook URL (checked, and saved, by
    profiles.services.profile_set_heartbeat). `setting` names the form (see ReviewSettingForm)."""

    setting = forms.ChoiceField(choices=[("heartbeat", "heartbeat")], widget=forms.HiddenInput)
    heartbeat_enabled = forms.BooleanField(label="Run my heartbeat checklist", required=False)
    notify_webhook_url = forms.CharField(
        label="Notification webhook URL",
        required=False,
        strip=True,
        max_length=Profile._meta.get_field("notify_webhook_url").max_length,
    )


class WebhookSecretForm(forms.Form):
    """ "Rotate the signing secret": nothing to fill in but the form's name."""

    setting = forms.ChoiceField(
        choices=[("heartbeat-secret", "heartbeat-secret")], widget=forms.HiddenInput
    )


class AgentLearningForm(forms.Form):
    """An agent's "Learns from turns" switch: 1 on, 0 off; anything else is refused."""

    learns_from_turns = forms.TypedChoiceField(
        choices=[("1", "On"), ("0", "Off")], coerce=lambda value: value == "1"
    )


class ReadRulesForm(forms.Form):
    """What an agent reads: a rule and its tags for memories, a rule and its folders for
    documents. Tags and folders are typed as a list (spaces or commas between them, "#"
    optional); profiles.services.agent_set_read_rules checks and normalises them."""

    memory_rule = forms.ChoiceField(label="Memories", choices=ReadRule.choices)
    memory_tags = forms.CharField(
        label="Tags",
        required=False,
        max_length=1000,
        help_text="e.g. #health #private",
    )
    document_rule = forms.ChoiceField(label="Documents", choices=ReadRule.choices)
    document_folders = forms.CharField(
        label="Folders",
        required=False,
        max_length=4000,
        help_text="e.g. projects/acme journal",
    )

    @staticmethod
    def split(text: str) -> list[str]:
        """The items of a typed list: separated by commas, spaces or new lines."""
        return [item for item in text.replace(",", " ").split() if item]


class SignupForm(UserCreationForm):
    """Username, password and confirmation; the user is created by signup_create_user."""

    class Meta(UserCreationForm.Meta):
        fields = ("username",)
