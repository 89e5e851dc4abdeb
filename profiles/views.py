"""The Agents page (agents, their API tokens, whether Mnemo learns from each one's turns),
the Settings page (pausing memory, reviewing agents' new memories, learning from turns, the
budget, LLM use, search stats) and open sign-up.

Every action works as an htmx request (a 200 partial, errors inline) and as a plain
form POST (redirect with a message, or the full page with errors and status 400).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from lib.errors import InvalidInput
from lib.pages import render_page
from profiles.forms import (
    AgentForm,
    AgentLearningForm,
    HeartbeatSettingsForm,
    LearningSettingsForm,
    MemoryPauseForm,
    ReviewSettingForm,
    SignupForm,
    TokenForm,
    WebhookSecretForm,
)
from profiles.models import Agent, AgentToken, Profile
from profiles.services import (
    agent_get_or_create,
    agent_set_learning,
    profile_for_user,
    profile_rotate_webhook_secret,
    profile_set_heartbeat,
    profile_update,
    signup_create_user,
    token_create,
    token_revoke,
)
from search.services import search_stats

TEMPLATE = "profiles/agents.html"
SETTINGS_TEMPLATE = "profiles/settings.html"


def _get_agent_for_user(user: Any, agent_id: int) -> Agent:
    agent = Agent.objects.filter(user=user, pk=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


def _get_token_for_user(user: Any, token_id: int) -> AgentToken:
    token = AgentToken.objects.select_related("agent").filter(agent__user=user, pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    return token


def _agents_for(user: Any) -> list[Agent]:
    tokens = AgentToken.objects.defer("token_hash").order_by("-created_at", "-id")
    return list(
        Agent.objects.filter(user=user)
        .order_by("name")
        .prefetch_related(Prefetch("tokens", queryset=tokens))
    )


def _page_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    context: dict[str, Any] = {
        "agents": _agents_for(request.user),
        "agent_form": AgentForm(),
        "token_form": None,
        "new_token": None,
        "auto_learn": profile_for_user(request.user).auto_learn,
    }
    context.update(extra)
    return context


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET"])
@never_cache
def agents_page(request: HttpRequest) -> TemplateResponse:
    history_restore = request.htmx and request.htmx.history_restore_request
    partial = None if history_restore else "page-body"
    return render_page(request, TEMPLATE, _page_context(request), partial=partial)


@login_required
@require_POST
def agent_create(request: HttpRequest) -> HttpResponse:
    form = AgentForm(request.POST)
    agent = None
    existed = False
    if form.is_valid():
        name = form.cleaned_data["name"]
        existed = Agent.objects.filter(user=request.user, name=name).exists()
        if existed:
            form.add_error("name", f"You already have an agent named “{name}”.")
        else:
            try:
                agent = agent_get_or_create(
                    user=request.user, name=name, description=form.cleaned_data["description"]
                )
            except InvalidInput as error:
                form.add_error(error.field if error.field in form.fields else None, error.message)
    if agent is None:
        if request.htmx:
            context = _page_context(request, agent_form=form)
            return render_page(request, TEMPLATE, context, partial="agents")
        return render_page(request, TEMPLATE, _page_context(request, agent_form=form), status=400)
    message = f"Agent “{agent.name}” created. Create a token so it can connect."
    if request.htmx:
        context = _page_context(request, created_agent=agent, agent_message=message)
        return render_page(request, TEMPLATE, context, partial="agents")
    messages.success(request, message)
    return redirect("agents")


@login_required
@require_POST
def token_create_view(request: HttpRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request.user, agent_id)
    form = TokenForm(request.POST)
    if not form.is_valid():
        context = _page_context(request, token_form=form, token_form_agent_id=agent.pk)
        context["agent"] = _agent_from(context, agent)
        if request.htmx:
            return render_page(request, TEMPLATE, context, partial="agent-card")
        return render_page(request, TEMPLATE, context, status=400)
    issued = token_create(agent=agent, label=form.cleaned_data["label"])
    # The raw token exists only in this response: it is never stored, so a later
    # page load cannot show it. Without JS the full page is rendered (no redirect).
    context = _page_context(request, new_token=issued)
    context["agent"] = _agent_from(context, agent)
    response = render_page(request, TEMPLATE, context, partial="agent-card")
    return _no_store(response)


def _agent_from(context: dict[str, Any], agent: Agent) -> Agent:
    """The prefetched copy of `agent` from the page context (its tokens loaded)."""
    return next((item for item in context["agents"] if item.pk == agent.pk), agent)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    token = _get_token_for_user(request.user, token_id)
    was_active = token.is_active
    token = token_revoke(token=token)
    if request.htmx:
        return render_page(
            request, TEMPLATE, {"token": token, "just_revoked": was_active}, partial="token-row"
        )
    if was_active:
        messages.success(request, f"Token {token.prefix}… revoked. Agents using it are refused.")
    else:
        messages.info(request, f"Token {token.prefix}… was already revoked.")
    return redirect("agents")


@login_required
@require_POST
def agent_learning(request: HttpRequest, agent_id: int) -> HttpResponse:
    """The agent's "Learns from turns" switch: its part of the card (htmx), else a redirect."""
    agent = _get_agent_for_user(request.user, agent_id)
    form = AgentLearningForm(request.POST)
    auto_learn = profile_for_user(request.user).auto_learn
    if not form.is_valid():
        if request.htmx:
            context = {"agent": agent, "auto_learn": auto_learn, "learning_error": True}
            return render_page(request, TEMPLATE, context, partial="agent-learning")
        context = _page_context(request, learning_error_agent_id=agent.pk)
        return render_page(request, TEMPLATE, context, status=400)
    on = form.cleaned_data["learns_from_turns"]
    agent = agent_set_learning(agent=agent, learns_from_turns=on)
    if on:
        message = f"Mnemo now learns from the turns “{agent.name}” reports."
        if not auto_learn:
            message += " Switch on learning from turns in Settings too."
    else:
        message = f"Mnemo no longer learns from the turns “{agent.name}” reports."
    if request.htmx:
        context = {"agent": agent, "auto_learn": auto_learn, "learning_message": message}
        return render_page(request, TEMPLATE, context, partial="agent-learning")
    messages.success(request, message)
    return redirect("agents")


