import pytest

from context.paths import InvalidPath, normalize_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("MEMORY.md", "MEMORY.md"),
        ("daily/2026-11-21.md", "daily/2026-11-21.md"),
        ("agents/bob/AGENT_MEMORY.md", "agents/bob/AGENT_MEMORY.md"),
        ("projects/alpha/notes.md", "projects/alpha/notes.md"),
        ("notes/café.md", "notes/café.md"),
        ("notes/cafe\u0301.md", "notes/café.md"),  # decomposed é becomes one code point
        ("a/..b/c...md", "a/..b/c...md"),  # dots inside names are fine
        ("x" * 255, "x" * 255),
    ],
)
def test_valid_paths_are_normalized(path, expected):
    assert normalize_path(path) == expected


@pytest.mark.parametrize(
    ("path", "rule", "message"),
    [
        ("", "empty", "Path is empty."),
        (None, "empty", "Path is empty."),
        ("../x", "dot_segment", "Path contains a '..' segment"),
        ("a/../../b", "dot_segment", "Path contains a '..' segment"),
        ("a/..", "dot_segment", "Path contains a '..' segment"),
        ("./a", "dot_segment", "Path contains a '.' segment"),
        ("/etc/passwd", "absolute", "Path is absolute; write it relative"),
        ("a//b", "empty_segment", "Path has an empty segment"),
        ("a/", "empty_segment", "Path has an empty segment"),
        ("a\\b", "backslash", "Path contains a backslash"),
        ("..\\..\\windows", "backslash", "Path contains a backslash"),
        ("a\x00b", "control_character", "Path contains the control character U+0000 at position 1"),
        ("a\nb", "control_character", "Path contains the control character U+000A"),
        ("a\x7fb", "control_character", "Path contains the control character U+007F"),
        ("a\u202eb", "control_character", "Path contains the control character U+202E"),
        ("a" * 1000, "too_long", "Path is 1000 characters long; the longest allowed is 512."),
        ("a/" + "b" * 256, "segment_too_long", "Path segment 'bbbbbbbbbbbbbbbbbbbb…' is 256"),
        # Compatibility look-alikes that fold into '..' or '/' under NFKC.
        (
            "\uff0e\uff0e/secret",
            "dot_segment",
            "Path contains a '..' segment after Unicode normalization (NFKC)",
        ),
        ("a/\u2025/b", "dot_segment", "Path contains a '..' segment after Unicode normalization"),
        ("\uff0fetc/passwd", "absolute", "Path is absolute after Unicode normalization"),
        ("a\uff3cb", "backslash", "Path contains a backslash after Unicode normalization"),
    ],
)
def test_bad_paths_are_refused_naming_the_rule(path, rule, message):
    with pytest.raises(InvalidPath) as raised:
        normalize_path(path)

    assert raised.value.rule == rule
    assert raised.value.field == "path"
    assert raised.value.message.startswith(message)
