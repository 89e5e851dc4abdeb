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
        ("meeting notes/q3 plan.md", "meeting notes/q3 plan.md"),  # so are inner spaces
        ("notes/日本語.md", "notes/日本語.md"),
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
        # Look-alikes that fold into ordinary characters: refused, naming what to write.
        (
            "\uff2d\uff25\uff2d\uff2f\uff32\uff39.md",
            "lookalike",
            "Path contains 'Ｍ' (U+FF2D) at position 0, a look-alike of 'M'; write 'M' instead.",
        ),
        ("notes/\ufb01le.md", "lookalike", "Path contains 'ﬁ' (U+FB01) at position 6"),
        # Slashes that no normalization folds, but that read as one.
        ("a\u2215b.md", "lookalike", "Path contains '∕' (U+2215) at position 1, which looks"),
        ("a\u2044b.md", "lookalike", "Path contains '⁄' (U+2044)"),
        # Line separators and lone surrogates are as invisible as control characters.
        ("a\u2028b", "control_character", "Path contains the control character U+2028"),
        ("a\u2029b", "control_character", "Path contains the control character U+2029"),
        ("a\ud800b", "control_character", "Path contains the control character U+D800"),
        # Names that are blank or start or end with a space.
        (" lead.md", "whitespace", "Path segment ' lead.md' starts or ends with a space"),
        ("a/ /b.md", "whitespace", "Path segment ' ' starts or ends with a space"),
        ("a/\u00a0/b.md", "whitespace", "Path segment '\u00a0' starts or ends with a space"),
        ("trail.md ", "whitespace", "Path segment 'trail.md ' starts or ends"),
    ],
)
def test_bad_paths_are_refused_naming_the_rule(path, rule, message):
    with pytest.raises(InvalidPath) as raised:
        normalize_path(path)

    assert raised.value.rule == rule
    assert raised.value.field == "path"
    assert raised.value.message.startswith(message)