def _learning_form(profile: Profile) -> LearningSettingsForm:
    return LearningSettingsForm(
        initial={
            "auto_learn": profile.auto_learn,
            "profile_budget": profile.profile_budget,
            "llm_daily_tokens": profile.llm_daily_tokens,
        }
    )


def _settings_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    profile = profile_for_user(request.user)
    return {
        "profile": profile,
        "learning_form": _learning_form(profile),
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
def learning_settings(request: HttpRequest) -> HttpResponse:
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
            form.add_error(error.field if error.field in form.fields else None, error.message)
    if profile is None:
        if request.htmx:
            context = {"profile": profile_for_user(request.user), "learning_form": form}
            return render_page(request, SETTINGS_TEMPLATE, context, partial="learning")
        context = _settings_context(request, learning_form=form)
        return render_page(request, SETTINGS_TEMPLATE, context, status=400)
    if profile.auto_learn:
        message = "Saved. Mnemo learns from the turns of the agents switched on in the Agents page."
    else:
        message = "Saved. Learning from turns is off: reported turns are kept, nothing is learned."
    if request.htmx:
        context = {
            "profile": profile,
            "learning_form": _learning_form(profile),
            "learning_message": message,
        }
        return render_page(request, SETTINGS_TEMPLATE, context, partial="learning")
    messages.success(request, message)
    return redirect("settings")


@login_required
@require_http_methods(["GET", "POST"])
@never_cache
def settings_page(request: HttpRequest) -> HttpResponse:
    """The page; a POST saves the form its `setting` names: the heartbeat, its webhook
    secret's rotation, else the review rule (the forms on the page post back to it)."""
    if request.method == "POST":
        setting = request.POST.get("setting")
        if setting == "heartbeat":
            return _heartbeat_setting_save(request)
        if setting == "heartbeat-secret":
            return _webhook_secret_rotate(request)
        return _review_setting_save(request)
    return render_page(request, SETTINGS_TEMPLATE, _settings_context(request))


def _heartbeat_response(
    request: HttpRequest, form: HeartbeatSettingsForm | None, *, status: int = 200, **extra: Any
) -> HttpResponse:
    """The heartbeat part (htmx) or the whole page, with the form as posted (an error) or
    fresh. A response showing a new secret is never stored: it is shown this once."""
    profile = profile_for_user(request.user)
    heartbeat_form = form or _heartbeat_form(profile)
    if request.htmx:
        context = {"profile": profile, "heartbeat_form": heartbeat_form, **extra}
        response = render_page(request, SETTINGS_TEMPLATE, context, partial="heartbeat")
    else:
        context = _settings_context(request, heartbeat_form=heartbeat_form, **extra)
        response = render_page(request, SETTINGS_TEMPLATE, context, status=status)
    return _no_store(response) if extra.get("new_webhook_secret") else response


def _heartbeat_setting_save(request: HttpRequest) -> HttpResponse:
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
            form.add_error(error.field if error.field in form.fields else None, error.message)
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
    messages.success(request, message)
    return redirect("settings")


def _webhook_secret_rotate(request: HttpRequest) -> HttpResponse:
    if not WebhookSecretForm(request.POST).is_valid():
        return _heartbeat_response(request, None, status=400, heartbeat_error=True)
    saved = profile_rotate_webhook_secret(user=request.user)
    message = "A new signing secret is in use: update your receiver with it now."
    return _heartbeat_response(
        request, None, heartbeat_message=message, new_webhook_secret=saved.new_secret
    )


def _review_setting_save(request: HttpRequest) -> HttpResponse:
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
    request: HttpRequest,
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
            return render_page(request, SETTINGS_TEMPLATE, context, partial=partial)
        context = _settings_context(request, **{f"{name}_error": True})
        return render_page(request, SETTINGS_TEMPLATE, context, status=400)
    on = form.cleaned_data[field]
    profile = save(on)
    message = messages_by_value[bool(on)]
    if request.htmx:
        context = {"profile": profile, f"{name}_message": message}
        return render_page(request, SETTINGS_TEMPLATE, context, partial=partial)
    messages.success(request, message)
    return redirect("settings")


@login_required
@require_POST
def memory_pause(request: HttpRequest) -> HttpResponse:
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


@require_http_methods(["GET", "POST"])
@never_cache
def signup(request: HttpRequest) -> HttpResponse:
    if not settings.MNEMO_OPEN_SIGNUP:
        raise Http404("Sign-up is closed.")
    if request.user.is_authenticated:
        return redirect("context")
    if request.method == "POST":
        form = SignupForm(request.POST)
        if form.is_valid():
            user = signup_create_user(
                username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
            )
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome, {user.get_username()}. Your account is ready.")
            return redirect("context")
        return TemplateResponse(request, "registration/signup.html", {"form": form}, status=400)
    return TemplateResponse(request, "registration/signup.html", {"form": SignupForm()})
