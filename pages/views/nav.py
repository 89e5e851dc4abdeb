"""The navigation's own requests: the Inbox link with its count, swapped in by htmx when a
decision in the review inbox sends `inbox-changed` (templates/pages/_nav.html)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from lib.pages import HtmxHttpRequest, render_page

NAV = "pages/_nav.html"


@login_required
@require_http_methods(["GET", "HEAD"])
def inbox_count(request: HtmxHttpRequest) -> HttpResponse:
    """The Inbox link (its count from pages/context_processors.py); a plain request goes to
    the inbox."""
    inbox_url = reverse("review_inbox")
    if not request.htmx:
        return HttpResponseRedirect(inbox_url)
    current = request.htmx.current_url_abs_path or ""
    context = {"nav_on_inbox": current.split("?", 1)[0] == inbox_url}
    return render_page(request, NAV, context, partial="nav_inbox")
