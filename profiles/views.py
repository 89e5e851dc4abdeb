"""The Agents page (agents, their API tokens, whether Mnemo learns from each one's turns) and
open sign-up. The Settings page, which shows several layers, is pages/views/settings.py.

Every action works as an htmx request (a 200 partial, errors inline) and as a plain
form POST (redirect with a message, or the full page with errors and status 400).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from lib.errors import ServiceError
from lib.pages import HtmxHttpRequest, add_service_error, done, no_store, render_page
from profiles import services
from profiles.forms import (
    AgentForm,
    AgentLearningForm,
    AgentRenameForm,
    ReadRulesForm,
    SignupForm,
    TokenForm,
)
from profiles.models import Agent, AgentToken
from profiles.naming import agent_name
from profiles.services import (
    agent_set_details,
    agent_set_learning,
    agent_set_read_rules,
    profile_for_user,
    signup_create_user,
    token_create,
    token_revoke,
)

TEMPLATE = "profiles/agents.html"


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


def _page_context(request: HtmxHttpRequest, **extra: Any) -> dict[str, Any]:
    context: dict[str, Any] = {
        "agents": _agents_for(request.user),
        "agent_form": AgentForm(),
        "token_form": None,
        "rules_form": None,  # an agent's refused read rules carry theirs (agent_read_rules)
        "new_token": None,
        "auto_learn": profile_for_user(request.user).auto_learn,
    }
    context.update(extra)
    return context


@login_required
@require_http_methods(["GET"])
@never_cache
def agents_page(request: HtmxHttpRequest) -> TemplateResponse:
    return render_page(request, TEMPLATE, _page_context(request), partial="page-body")


@login_required
@require_POST
def agent_create(request: HtmxHttpRequest) -> HttpResponse:
    form = AgentForm(request.POST)
    agent = None
    if form.is_valid():
        try:
            agent = services.agent_create(
                user=request.user,
                display_name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
            )
        except ServiceError as error:
            add_service_error(form, error)
    if agent is None:
        if request.htmx:
            context = _page_context(request, agent_form=form)
            return render_page(request, TEMPLATE, context, partial="agents")
        return render_page(request, TEMPLATE, _page_context(request, agent_form=form), status=400)
    named = f" (“{agent.name}” in paths and tokens)" if agent.display_name else ""
    message = f"Agent “{agent_name(agent)}” created{named}. Create a token so it can connect."
    if request.htmx:
        context = _page_context(request, created_agent=agent, agent_message=message)
        return render_page(request, TEMPLATE, context, partial="agents")
    return done(request, message, reverse("agents"))


@login_required
@require_POST
def token_create_view(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
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
    return no_store(response)


def _agent_from(context: dict[str, Any], agent: Agent) -> Agent:
    """The prefetched copy of `agent` from the page context (its tokens loaded)."""
    return next((item for item in context["agents"] if item.pk == agent.pk), agent)


@login_required
@require_POST
def token_revoke_view(request: HtmxHttpRequest, token_id: int) -> HttpResponse:
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
def agent_rename(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """Rename the agent as pages show it (any script); its card (htmx), else a redirect."""
    agent = _get_agent_for_user(request.user, agent_id)
    form = AgentRenameForm(request.POST)
    if form.is_valid():
        try:
            agent = agent_set_details(agent=agent, display_name=form.cleaned_data["display_name"])
        except ServiceError as error:
            add_service_error(form, error)
    if form.errors:
        context = _page_context(request, rename_form=form, rename_form_agent_id=agent.pk)
        context["agent"] = _agent_from(context, agent)
        if request.htmx:
            return render_page(request, TEMPLATE, context, partial="agent-card")
        return render_page(request, TEMPLATE, context, status=400)
    message = f"Renamed: pages now call it “{agent_name(agent)}”."
    if request.htmx:
        context = _page_context(request, rename_message=message)
        context["agent"] = _agent_from(context, agent)
        return render_page(request, TEMPLATE, context, partial="agent-card")
    return done(request, message, reverse("agents"))


@login_required
@require_POST
def agent_learning(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
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
        message = f"Mnemo now learns from the turns “{agent_name(agent)}” reports."
        if not auto_learn:
            message += " Switch on learning from turns in Settings too."
    else:
        message = f"Mnemo no longer learns from the turns “{agent_name(agent)}” reports."
    if request.htmx:
        context = {"agent": agent, "auto_learn": auto_learn, "learning_message": message}
        return render_page(request, TEMPLATE, context, partial="agent-learning")
    return done(request, message, reverse("agents"))


@login_required
@require_POST
def agent_read_rules(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """The agent's "What it reads" form: its part of the card (htmx), else a redirect; the
    rules change only here (and in the admin), never through an agent's token."""
    agent = _get_agent_for_user(request.user, agent_id)
    form = ReadRulesForm(request.POST)
    if form.is_valid():
        try:
            agent_set_read_rules(
                agent=agent,
                memory_rule=form.cleaned_data["memory_rule"],
                memory_tags=form.split(form.cleaned_data["memory_tags"]),
                document_rule=form.cleaned_data["document_rule"],
                document_folders=form.split(form.cleaned_data["document_folders"]),
            )
        except ServiceError as error:
            add_service_error(form, error)
    if form.errors:
        context = {"agent": agent, "rules_form": form}
        if request.htmx:
            return render_page(request, TEMPLATE, context, partial="agent-rules")
        context = _page_context(request)
        _agent_from(context, agent).rules_form = form  # this card's form, with its errors
        return render_page(request, TEMPLATE, context, status=400)
    message = f"Saved what “{agent_name(agent)}” reads."
    if request.htmx:
        context = {"agent": agent, "rules_form": None, "rules_message": message}
        return render_page(request, TEMPLATE, context, partial="agent-rules")
    return done(request, message, reverse("agents"))


@require_http_methods(["GET", "POST"])
@never_cache
def signup(request: HtmxHttpRequest) -> HttpResponse:
    if not settings.MNEMO_OPEN_SIGNUP:
        raise Http404("Sign-up is closed.")
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    if request.method == "POST":
        form = SignupForm(request.POST)
        if form.is_valid():
            user = signup_create_user(
                username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
            )
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome, {user.get_username()}. Your account is ready.")
            return redirect(settings.LOGIN_REDIRECT_URL)
        return TemplateResponse(request, "registration/signup.html", {"form": form}, status=400)
    return TemplateResponse(request, "registration/signup.html", {"form": SignupForm()})
