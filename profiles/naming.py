"""How an agent is named: the one place pages, messages and activity lines get an agent's
name from (`agent_name`, and the `agent_name` template filter in
profiles/templatetags/profiles_extras.py), and the rule for what a person may call it."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from profiles.models import Agent

DELETED_AGENT = "a deleted agent"

# Characters that reorder the text around them (bidi embeddings, overrides and isolates):
# in a name they could make it read as another one, so they are dropped with the controls.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def agent_name(agent: Agent | None) -> str:
    """The agent as people read it: the display name the person gave it, in any script
    ("Асистент", "Claude Desktop"), else its name in paths and tokens ("assistant");
    "a deleted agent" for one that is gone."""
    if agent is None:
        return DELETED_AGENT
    return agent.display_name or agent.name


def clean_display_name(text: str) -> str:
    """What a person typed as an agent's name, as stored: control characters and bidi
    overrides dropped, each run of white space one space, trimmed. Letters of any script,
    marks and joiners (which some scripts and emoji need) are kept."""
    kept = "".join(
        " " if char.isspace() else char
        for char in text
        if char.isspace() or (unicodedata.category(char) != "Cc" and char not in _BIDI_CONTROLS)
    )
    return " ".join(kept.split())
