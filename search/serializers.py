"""What every search tool's API shares: the query and limit fields, and a hit's score parts.

The tools themselves live with the data they search: search_memory in
memory/read_api.py, promote_memory in memory/write_api.py, memory_search (documents) in
context/search_api.py.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from lib.api import TextField, WholeNumberField
from search.ranking import HIGHLIGHT_END, HIGHLIGHT_START, MAX_LIMIT, MAX_QUERY_LENGTH


def query_field() -> TextField:
    return TextField(
        max_length=MAX_QUERY_LENGTH,
        help_text="What to look for, in plain words or as a question; any word may match, "
        "and meaning counts too.",
    )


def limit_field() -> WholeNumberField:
    return WholeNumberField(
        required=False,
        min_value=1,
        max_value=MAX_LIMIT,
        default=10,
        help_text=f"How many results, 1–{MAX_LIMIT} (default 10).",
    )


class ScorePartsMixin(serializers.Serializer):
    score = serializers.FloatField(help_text="Higher is better; the product of the parts.")
    fused = serializers.FloatField(
        help_text="The two sides' scores, each 0-1 among its candidates, blended: "
        f"{settings.MNEMO_SEARCH_VECTOR_WEIGHT:g} x meaning + "
        f"{settings.MNEMO_SEARCH_KEYWORD_WEIGHT:g} x words (BM25)."
    )
    keyword_rank = serializers.IntegerField(
        allow_null=True, help_text="Place among full-text matches; null if not among them."
    )
    vector_rank = serializers.IntegerField(
        allow_null=True, help_text="Place by meaning; null if not among the nearest."
    )
    decay = serializers.FloatField(
        help_text="Freshness, from 1 when new down to at least "
        f"{1 - settings.MNEMO_SEARCH_AGE_NUDGE:g} as it ages (halfway after "
        f"{settings.MNEMO_SEARCH_AGE_HALF_LIFE_DAYS:g} days); a memory the user stated "
        "never fades."
    )


def score_parts(ranks: Any, score: float, freshness: float) -> dict[str, Any]:
    """The ScorePartsMixin fields of a hit."""
    return {
        "score": score,
        "fused": ranks.fused,
        "keyword_rank": ranks.keyword_rank,
        "vector_rank": ranks.vector_rank,
        "decay": freshness,
    }


def bold_snippet(snippet: str) -> str:
    """A snippet's highlighted words in **bold** (the API's form of the markers)."""
    return snippet.replace(HIGHLIGHT_START, "**").replace(HIGHLIGHT_END, "**")
