"""lib/slugs.py: a slug is made from any text, never refused, the same for the same text."""

import re

import pytest

from lib.slugs import slug_from_text, text_hash
from memory.entries import derive_slug
from memory.keys import SLUG_PATTERN, parse_key
from profiles.models import AGENT_NAME_PATTERN
from profiles.services import agent_slug

TEXTS = {
    "Prefers oat milk in flat whites": "prefers-oat-milk-in-flat-whites",
    "我喜欢喝绿茶": "wo-xi-huan-he-lu-cha",
    "Я люблю зелёный чай": "ya-lyublyu-zelenyy-chay",
    "Γειά σου κόσμε": "geia-soy-kosme",
    "ありがとう": "arigatou",
    "안녕하세요 세계": "annyeonghaseyo-segye",
    "أنا أحب الشاي الأخضر": "n-hb-lshy-lkhdr",
    "אני אוהב תה ירוק": "ny-vhv-th-yrvk",
    "สวัสดี": "swasdi",
    "Straße café": "strasse-cafe",
    "🍣": "sushi",
}
# One of each script and then some: letters of no romanisation, marks, controls, emoji.
EVERY_SCRIPT = [
    *TEXTS,
    "???",
    "…",
    "",
    "   ",
    "\x00\x1f",
    "\u202e\u2066",
    "ⵜⴰⵎⴰⵣⵉⵖⵜ",  # Tifinagh
    "ᐃᓄᒃᑎᑐᑦ",  # Canadian syllabics
    "𓀀𓀁",  # Egyptian hieroglyphs
    "ꦗꦮ",  # Javanese
    "👩‍👩‍👧",
    "日本語" * 200,
    "-_-",
]


@pytest.mark.parametrize(("text", "slug"), TEXTS.items())
def test_a_script_with_a_romanisation_gives_its_words(text, slug):
    assert derive_slug(text) == slug


@pytest.mark.parametrize("text", EVERY_SCRIPT)
def test_every_text_gives_a_valid_key_and_agent_name(text):
    slug = derive_slug(text)
    name = agent_slug(text)

    assert re.fullmatch(SLUG_PATTERN, slug)
    assert len(slug) <= 60
    assert parse_key(f"fact:{slug}").slug == slug
    assert re.fullmatch(AGENT_NAME_PATTERN, name)


def test_the_same_text_gives_the_same_slug_and_another_text_another():
    assert derive_slug("???") == derive_slug("???") == f"note-{text_hash('???')}"
    assert derive_slug("？？？") != derive_slug("???")
    # Spacing and Unicode normal form are not part of what the text says.
    assert derive_slug(" ?  ?\n? ") == derive_slug("? ? ?")
    assert derive_slug("e\u0301!") == derive_slug("é!")
    assert agent_slug("???") == f"agent-{text_hash('???')}"


def test_a_long_text_ends_on_a_whole_word():
    slug = slug_from_text("Я люблю зелёный чай " * 20, max_length=30, fallback="note")
    assert slug == "ya-lyublyu-zelenyy-chay-ya"
    assert slug_from_text("a" * 100, max_length=10, fallback="note") == "a" * 10
