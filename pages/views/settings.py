"""The Settings page: pausing memory, reviewing agents' new memories, learning from turns
and its budgets, the heartbeat and its webhook, the LLM's use, search stats, export and
import, the password.

It shows several layers, so it lives in pages/: the settings themselves are the Profile's
(profiles.services writes them), the search stats come from search.services, and the LLM,
heartbeat and export panels are each their layer's template tag (llm/templatetags,
briefing/templatetags, portability/templatetags). Every action works as an htmx request (a
200 partial, errors inline) and as a plain form POST (redirect with a message, or the whole
page with errors and status 400).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from learning.user_memory_loading import profile_over_budget
from lib.errors import InvalidInput
from lib.pages import HtmxHttpRequest, add_service_error, done, no_store, render_page
from profiles.forms import (
    HeartbeatSettingsForm,
    LearningSettingsForm,
    MemoryPauseForm,
    ReviewSettingForm,
    WebhookSecretForm,
)
from profiles.models import Profile
from profiles.services import (
    profile_for_user,
    profile_rotate_webhook_secret,
    profile_set_heartbeat,
    profile_update,
)
from search.services import search_stats

TEMPLATE = "pages/settings.html"


def _settings_url() -> str:
    return reverse("pages:settings")


def _learning_form(profile: Profile) -> LearningSettingsForm:
    return LearningSettingsForm(
        initial={
            "auto_learn": profile.auto_learn,
            "profile_budget": profile.profile_budget,
            "llm_daily_tokens": profile.llm_daily_tokens,
        }
    )


def _settings_context(request: HtmxHttpRequest, **extra: Any) -> dict[str, Any]:
    profile = profile_for_user(request.user)
    return {
        "profile": profile,
        "learning_form": _learning_form(profile),
        "profile_over_budget": profile_over_budget(request.user),
        "heartbeat_form": _heartbeat_form(profile),
        "search_stats": search_stats(user=request.user),
        **extra,
    }


def _heartbeat_form(profile: Profile) -> HeartbeatSettingsForm:
    return HeartbeatSettingsForm(
        initial={
            "setting": "heartbeat",
            "heartbeat_enabled": profile.heartbeat_enabled,
            "notify_webhook_url": profile.notify_webhook_url,
        }
    )


@login_required
@require_POST
def learning_settings(request: HtmxHttpRequest) -> HttpResponse:
    """Save "Learning from turns" (the switch and both budgets) through profile_update; a
    number out of range keeps everything as it was and says which and why."""
    form = LearningSettingsForm(request.POST)
    profile = None
    if form.is_valid():
        try:
            profile = profile_update(
                user=request.user,
                auto_learn=form.cleaned_data["auto_learn"],
                profile_budget=form.cleaned_data["profile_budget"],
                llm_daily_tokens=form.cleaned_data["llm_daily_tokens"],
            )
        except InvalidInput as error:
            add_service_error(form, error)
    if profile is None:
        if request.htmx:
            context = {
                "profile": profile_for_user(request.user),
                "learning_form": form,
                "profile_over_budget": profile_over_budget(request.user),
            }
            return render_page(request, TEMPLATE, context, partial="learning")
        context = _settings_context(request, learning_form=form)
        return render_page(request, TEMPLATE, context, status=400)
    if profile.auto_learn:
        message = "Saved. Mnemo learns from the turns of the agents switched on in the Agents page."
    else:
        message = "Saved. Learning from turns is off: reported turns are kept, nothing is learned."
    if request.htmx:
        context = {
            "profile": profile,
            "learning_form": _learning_form(profile),
            "learning_message": message,
            # A new budget may put the stored profile over it, or back within it.
            "profile_over_budget": profile_over_budget(request.user),
        }
        return render_page(request, TEMPLATE, context, partial="learning")
    return done(request, message, _settings_url())


@login_required
@require_http_methods(["GET", "POST"])
@never_cache
def settings_page(request: HtmxHttpRequest) -> HttpResponse:
    """The page; a POST saves the form its `setting` names: the heartbeat, its webhook
    secret's rotation, else the review rule (the forms on the page post back to it)."""
    if request.method == "POST":
        setting = request.POST.get("setting")
        if setting == "heartbeat":
            return _heartbeat_setting_save(request)
        if setting == "heartbeat-secret":
            return _webhook_secret_rotate(request)
        return _review_setting_save(request)
    return render_page(request, TEMPLATE, _settings_context(request))


