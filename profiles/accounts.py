"""Accounts: sign-in throttling, password change, and password reset by email.

Sign-in is throttled by django-axes (settings: the "Accounts" block). This module gives axes
the client address, the page a locked-out person sees, and a handler that clears only the
signed-in account's failures. The password views are Django's own, with Mnemo's templates;
the reset request refuses to pretend when no email backend is set up, and is rate-limited
in the cache per client address and per email address.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from datetime import datetime, timedelta
from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.messages.views import SuccessMessageMixin
from django.core.cache import cache
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils import timezone

NO_EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"


# Sign-in throttling (django-axes) ----------------------------------------------------------


def _ip_or_none(value: str) -> str | None:
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return None


def client_address(request: HttpRequest) -> str | None:
    """The address failed sign-ins are counted under (AXES_CLIENT_IP_CALLABLE).

    REMOTE_ADDR; behind a proxy (MNEMO_BEHIND_PROXY), the right-most X-Forwarded-For entry,
    the one the proxy appended: a client can write anything to the left of it.
    """
    if settings.MNEMO_BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1]
        if address := _ip_or_none(forwarded):
            return address
    return _ip_or_none(request.META.get("REMOTE_ADDR", ""))


class SignInThrottle(AxesDatabaseHandler):
    """axes' database handler (AXES_HANDLER), but a successful sign-in clears only that
    account's failures. axes' own AXES_RESET_ON_SUCCESS clears the address's failures too,
    so anyone with an account could sign in between guesses at someone else's password."""

    def user_logged_in(self, sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
        super().user_logged_in(sender, request, user, **kwargs)
        self.reset_attempts(username=user.get_username())


def _lock_ends(
    attempts: QuerySet[AccessAttempt], *, limit: int, window: timedelta
) -> datetime | None:
    """When the failures in `attempts` stop adding up to `limit` within the window: the
    moment the oldest failure that still counts towards the limit leaves it. None if they do
    not add up to it now."""
    since = timezone.now() - window
    total = 0
    recent = attempts.filter(attempt_time__gte=since).order_by("-attempt_time")
    for failures, attempt_time in recent.values_list("failures_since_start", "attempt_time"):
        total += failures
        if total >= limit:
            return attempt_time + window
    return None


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """The page for a sign-in refused by axes (AXES_LOCKOUT_CALLABLE), on /login/ and on the
    admin's login: which lock applies and about when it lifts; 429 with Retry-After.

    Under ASGI axes' middleware passes only (request, credentials), so `credentials` may be
    None; the username then comes from the posted form, as axes does itself.
    """
    window = get_cool_off(request) or timedelta(minutes=settings.MNEMO_LOGIN_LOCKOUT_MINUTES)
    limit = get_failure_limit(request, credentials)
    username = get_client_username(request, credentials)
    address = getattr(request, "axes_ip_address", None)
    account_ends = (
        _lock_ends(AccessAttempt.objects.filter(username=username), limit=limit, window=window)
        if username
        else None
    )
    address_ends = (
        _lock_ends(AccessAttempt.objects.filter(ip_address=address), limit=limit, window=window)
        if address
        else None
    )
    ends = max(
        (moment for moment in (account_ends, address_ends) if moment is not None),
        default=timezone.now() + window,
    )
    seconds = max(1, math.ceil((ends - timezone.now()).total_seconds()))
    context = {
        "locked_account": account_ends is not None,
        "locked_address": address_ends is not None,
        "minutes": math.ceil(seconds / 60),
        "ends": ends,
        "back_url": request.get_full_path(),
    }
    response = render(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    response["Cache-Control"] = "no-store"
    return response


# Password change ---------------------------------------------------------------------------


class PasswordChange(SuccessMessageMixin, auth_views.PasswordChangeView):
    """Django's view (sign-in required; keeps this session signed in, ends the others)."""

    template_name = "registration/change_password.html"
    success_url = reverse_lazy("pages:settings")
    success_message = (
        "Your password was changed. You are still signed in here; other sessions were signed out."
    )


password_change = PasswordChange.as_view()


# Password reset by email -------------------------------------------------------------------


def email_configured() -> bool:
    """True when there is a mailer that sends (EMAIL_URL set, and not to the dummy backend)."""
    mailer = settings.MAILERS.get("default")
    return mailer is not None and mailer.get("BACKEND") != NO_EMAIL_BACKEND


def _reset_request_wait(request: HttpRequest, email: str) -> int:
    """Count one reset request from this address and for this email address (whether or not
    an account has it); return the seconds to wait if either is over the limit, else 0.

    At most MNEMO_LOGIN_FAILURE_LIMIT requests each within MNEMO_LOGIN_LOCKOUT_MINUTES,
    counted in the shared cache from the first request of the window.
    """
    window = settings.MNEMO_LOGIN_LOCKOUT_MINUTES * 60
    email_hash = hashlib.sha256(email.strip().lower().encode()).hexdigest()
    wait = 0
    for key in (
        f"password-reset:ip:{client_address(request)}",
        f"password-reset:email:{email_hash}",
    ):
        cache.add(f"{key}:start", time.time(), window)
        cache.add(key, 0, window)
        try:
            count = cache.incr(key)
        except ValueError:  # the window ended between add and incr
            count = 1
            cache.set(key, count, window)
        if count > settings.MNEMO_LOGIN_FAILURE_LIMIT:
            started = cache.get(f"{key}:start", time.time())
            wait = max(wait, math.ceil(started + window - time.time()), 1)
    return wait


class PasswordResetRequest(auth_views.PasswordResetView):
    """Ask for a reset link. The answer is the same whether or not an account has the email."""

    template_name = "registration/reset_request.html"
    email_template_name = "registration/reset_email.txt"
    subject_template_name = "registration/reset_subject.txt"
    success_url = reverse_lazy("password_reset_done")

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(email_configured=email_configured(), **kwargs)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not email_configured():
            return self.render_to_response(self.get_context_data())
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: Any) -> HttpResponse:
        wait = _reset_request_wait(self.request, form.cleaned_data["email"])
        if wait:
            context = self.get_context_data(form=form, wait_minutes=math.ceil(wait / 60))
            response = self.render_to_response(context, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().form_valid(form)


class PasswordResetSent(auth_views.PasswordResetDoneView):
    template_name = "registration/reset_sent.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return super().get_context_data(email_configured=email_configured(), **kwargs)


class PasswordResetConfirm(auth_views.PasswordResetConfirmView):
    """Set a new password from the emailed link; it also lifts the account's sign-in lock."""

    template_name = "registration/reset_confirm.html"
    success_url = reverse_lazy("password_reset_complete")

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        AxesProxyHandler.reset_attempts(username=form.user.get_username())
        return response


class PasswordResetComplete(auth_views.PasswordResetCompleteView):
    template_name = "registration/reset_complete.html"


password_reset = PasswordResetRequest.as_view()
password_reset_sent = PasswordResetSent.as_view()
password_reset_confirm = PasswordResetConfirm.as_view()
password_reset_complete = PasswordResetComplete.as_view()
