"""The Settings page's "Download everything" panel: `{% load export_panel %}{% export_panel %}`.

The panel is portability/'s own; the Settings page (pages/views/settings.py) shows it where
its template loads the tag."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.translation import ngettext

from portability import format as fmt
from portability.export import export_counts

register = template.Library()

# (one, many): the panel says "1 work item", "2 work items".
LABELS = {
    fmt.MEMORIES: ("memory", "memories"),
    fmt.MEMORY_HISTORY: ("memory change", "memory changes"),
    fmt.DOCUMENTS_DIR: ("document", "documents"),
    fmt.DOCUMENT_VERSIONS: ("document version", "document versions"),
    fmt.WORK_DIR: ("work item", "work items"),
    fmt.ACTIVITY: ("activity event", "activity events"),
    fmt.PROPOSALS: ("proposal", "proposals"),
}


@register.inclusion_tag("portability/export_panel.html", takes_context=True)
def export_panel(context: template.Context) -> dict[str, Any]:
    """What an export of the signed-in user's account will hold, and the link to it."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    counts = export_counts(user) if user is not None and user.is_authenticated else {}
    return {"counts": [(ngettext(*LABELS[name], n), n) for name, n in counts.items()]}
