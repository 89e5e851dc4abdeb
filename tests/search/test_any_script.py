"""The keyword side for any script: text written without spaces is found by a word inside
it, other languages are matched as written (never by an English stem), English keeps its
stemming (search/migrations/0003_text_search_any_script.py)."""

import pytest

from activity.actors import Actor
from context.search import search_documents
from context.services import document_write
from memory.models import Memory
from memory.search import search_memory
from memory.services import memory_upsert
from search.keyword import keyword_side
from search.ranking import HIGHLIGHT_END, HIGHLIGHT_START
from tests.search.test_search import index_everything

pytestmark = pytest.mark.django_db

# One memory per language, and a query in the same language naming a word inside it.
MEMORIES = {
    "fact:zh-tea": ("我喜欢喝绿茶，不喜欢咖啡。", "绿茶"),
    "fact:ja-cat": ("毎朝、猫と一緒に緑茶を飲みます。", "緑茶"),
    "fact:ru-dacha": ("Летом мы живём на даче под Петербургом.", "дача Петербургом"),
    "fact:ar-tea": ("أحب شرب الشاي الأخضر في الصباح", "الشاي"),
    "fact:de-bike": ("Ich fahre jeden Tag mit dem Fahrrad zur Arbeit.", "Fahrrad"),
    "fact:en-run": ("Goes for a run every morning before work", "running"),
}
OTHERS = {
    "fact:zh-coffee": "他每天早上喝咖啡。",
    "fact:ja-dog": "週末は犬と公園を散歩します。",
    "fact:ru-moscow": "Брат работает в Москве инженером.",
    "fact:ar-coffee": "يشرب أخي القهوة كل يوم",
    "fact:de-car": "Meine Schwester hat ein neues Auto gekauft.",
    "fact:en-swim": "Swims at the lake on Sundays",
}


def remember(user, memories):
    for key, value in memories.items():
        memory_upsert(user=user, key=key, value=value, actor=Actor.for_user(user))


def stored_words(key):
    (vector,) = Memory.objects.filter(key=key).values_list("search_vector", flat=True)
    return vector


@pytest.fixture
def languages(alice):
    remember(alice, {key: value for key, (value, _) in MEMORIES.items()})
    remember(alice, OTHERS)
    index_everything()
    return alice


@pytest.mark.parametrize("key", list(MEMORIES))
def test_each_language_is_found_by_a_word_of_its_own(languages, key):
    query = MEMORIES[key][1]

    hits = search_memory(user=languages, query=query)

    assert hits[0].memory.key == key
    assert hits[0].ranks.keyword_rank == 1
    keyword_found = [hit.memory.key for hit in hits if hit.ranks.keyword_rank is not None]
    assert keyword_found == [key]


def test_text_without_spaces_is_indexed_as_characters_and_pairs(alice):
    remember(alice, {"fact:zh-tea": "我喜欢喝绿茶"})

    words = stored_words("fact:zh-tea")

    for gram in ("绿茶", "喝绿", "我喜", "茶", "绿"):
        assert f"'{gram}'" in words
    assert "'我喜欢喝绿茶'" not in words  # not one lexeme for the whole run


def test_a_single_character_query_finds_its_character(alice):
    remember(alice, {"fact:ja-cat": "猫が好きです", "fact:ja-dog": "犬が好きです"})

    hits = search_memory(user=alice, query="猫")

    assert [hit.memory.key for hit in hits if hit.ranks.keyword_rank is not None] == ["fact:ja-cat"]


def test_a_german_text_keeps_its_words_as_written(alice):
    remember(alice, {"fact:de-dogs": "Ich lese die Geschichte der Hunde und will mehr wissen."})

    words = stored_words("fact:de-dogs")

    # The english configuration made 'geschicht' and 'hund' and dropped "will" (an
    # English stop word, German for "wants").
    assert "'geschichte'" in words
    assert "'hunde'" in words
    assert "'will'" in words
    assert "'geschicht'" not in words
    assert "'hund'" not in words


def test_a_russian_text_keeps_its_words_as_written(alice):
    remember(alice, {"fact:ru-tea": "Я люблю пить Зелёный чай"})

    words = stored_words("fact:ru-tea")

    for word in ("я", "люблю", "пить", "зелёный", "чай"):  # lower-cased, as written
        assert f"'{word}'" in words


def test_a_german_query_counts_its_own_words_not_english_stop_words(alice):
    remember(
        alice,
        {
            "fact:de-wants": "Ich will im Sommer nach Kyoto.",
            "fact:de-likes": "Ich möchte im Sommer nach Kyoto.",
        },
    )
    rows = Memory.objects.filter(user=alice)
    pk = dict(rows.values_list("key", "pk"))

    found = keyword_side(rows, "Ich will nach Kyoto", 10, ())

    coverage = {row[3]: row[2] for row in found}
    assert coverage[pk["fact:de-wants"]] == pytest.approx(1.0)
    assert coverage[pk["fact:de-likes"]] < 0.9  # "will" is a word it lacks
    assert found[0][3] == pk["fact:de-wants"]


def test_a_plural_written_one_way_finds_a_german_row_stored_as_written(alice):
    remember(alice, {"fact:de-hotels": "Wir haben zwei Hotels in Wien gebucht."})

    hits = search_memory(user=alice, query="Hotels")

    assert hits[0].memory.key == "fact:de-hotels"
    assert hits[0].ranks.keyword_rank == 1


def test_english_is_still_stemmed(alice):
    remember(alice, {"fact:en-run": "Goes for a run every morning", "fact:en-tea": "Drinks tea"})

    words = stored_words("fact:en-run")
    hits = search_memory(user=alice, query="running")

    assert "'run'" in words  # the english configuration's stems
    assert "'morn'" in words
    assert hits[0].memory.key == "fact:en-run"
    assert hits[0].ranks.keyword_rank == 1


def test_english_stop_words_do_not_match(alice):
    remember(alice, {"fact:en-tea": "Drinks tea", "fact:en-the": "The office is in town"})
    rows = Memory.objects.filter(user=alice)

    assert keyword_side(rows, "the is", 10, ()) == []


DOCUMENTS = {
    "notes/zh.md": ("上周我们在杭州参观了龙井茶园，买了很多新茶。", "龙井茶园"),
    "notes/ja.md": ("来月、京都で友人の結婚式に出席します。", "結婚式"),
    "notes/ru.md": ("В понедельник совещание по бюджету проекта.", "бюджету"),
    "notes/ar.md": ("سنسافر إلى القاهرة في الصيف لزيارة العائلة", "القاهرة"),
    "notes/de.md": ("Die Besprechung über das Budget findet am Montag statt.", "Besprechung"),
}


def test_document_chunks_are_found_in_every_language(alice):
    for path, (content, _) in DOCUMENTS.items():
        document_write(
            user=alice, agent=None, path=path, content=content, actor=Actor.for_user(alice)
        )
    index_everything()

    for path, (_, query) in DOCUMENTS.items():
        hits = search_documents(user=alice, query=query)
        assert hits[0].path == path, query
        assert hits[0].ranks.keyword_rank == 1, query


def test_a_snippet_marks_a_word_matched_as_written(alice):
    content = DOCUMENTS["notes/de.md"][0]
    document_write(
        user=alice, agent=None, path="notes/de.md", content=content, actor=Actor.for_user(alice)
    )

    (hit,) = search_documents(user=alice, query="Besprechung")

    assert f"{HIGHLIGHT_START}Besprechung{HIGHLIGHT_END}" in hit.snippet
