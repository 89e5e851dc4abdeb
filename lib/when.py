"""Times on pages: one format per locale, and one tag that writes every `<time>` (issue 30).

The formats are the locale's, from config/formats/<language>/formats.py (English: "Nov 28,
2026, 16:21", 24-hour), so a page never shows "16:21" beside a tooltip saying "4:21 p.m.".
Every time a page shows goes through `when_text` (Python, e.g. a sentence in a view) or the
`{% when %}` tag (templates; a builtin, see config/settings.py TEMPLATES), which writes

    <time datetime="2026-11-28T16:21:00+01:00" title="Nov 28, 2026, 16:21">Nov 28, 16:21</time>

The visible text is one of the styles below; the tooltip is always the whole date and time in
the same format, so the two only ever differ by what the visible one leaves out. Times are
in the zone active for the request (pages/middleware.py activates the user's own).
"""

from __future__ import annotations

import datetime as dt

from django import template
from django.contrib.humanize.templatetags.humanize import naturaltime
from django.utils import dateformat, timezone
from django.utils.formats import get_format
from django.utils.html import format_html

register = template.Library()

# style -> the locale format the visible text uses ("ago" is relative: "3 minutes ago").
STYLES = {
    "datetime": "DATETIME_FORMAT",  # Nov 28, 2026, 16:21
    "short": "SHORT_DATETIME_FORMAT",  # Nov 28, 16:21 (the whole one in another year)
    "date": "DATE_FORMAT",  # Nov 28, 2026
    "time": "TIME_FORMAT",  # 16:21
    "ago": "",  # 3 minutes ago
}


def _local(value: dt.date) -> dt.date:
    if isinstance(value, dt.datetime) and timezone.is_aware(value):
        return timezone.localtime(value)
    return value


def when_text(value: dt.date, style: str = "datetime") -> str:
    """`value` as a page shows it, in the active zone and the locale's format for `style`
    (one of STYLES). "short" leaves the year out only when it is this year's."""
    if style not in STYLES:
        raise ValueError(f"Unknown time style {style!r}; one of {', '.join(STYLES)}.")
    local = _local(value)
    if style == "ago":
        return str(naturaltime(local))
    if style == "short" and local.year != _local(timezone.now()).year:
        style = "datetime"
    if not isinstance(local, dt.datetime) and style != "date":
        style = "date"  # a day has no time of its own
    return dateformat.format(local, get_format(STYLES[style]))


def full_text(value: dt.date) -> str:
    """The whole date and time (a day alone for a date): what every tooltip says."""
    return when_text(value, "datetime" if isinstance(value, dt.datetime) else "date")


@register.simple_tag(name="when")
def when_tag(value: dt.date | None, style: str = "datetime", css: str = "") -> str:
    """`{% when moment "short" %}`: the `<time>` element for `value` ("" for None), its
    visible text in `style`, its tooltip the whole date and time; `css`: its class."""
    if value is None or value == "":
        return ""
    local = _local(value)
    return format_html(
        '<time{} datetime="{}" title="{}">{}</time>',
        format_html(' class="{}"', css) if css else "",
        dateformat.format(local, "c") if isinstance(local, dt.datetime) else local.isoformat(),
        full_text(value),
        when_text(value, style),
    )


@register.filter(name="when")
def when_filter(value: dt.date | None, style: str = "datetime") -> str:
    """`{{ moment|when:"short" }}`: the text alone, for a sentence or an accessible name."""
    if value is None or value == "":
        return ""
    return when_text(value, style)
