import pytest

from lib.errors import InvalidInput
from memory.keys import KeyFamily, parse_key


@pytest.mark.parametrize(
    ("key", "family", "parts"),
    [
        ("name", KeyFamily.PROFILE, {}),
        ("role", KeyFamily.PROFILE, {}),
        ("company", KeyFamily.PROFILE, {}),
        ("timezone", KeyFamily.PROFILE, {}),
        ("summary", KeyFamily.PROFILE, {}),
        ("tone_slack", KeyFamily.STYLE, {"aspect": "tone", "platform": "slack"}),
        ("verbosity_gmail", KeyFamily.STYLE, {"aspect": "verbosity", "platform": "gmail"}),
        ("tone_ms_teams_2", KeyFamily.STYLE, {"aspect": "tone", "platform": "ms_teams_2"}),
        ("tone_" + "a" * 32, KeyFamily.STYLE, {"platform": "a" * 32}),
        ("fact:likes-tea", KeyFamily.ENTRY, {"kind": "fact", "slug": "likes-tea"}),
        ("instruction:tldr_first", KeyFamily.ENTRY, {"kind": "instruction"}),
        ("preference:0-bullets", KeyFamily.ENTRY, {"kind": "preference", "slug": "0-bullets"}),
        ("decision:q3", KeyFamily.ENTRY, {"kind": "decision"}),
        ("discovery:x", KeyFamily.ENTRY, {"kind": "discovery", "slug": "x"}),
        ("pattern:mondays", KeyFamily.ENTRY, {"kind": "pattern"}),
        ("task:ship-v2", KeyFamily.ENTRY, {"kind": "task"}),
        ("bugfix:n-plus-1", KeyFamily.ENTRY, {"kind": "bugfix"}),
        ("fact:" + "a" * 80, KeyFamily.ENTRY, {"slug": "a" * 80}),
    ],
)
def test_valid_keys_parse_into_their_parts(key, family, parts):
    parsed = parse_key(key)

    assert parsed.family == family
    assert parsed.raw == key
    for name, expected in parts.items():
        assert getattr(parsed, name) == expected


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "Key is empty."),
        (None, "Key is empty."),
        (
            "nickname",
            "Unknown key 'nickname': expected a profile key (name, role, company, "
            "timezone, summary), a style key (tone_<platform> or verbosity_<platform>) or an "
            "entry key (<kind>:<slug>).",
        ),
        ("Name", "Unknown key 'Name'"),
        ("tone", "Unknown key 'tone'"),
        ("mood_slack", "Unknown key 'mood_slack'"),
        ("tone_", "Platform '' in style key 'tone_' must be 1–32 characters of a-z, 0-9 and '_'."),
        ("tone_Slack", "Platform 'Slack' in style key 'tone_Slack'"),
        ("verbosity_my-app", "Platform 'my-app' in style key 'verbosity_my-app'"),
        ("tone_" + "a" * 33, "Platform '" + "a" * 33 + "'"),
        (
            "note:x",
            "Unknown entry kind 'note' in key 'note:x'; expected one of fact, instruction, "
            "preference, decision, discovery, pattern, task, bugfix.",
        ),
        ("Fact:x", "Unknown entry kind 'Fact'"),
        ("fact:", "Key 'fact:' has no slug after 'fact:'."),
        (
            "fact:Likes-Tea",
            "Slug 'Likes-Tea' in key 'fact:Likes-Tea' must start with a-z or 0-9 "
            "and contain only a-z, 0-9, '_' and '-'.",
        ),
        ("fact:-tea", "Slug '-tea' in key 'fact:-tea'"),
        ("fact:_tea", "Slug '_tea'"),
        ("fact:likes tea", "Slug 'likes tea'"),
        ("fact:a:b", "Slug 'a:b'"),
        ("fact:thé", "Slug 'thé'"),
        (
            "fact:" + "a" * 81,
            "Slug in key 'fact:" + "a" * 81 + "' is 81 characters long; the longest allowed is 80.",
        ),
        ("preference:" + "a" * 81, "Slug in key 'preference:" + "a" * 81 + "' is 81"),
        ("fact:" + "a" * 300, "Key is 305 characters long; the longest allowed is 92."),
    ],
)
def test_invalid_keys_say_which_part_is_wrong(key, message):
    with pytest.raises(InvalidInput) as raised:
        parse_key(key)

    assert raised.value.message.startswith(message)
    assert raised.value.field == "key"
