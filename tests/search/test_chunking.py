"""Chunking: passages e5 reads whole: at most 220 words and 1,200 characters, 15% overlap,
a short tail merged into the previous chunk, Chinese and Japanese counted by characters."""

import itertools
import random

from search.chunking import (
    CHUNK_WORDS,
    MAX_CHUNK_CHARS,
    MIN_TAIL_WORDS,
    OVERLAP,
    SPACELESS_WORD_CHARS,
    split_into_chunks,
)

JAPANESE = (
    "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。毎年多くの観光客が訪れ、"
    "伝統的な寺院と近代的な高層ビルが共存しています。"
)


def words(count, start=0):
    """Short words (at most 5 characters with the space): the word limit comes first."""
    assert start + count <= 1000
    return " ".join(f"w{number}" for number in range(start, start + count))


def test_the_sizes_fit_e5s_window():
    assert (CHUNK_WORDS, OVERLAP, MIN_TAIL_WORDS, MAX_CHUNK_CHARS) == (220, 0.15, 30, 1200)
    assert SPACELESS_WORD_CHARS == 3


def test_empty_and_blank_text_have_no_chunks():
    assert split_into_chunks("") == []
    assert split_into_chunks(" \n\t\u3000 ") == []


def test_a_short_text_is_one_chunk_kept_as_written():
    text = "# Title\n\nSome *markdown*  here.\n"
    assert split_into_chunks(text) == ["# Title\n\nSome *markdown*  here."]


def test_exactly_220_words_is_one_chunk():
    assert split_into_chunks(words(220)) == [words(220)]


def test_chunks_are_220_words_and_neighbours_share_33():
    chunks = split_into_chunks(words(640))

    sizes = [len(chunk.split()) for chunk in chunks]
    assert sizes == [220, 220, 220, 79]
    for previous, following in itertools.pairwise(chunks):
        assert previous.split()[-33:] == following.split()[:33]
    assert chunks[-1].split()[-1] == "w639"


def test_a_tail_under_30_new_words_merges_into_the_previous_chunk():
    chunks = split_into_chunks(words(249))  # the second chunk would add 29 new words

    assert chunks == [words(249)]


def test_a_tail_of_30_new_words_is_its_own_chunk():
    chunks = split_into_chunks(words(250))

    assert [len(chunk.split()) for chunk in chunks] == [220, 63]
    assert chunks[1].split()[0] == "w187"


def test_a_tail_is_not_merged_past_the_character_limit():
    text = " ".join(f"word{number:06d}" for number in range(120))  # 11 characters a word

    chunks = split_into_chunks(text)

    assert [len(chunk.split()) for chunk in chunks] == [109, 27]  # 27 - 16 shared: 11 new
    assert max(len(chunk) for chunk in chunks) <= 1200


def test_long_words_end_a_chunk_at_1200_characters():
    text = " ".join(f"longerword{number % 10}" for number in range(2000))  # 12 characters

    chunks = split_into_chunks(text)

    assert all(1200 - 12 < len(chunk) <= 1200 for chunk in chunks[:-1])
    assert {len(chunk.split()) for chunk in chunks[:-1]} == {100}


def test_every_word_is_in_some_chunk_in_order():
    text = "\n".join(words(7, start=line * 7) for line in range(140))  # 980 words, lines
    chunks = split_into_chunks(text)

    seen = []
    for chunk in chunks:
        for word in chunk.split():
            if not seen or int(word[1:]) > int(seen[-1][1:]):
                seen.append(word)
    assert seen == text.split()
    assert "\n" in chunks[0]


def test_japanese_counts_a_word_per_three_characters():
    text = JAPANESE * 30  # no spaces: 2,010 characters

    chunks = split_into_chunks(text)

    assert [len(chunk) for chunk in chunks] == [660, 660, 660, 327]
    assert chunks[0][-99:] == chunks[1][:99]  # 33 words of 3 characters
    assert "".join(chunk[99 if number else 0 :] for number, chunk in enumerate(chunks)) == text


def test_japanese_among_spaced_words():
    text = f"Meeting notes {JAPANESE} and more English words"

    assert split_into_chunks(text) == [text]


def assert_covers_in_order(chunks, text):
    """Neighbours overlap and together they hold the whole text, in order."""
    assert chunks[0] == text[: len(chunks[0])]
    assert text.endswith(chunks[-1])
    position = 0
    for chunk in chunks:
        found = text.find(chunk, max(0, position - len(chunk)))
        assert 0 <= found <= position
        position = found + len(chunk)
    assert position == len(text)


def test_text_with_few_spaces_is_cut_by_characters():
    # A CSV line of 769 KB once made one chunk too large for a tsvector (1 MB).
    csv = ",".join(f"row{n};{n * 7};{n % 13}" for n in range(50_000))

    chunks = split_into_chunks(csv)

    assert max(len(chunk) for chunk in chunks) <= 1200
    assert len(chunks) >= len(csv) / 1200
    assert_covers_in_order(chunks, csv)


def test_random_kana_is_cut_by_its_words():
    kana = [chr(code) for code in range(0x3041, 0x3097)]
    japanese = "".join(random.Random(7).choices(kana, k=240_000))  # no spaces at all

    chunks = split_into_chunks(japanese)

    assert max(len(chunk) for chunk in chunks) <= 660
    assert len(chunks) >= len(japanese) / 660
    assert_covers_in_order(chunks, japanese)


def test_long_words_among_short_ones_keep_chunks_within_the_limit():
    url = "https://example.com/" + "x" * 500
    text = " ".join(f"see {url} now" for _ in range(200))  # 200 long words, 400 short

    chunks = split_into_chunks(text)

    assert max(len(chunk) for chunk in chunks) <= 1200
    assert "".join(chunks[0].split()) in "".join(text.split())
    assert text.endswith(chunks[-1])