def _heartbeat_response(
    request: HtmxHttpRequest, form: HeartbeatSettingsForm | None, *, status: int = 200, **extra: Any
) -> HttpResponse:
    """The heartbeat part (htmx) or the whole page, with the form as posted (an error) or
    fresh. A response showing a new secret is never stored: it is shown this once."""
    profile = profile_for_user(request.user)
    heartbeat_form = form or _heartbeat_form(profile)
    if request.htmx:
        context = {"profile": profile, "heartbeat_form": heartbeat_form, **extra}
        response = render_page(request, TEMPLATE, context, partial="heartbeat")
    else:
        context = _settings_context(request, heartbeat_form=heartbeat_form, **extra)
        response = render_page(request, TEMPLATE, context, status=status)
    return no_store(response) if extra.get("new_webhook_secret") else response


def _heartbeat_setting_save(request: HtmxHttpRequest) -> HttpResponse:
    """Save the heartbeat switch and the webhook URL through profile_set_heartbeat; a URL
    that is not http(s) keeps everything as it was and says why."""
    form = HeartbeatSettingsForm(request.POST)
    saved = None
    if form.is_valid():
        try:
            saved = profile_set_heartbeat(
                user=request.user,
                enabled=form.cleaned_data["heartbeat_enabled"],
                webhook_url=form.cleaned_data["notify_webhook_url"],
            )
        except InvalidInput as error:
            add_service_error(form, error)
    if saved is None:
        return _heartbeat_response(request, form, status=400)
    if saved.profile.heartbeat_enabled:
        message = "Saved. Your heartbeat checklist runs on its schedule."
    else:
        message = "Saved. The heartbeat is off: your checklist does not run on its schedule."
    if saved.new_secret or request.htmx:
        return _heartbeat_response(
            request, None, heartbeat_message=message, new_webhook_secret=saved.new_secret
        )
    return done(request, message, _settings_url())


def _webhook_secret_rotate(request: HtmxHttpRequest) -> HttpResponse:
    if not WebhookSecretForm(request.POST).is_valid():
        return _heartbeat_response(request, None, status=400, heartbeat_error=True)
    saved = profile_rotate_webhook_secret(user=request.user)
    message = "A new signing secret is in use: update your receiver with it now."
    return _heartbeat_response(
        request, None, heartbeat_message=message, new_webhook_secret=saved.new_secret
    )


def _review_setting_save(request: HtmxHttpRequest) -> HttpResponse:
    return _save_switch(
        request,
        ReviewSettingForm(request.POST),
        partial="review-setting",
        name="review",
        save=lambda on: profile_update(user=request.user, review_agent_memories=on),
        field="review_agent_memories",
        messages_by_value=(
            "Saved. Agents' new memories now apply at once, shown as noted by the agent.",
            "Saved. Agents' new memories now wait for your review in the inbox.",
        ),
    )


def _save_switch(
    request: HtmxHttpRequest,
    form: forms.Form,
    *,
    partial: str,
    name: str,
    save: Callable[[bool], Profile],
    field: str,
    messages_by_value: tuple[str, str],
) -> HttpResponse:
    """Save one on/off setting of the Settings page: the partial with a message (htmx),
    else a redirect; a bad form shows `<name>_error`."""
    if not form.is_valid():
        if request.htmx:
            context = {"profile": profile_for_user(request.user), f"{name}_error": True}
            return render_page(request, TEMPLATE, context, partial=partial)
        context = _settings_context(request, **{f"{name}_error": True})
        return render_page(request, TEMPLATE, context, status=400)
    on = form.cleaned_data[field]
    profile = save(on)
    message = messages_by_value[bool(on)]
    if request.htmx:
        context = {"profile": profile, f"{name}_message": message}
        return render_page(request, TEMPLATE, context, partial=partial)
    return done(request, message, _settings_url())


@login_required
@require_POST
def memory_pause(request: HtmxHttpRequest) -> HttpResponse:
    return _save_switch(
        request,
        MemoryPauseForm(request.POST),
        partial="memory-status",
        name="pause",
        save=lambda paused: profile_update(user=request.user, memory_paused=paused),
        field="paused",
        messages_by_value=(
            "Memory resumed. Agents can change your memory again.",
            "Memory paused. Agents can read your memory but not change it.",
        ),
    )
