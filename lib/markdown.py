"""Markdown written by users and agents, rendered to HTML that is safe to show."""

from __future__ import annotations

import markdown as markdown_lib
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "li", "ol", "p", "pre", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "th": {"align"}, "td": {"align"}}
# Each block takes the direction of its own first letters (an Arabic paragraph reads right to
# left in an English document, and the other way round); set by the sanitizer, never taken
# from the text.
DIRECTED_TAGS = ("p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "td", "th")


def render_markdown(text: str) -> SafeString:
    """Markdown to HTML, then sanitized with nh3: no scripts, no event handlers, no
    `javascript:` links, no raw HTML beyond the tags markdown itself produces."""
    html = markdown_lib.markdown(text, extensions=["fenced_code", "tables", "sane_lists"])
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        set_tag_attribute_values={tag: {"dir": "auto"} for tag in DIRECTED_TAGS},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # noqa: S308 - nh3 has just sanitized it
