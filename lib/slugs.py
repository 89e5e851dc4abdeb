"""Identifiers made from text in any script: one rule for the slug of an entry's key made
from its text (memory/entries.py) and for an agent's name made from what the person called
it (profiles/services.py). It never refuses: the text is romanised where its script has a
romanisation (anyascii: Cyrillic, Greek, Chinese, Japanese kana, Korean, Arabic, Hebrew,
Thai, emoji as their names…), and a text that leaves nothing (only punctuation, say) gets a
short id made from a hash of it, so the same text always gives the same slug."""

from __future__ import annotations

import hashlib
import unicodedata

from anyascii import anyascii
from django.utils.text import slugify

# Only the start of a long text makes its slug; reading more would change nothing but time.
_READ = 512
HASH_LENGTH = 8  # hex digits of the text's hash in a fallback slug: "note-1a2b3c4d"


def romanize(text: str) -> str:
    """The text in ASCII letters. Han ideographs are romanised one syllable each, set apart
    by spaces: Chinese and Japanese write no spaces between words, so without them the
    syllables of a whole sentence would run into one word ("woxihuanhelucha")."""
    parts: list[str] = []
    for char in text:
        if char.isascii():
            parts.append(char)
        elif _is_han(char):
            parts.append(f" {anyascii(char)} ")
        else:
            parts.append(anyascii(char))
    return "".join(parts)


def _is_han(char: str) -> bool:
    return unicodedata.name(char, "").startswith("CJK ")


def text_hash(text: str) -> str:
    """A short stable id of the text: the same words (whatever their spacing or Unicode
    normal form) give the same id."""
    canonical = " ".join(unicodedata.normalize("NFC", text).split())
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_LENGTH]


def slug_from_text(text: str, *, max_length: int, fallback: str) -> str:
    """A readable slug of the text's first words: a-z, 0-9, '_' and '-', starting with a
    letter or digit, at most `max_length` long and ending on a whole word. When nothing of
    the text is left for one, `fallback` and the text's hash ("note-1a2b3c4d"). Never empty.

    "Prefers oat milk" → "prefers-oat-milk", "Я люблю чай" → "ya-lyublyu-chay",
    "我喜欢喝绿茶" → "wo-xi-huan-he-lu-cha", "???" → "note-…" (fallback "note")."""
    full = slugify(romanize(text[:_READ]))
    base = full[:max_length]
    if len(full) > max_length and "-" in base:
        base = base.rsplit("-", 1)[0]  # end on a whole word
    base = base.strip("-_")
    if base:
        return base
    return f"{fallback}-{text_hash(text)}"[:max_length]
