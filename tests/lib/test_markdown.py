import pytest

from lib.markdown import render_markdown


def test_markdown_renders_the_usual_things():
    html = render_markdown("# Title\n\n- **bold** item\n- [link](https://example.com)\n")
    assert '<h1 dir="auto">Title</h1>' in html
    assert "<strong>bold</strong>" in html
    assert 'href="https://example.com"' in html
    assert 'rel="noopener noreferrer nofollow"' in html


@pytest.mark.parametrize(
    ("source", "forbidden"),
    [
        ("<script>alert(1)</script>", "<script"),
        ('<img src=x onerror="alert(1)">', "onerror"),
        ("[click](javascript:alert(1))", "javascript:"),
        ('<a href="javascript:alert(1)">x</a>', "javascript:"),
        ('<div style="background:url(x)" onclick="alert(1)">x</div>', "onclick"),
        ("<iframe src='https://evil.example'></iframe>", "<iframe"),
    ],
)
def test_markdown_is_sanitized(source, forbidden):
    assert forbidden not in render_markdown(source).lower()
