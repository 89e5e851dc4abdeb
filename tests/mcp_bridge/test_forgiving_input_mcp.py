"""Issue 30 over MCP: the tools are the API's, so a tag, a platform and a time zone written
as people name them are stored by the same rule and the notes come back to the agent."""

from typing import Any

from memory.models import Memory
from tests.mcp_bridge.test_mcp import http_session, mcp_url, run

__all__ = ["mcp_url"]  # the fixture, used by name below


def test_mcp_writes_by_the_one_rule_and_returns_the_notes(mcp_url, alice, alice_token):
    async def main() -> tuple[Any, ...]:
        async with http_session(mcp_url, alice_token) as client:
            tagged = await client.call_tool(
                "create_memory",
                {"key": "fact:walks", "value": "Walks at seven", "tags": ["Morning Routine", "🍣"]},
            )
            styled = await client.call_tool(
                "create_memory", {"key": "tone_Microsoft Teams", "value": "formal"}
            )
            zoned = await client.call_tool(
                "create_memory", {"key": "timezone", "value": "europe/berlin"}
            )
            return tagged, styled, zoned

    tagged, styled, zoned = run(main)

    assert tagged.structured_content["memory"]["tags"] == ["morning-routine"]
    assert tagged.structured_content["notes"] == [
        "'Morning Routine' saved as #morning-routine",
        "'🍣' left out: a tag needs a letter or a digit",
    ]
    assert styled.structured_content["memory"]["key"] == "tone_microsoft_teams"
    assert zoned.structured_content["memory"]["value"] == "Europe/Berlin"
    assert dict(Memory.objects.filter(user=alice).values_list("key", "value")) == {
        "fact:walks": "Walks at seven",
        "tone_microsoft_teams": "formal",
        "timezone": "Europe/Berlin",
    }
