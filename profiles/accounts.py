"""Accounts: sign-in throttling, password change, and password reset by email.

Sign-in is throttled by django-axes (settings: the "Accounts" block). This module gives axes
the client address, a handler with two locks (per address; per account, except at addresses
the account is known at) that clears only the signed-in account's failures from that
address, and the page a locked-out person sees. The password views are Django's own, with
Mnemo's templates; the reset request refuses to pretend when no email backend is set up,
and is rate-limited in the cache per client address and per email address.
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
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.messages.views import SuccessMessageMixin
from django.core.cache import cache
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils import timezone

from lib.forwarded import parse_address

NO_EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"


# Sign-in throttling (django-axes) ----------------------------------------------------------

# An address an account signed in from this recently is "known" to it: the account lock
# (below) does not hold it. axes' sign-in log (AccessLog) has a row for every sign-in.
KNOWN_ADDRESS_DAYS = 90


def client_address(request: HttpRequest) -> str | None:
    """The address failed sign-ins are counted under (AXES_CLIENT_IP_CALLABLE), also the
    reset requests' and the sign-in log's.

    REMOTE_ADDR, which lib/forwarded.py has set to the client's address when a trusted proxy
    forwarded the request. An IPv6 address counts as its /64 network: one host usually holds a
    whole /64 and could otherwise try from a fresh address each time.
    """
    address = parse_address(request.META.get("REMOTE_ADDR", ""))
    if address is None:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False).network_address)
    return str(address)


def _failure_window(request: HttpRequest | None = None) -> timedelta:
    return get_cool_off(request) or timedelta(minutes=settings.MNEMO_LOGIN_LOCKOUT_MINUTES)


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


def account_lock_ends(
    username: str | None, address: str | None, *, window: timedelta
) -> datetime | None:
    """When the account lock on `username` lifts for `address`, or None if it does not hold.

    The lock bounds guessing spread over many addresses, each staying under the address
    limit: MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT failures at one account within the window, from
    anywhere, lock it, but only for addresses it has not signed in from in the last
    KNOWN_ADDRESS_DAYS. So whatever number of addresses an attacker has, they get that many
    guesses at an account per window; and they cannot keep its owner out of the networks
    the owner uses (home, office), only out of new ones, and only while the attack lasts.
    """
    if not username:
        return None
    ends = _lock_ends(
        AccessAttempt.objects.filter(username=username),
        limit=settings.MNEMO_LOGIN_ACCOUNT_FAILURE_LIMIT,
        window=window,
    )
    if ends is None or not address:
        return ends
    known_since = timezone.now() - timedelta(days=KNOWN_ADDRESS_DAYS)
    known = AccessLog.objects.filter(
        username=username, ip_address=address, attempt_time__gte=known_since
    ).exists()
    return None if known else ends


class SignInThrottle(AxesDatabaseHandler):
    """axes' database handler (AXES_HANDLER) with two locks instead of axes' one count.

    - The address lock is axes' own (AXES_LOCKOUT_PARAMETERS = ["ip_address"]): an address
      with MNEMO_LOGIN_FAILURE_LIMIT failures, at one account or spread over many, is locked
      for every account. It stops one address guessing, and the owner elsewhere is not held.
    - The account lock (account_lock_ends) is added here, for guessing spread over many
      addresses, with a much higher limit and not for addresses the account is known at.

    A successful sign-in clears the failures at that account from that address only. axes'
    own AXES_RESET_ON_SUCCESS clears the address's failures at every account (anyone with an
    account could sign in between guesses at someone else's password); clearing the
    account's failures from every address would lift the lock on the attacker's address.
    """

    def get_failures(self, request: HttpRequest, credentials: dict | None = None) -> int:
        """The address's failures, or the limit itself while the account lock holds: axes
        compares this with AXES_FAILURE_LIMIT before checking a password and after
        counting a failure."""
        failures = super().get_failures(request, credentials)
        limit = get_failure_limit(request, credentials)
        if failures < limit and account_lock_ends(
            get_client_username(request, credentials),
            request.axes_ip_address,
            window=_failure_window(request),
        ):
            return limit
        return failures

    def user_logged_in(self, sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
        super().user_logged_in(sender, request, user, **kwargs)
        AccessAttempt.objects.filter(
            username=user.get_username(), ip_address=request.axes_ip_address
        ).delete()


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """The page for a sign-in refused by axes (AXES_LOCKOUT_CALLABLE), on /login/ and on the
    admin's login: which lock applies and about when it lifts; 429 with Retry-After.

    Under ASGI axes' middleware passes only (request, credentials), so `credentials` may be
    None; the username then comes from the posted form, as axes does itself.
    """
    window = _failure_window(request)
    username = get_client_username(request, credentials)
    address = getattr(request, "axes_ip_address", None)
    account_ends = account_lock_ends(username, address, window=window)
    address_ends = (
        _lock_ends(
            AccessAttempt.objects.filter(ip_address=address),
            limit=get_failure_limit(request, credentials),
            window=window,
        )
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
        "known_days": KNOWN_ADDRESS_DAYS,
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
