from django.contrib.auth.decorators import login_required
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from memory.selectors import memory_list


@login_required
@require_GET
def home(request: HttpRequest) -> TemplateResponse:
    memories = list(memory_list(user=request.user))
    groups = {"profile": [], "style": [], "entry": []}
    for memory in memories:
        groups[memory.kind if memory.kind in ("profile", "style") else "entry"].append(memory)
    return TemplateResponse(request, "memory/home.html", {"groups": groups, "count": len(memories)})
