"""Chunking: about 800 words, 15% overlap, a short tail merged into the previous chunk."""

import random

from search.chunking import split_into_chunks


def words(count, start=0):
    return " ".join(f"w{number}" for number in range(start, start + count))


def test_empty_and_blank_text_have_no_chunks():
    assert split_into_chunks("") == []
    assert split_into_chunks(" \n\t ") == []


def test_a_short_text_is_one_chunk_kept_as_written():
    text = "# Title\n\nSome *markdown*  here.\n"
    assert split_into_chunks(text) == ["# Title\n\nSome *markdown*  here."]


def test_exactly_800_words_is_one_chunk():
    assert split_into_chunks(words(800)) == [words(800)]


def test_chunks_are_800_words_and_neighbours_share_120():
    chunks = split_into_chunks(words(2000))

    sizes = [len(chunk.split()) for chunk in chunks]
    assert sizes == [800, 800, 640]
    assert chunks[0].split()[-120:] == chunks[1].split()[:120]
    assert chunks[1].split()[-120:] == chunks[2].split()[:120]
    assert chunks[2].split()[-1] == "w1999"


def test_a_tail_under_50_new_words_merges_into_the_previous_chunk():
    chunks = split_into_chunks(words(849))  # the second chunk would add 49 new words

    assert len(chunks) == 1
    assert chunks[0].split() == words(849).split()


def test_a_tail_of_50_new_words_is_its_own_chunk():
    chunks = split_into_chunks(words(850))

    assert [len(chunk.split()) for chunk in chunks] == [800, 170]
    assert chunks[1].split()[0] == "w680"


def test_every_word_is_in_some_chunk_in_order():
    text = "\n".join(words(7, start=line * 7) for line in range(500))  # 3500 words, lines
    chunks = split_into_chunks(text)

    seen = []
    for chunk in chunks:
        for word in chunk.split():
            if not seen or int(word[1:]) > int(seen[-1][1:]):
                seen.append(word)
    assert seen == text.split()
    assert "\n" in chunks[0]


def test_text_with_few_spaces_is_cut_by_characters():
    # A CSV line of 769 KB once made one chunk too large for a tsvector (1 MB).
    csv = ",".join(f"row{n};{n * 7};{n % 13}" for n in range(50_000))
    kana = [chr(code) for code in range(0x3041, 0x3097)]
    japanese = "".join(random.Random(7).choices(kana, k=240_000))  # no spaces at all

    for text in (csv, japanese):
        chunks = split_into_chunks(text)

        assert max(len(chunk) for chunk in chunks) <= 8000
        assert len(chunks) >= len(text) / 8000
        # Neighbours overlap and together they hold the whole text, in order.
        assert chunks[0] == text[: len(chunks[0])]
        assert text.endswith(chunks[-1])
        position = 0
        for chunk in chunks:
            found = text.find(chunk, max(0, position - len(chunk)))
            assert 0 <= found <= position
            position = found + len(chunk)
        assert position == len(text)


def test_long_words_among_short_ones_keep_chunks_within_the_limit():
    url = "https://example.com/" + "x" * 500
    text = " ".join(f"see {url} now" for _ in range(200))  # 200 long words, 400 short

    chunks = split_into_chunks(text)

    assert max(len(chunk) for chunk in chunks) <= 8000
    assert "".join(chunks[0].split()) in "".join(text.split())
    assert text.endswith(chunks[-1])
