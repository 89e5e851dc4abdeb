"""The agent API for the user's settings: read-only, so an agent cannot change for itself
what the user decided (pausing memory, reviewing agents' new memories).

It lives in the memory layer, not in profiles/, because it also counts the review inbox's
proposals: profiles sits below memory and never imports it (docs/architecture.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from lib.api import error_responses
from memory.selectors import pending_proposal_count
from profiles.authentication import request_profile
from profiles.models import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET

if TYPE_CHECKING:
    from rest_framework.request import Request


class ProfileSerializer(serializers.Serializer):
    token_budget = serializers.IntegerField(
        min_value=MIN_TOKEN_BUDGET,
        max_value=MAX_TOKEN_BUDGET,
        help_text="Tokens of working memory the assistant receives at the start of a session.",
    )
    memory_paused = serializers.BooleanField(
        help_text="true: the user paused memory; agents' writes are refused (409) until "
        "they resume it."
    )
    review_agent_memories = serializers.BooleanField(
        help_text="true: agents' new memories wait for the user's review (create_memory "
        "answers 202 pending_review). Agents' changes to what the user stated always wait."
    )
    auto_learn = serializers.BooleanField(
        help_text="true: the user lets Mnemo learn from reported turns (POST /api/v1/turns): "
        "consolidate their profile and capture observations."
    )
    agent_learns_from_turns = serializers.BooleanField(
        help_text="true: the user switched learning on for the calling agent too (Agents "
        "page); Mnemo learns from its turns only when both are true."
    )
    pending_proposals = serializers.IntegerField(
        min_value=0, help_text="How many proposals wait in the user's review inbox."
    )


class ProfileGetApi(APIView):
    """GET only: the settings are the user's, changed on their Settings page."""

    @extend_schema(
        operation_id="get_profile",
        tags=["profile"],
        summary="The user's settings that shape what you may do",
        description="Read the user's settings: the working-memory budget, whether memory is "
        "paused, whether agents' new memories wait for review, whether learning is on, and "
        "how many proposals wait in the review inbox. Read-only: the user changes them on "
        "their Settings page.",
        responses={200: ProfileSerializer, **error_responses(401, 403, 429)},
        examples=[
            OpenApiExample(
                "Settings",
                value={
                    "token_budget": 2000,
                    "memory_paused": False,
                    "review_agent_memories": True,
                    "auto_learn": False,
                    "agent_learns_from_turns": False,
                    "pending_proposals": 2,
                },
                response_only=True,
            ),
        ],
    )
    def get(self, request: Request) -> Response:
        profile = request_profile(request)
        return Response(
            {
                "token_budget": profile.token_budget,
                "memory_paused": profile.memory_paused,
                "review_agent_memories": profile.review_agent_memories,
                "auto_learn": profile.auto_learn,
                "agent_learns_from_turns": request.auth.agent.learns_from_turns,
                "pending_proposals": pending_proposal_count(user=request.user),
            }
        )
