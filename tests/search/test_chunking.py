"""Chunking: about 800 words, 15% overlap, a short tail merged into the previous chunk."""

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
