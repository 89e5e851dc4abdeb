"""The embedding providers: WordLlama offline, the openai client against a local server, and
choosing one per role (memories, documents). The e5 model itself: tests/search/test_e5.py."""

import math
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from search import wordllama_embedder
from search.e5_embedder import E5_MODEL_ID, E5Embedder
from search.embedder_base import EmbeddingError, EmbeddingUnavailable
from search.embeddings import get_embedder, get_query_embedder, provider_name, reset_embedder
from search.openai_embedder import OpenAIEmbedder, sends_dimensions
from search.wordllama_embedder import WordLlamaEmbedder
from tests.fake_openai import NATIVE_DIMENSIONS, FakeOpenAI, Reply, fake_vector
from tests.settings_process import ROOT, load_settings


def unit(vector):
    norm = math.sqrt(sum(value * value for value in vector))
    return [value / norm for value in vector]


def cosine(a, b):
    return float(np.dot(a, b))


# --- wordllama ---------------------------------------------------------------------------


class NetworkBlocked(OSError):
    pass


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Every way to open a connection raises; an empty home and Hugging Face cache."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise NetworkBlocked(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for name in ("HOME", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    return attempts


@pytest.fixture(scope="module")
def local():
    return WordLlamaEmbedder()


def test_wordllama_loads_and_embeds_with_no_network(no_network, tmp_path):
    embedder = WordLlamaEmbedder()

    vectors = embedder.embed(["the cat sat on the mat", "quarterly revenue report"])

    assert no_network == []
    assert list(tmp_path.iterdir()) == []  # nothing downloaded into a home or HF cache
    assert embedder.model == "local:wordllama-l2-supercat-256"
    assert embedder.dimensions == 256
    assert embedder.passage_words is None  # a mean over every token: no window
    assert [len(vector) for vector in vectors] == [256, 256]


def test_wordllama_embeds_a_query_like_a_passage(local):
    texts = ["the cat sat on the mat", "quarterly revenue report"]

    assert local.embed_query(texts) == local.embed(texts)


def test_wordllamas_own_loader_would_go_to_the_network(no_network, tmp_path):
    """Why WordLlamaEmbedder opens the files itself: WordLlama.load() looks for the tokenizer in
    wordllama/tokenizer/ (the wheel has wordllama/tokenizers/), then the cache, then
    downloads it from Hugging Face. If this starts failing, wordllama fixed its loader."""
    from wordllama import WordLlama

    with pytest.raises(FileNotFoundError, match=r"Tokenizer file .* downloads are disabled"):
        WordLlama.load("l2_supercat", cache_dir=tmp_path / "cache", disable_download=True)
    assert no_network == []

    with pytest.raises(FileNotFoundError, match="Failed to download tokenizer file"):
        WordLlama.load("l2_supercat", cache_dir=tmp_path / "cache")
    assert no_network
    assert no_network[0][0] == "huggingface.co"


def test_local_vectors_are_unit_length_and_deterministic(local):
    texts = ["the cat sat on the mat", "Grüße aus Köln 🎉", "x", "a\n\nmulti-line\ttext"]

    first = local.embed(texts)
    again = local.embed(list(reversed(texts)))[::-1]
    fresh = WordLlamaEmbedder().embed(texts)

    assert first == again == fresh
    for vector in first:
        assert len(vector) == 256
        assert math.sqrt(sum(value * value for value in vector)) == pytest.approx(1.0, abs=1e-6)


def test_similar_texts_are_closer_than_unrelated_ones(local):
    cat, kitten, revenue, sales = map(
        np.array,
        local.embed(
            [
                "the cat sat on the mat",
                "a kitten rested on the rug",
                "quarterly revenue report",
                "the sales numbers for the last three months",
            ]
        ),
    )

    assert cosine(cat, kitten) > cosine(cat, revenue) + 0.2
    assert cosine(revenue, sales) > cosine(revenue, kitten) + 0.2


def test_local_vectors_equal_wordllamas_own_inference(local):
    """The word-by-word tokenizing is only faster: same vectors as WordLlamaInference."""
    from tokenizers import Tokenizer
    from wordllama import WordLlamaInference

    folder = wordllama_embedder.wordllama_dir()
    reference = WordLlamaInference(
        local._matrix, Tokenizer.from_file(str(folder / wordllama_embedder.WORDLLAMA_TOKENIZER))
    )
    chunk = " ".join(f"word{number % 97} and some common English text" for number in range(130))
    texts = [
        "the cat sat on the mat",
        "  Leading,   trailing   and\nnewlines\n\n",
        "naïve café — 日本語 😀 unknown-tokens zzqxj",
        chunk,
    ]

    ours = np.array(local.embed(texts))
    theirs = reference.embed([" ".join(text.split()) for text in texts], norm=True)

    np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_local_order_and_batches_do_not_change_vectors(local):
    texts = [f"note number {number} about topic {number % 7}" for number in range(50)]

    together = local.embed(texts)
    one_by_one = [local.embed([text])[0] for text in texts]

    assert together == one_by_one
    assert local.embed([]) == []


def test_the_word_memo_stays_within_its_limit(monkeypatch):
    embedder = WordLlamaEmbedder()
    monkeypatch.setattr(wordllama_embedder, "WORD_MEMO_LIMIT", 5)
    texts = ["one two three four", "five six seven eight nine ten", "one two"]
    expected = WordLlamaEmbedder().embed(texts)

    assert [embedder.embed([text])[0] for text in texts] == expected
    assert len(embedder._memo) <= 5


@pytest.mark.parametrize("texts", [[""], ["fine", "  \n\t"]])
def test_blank_texts_are_refused(local, texts):
    with pytest.raises(EmbeddingError, match=f"text {len(texts) - 1} of {len(texts)} is blank"):
        local.embed(texts)


def test_one_string_is_not_a_list_of_texts(local):
    with pytest.raises(TypeError, match="not one string"):
        local.embed("the cat")


# --- openai: the real client against a local server --------------------------------------


@pytest.fixture
def server(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def make_embedder(server, sleeps):
    def make(**options):
        defaults = {
            "api_key": "sk-test-key",
            "base_url": server.url,
            "model": "text-embedding-3-small",
            "dimensions": 256,
            "send_dimensions": True,
            "batch_size": 64,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
            "retries": 2,
            "backoff": 0.25,
            "backoff_max": 4.0,
            "sleep": sleeps.append,  # the waits are recorded, not slept
        }
        return OpenAIEmbedder(**(defaults | options))

    return make


def expected(texts, dimensions=256):
    return [unit(fake_vector(text, dimensions)) for text in texts]


def assert_vectors(got, texts, dimensions=256):
    assert len(got) == len(texts)
    for vector, want in zip(got, expected(texts, dimensions), strict=True):
        assert vector == pytest.approx(want, abs=1e-6)
        assert math.sqrt(sum(value * value for value in vector)) == pytest.approx(1.0, abs=1e-9)


def test_request_shape(server, make_embedder):
    embedder = make_embedder()

    vectors = embedder.embed(["the cat sat on the mat", "quarterly revenue report"])

    assert embedder.model == "openai:text-embedding-3-small:256"
    assert embedder.dimensions == 256
    assert_vectors(vectors, ["the cat sat on the mat", "quarterly revenue report"])
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/embeddings")
    assert request.json == {
        "model": "text-embedding-3-small",
        "input": ["the cat sat on the mat", "quarterly revenue report"],
        "dimensions": 256,
        "encoding_format": "base64",  # the client's own default; it decodes the answer
    }
    assert request.headers["authorization"] == "Bearer sk-test-key"
    assert request.headers["content-type"] == "application/json"


def test_dimensions_are_left_out_for_models_that_do_not_take_them(server, make_embedder):
    embedder = make_embedder(model="nomic-embed-text", send_dimensions=False, dimensions=1536)

    vectors = embedder.embed(["hello"])

    assert "dimensions" not in server.requests[0].json
    assert server.requests[0].json["model"] == "nomic-embed-text"
    assert embedder.model == "openai:nomic-embed-text:1536"
    assert_vectors(vectors, ["hello"], dimensions=NATIVE_DIMENSIONS)


@pytest.mark.parametrize(
    ("model", "setting", "sent"),
    [
        ("text-embedding-3-small", "auto", True),
        ("text-embedding-3-large", "auto", True),
        ("text-embedding-ada-002", "auto", False),
        ("nomic-embed-text", "auto", False),
        ("nomic-embed-text", "true", True),
        ("text-embedding-3-small", "false", False),
    ],
)
def test_when_dimensions_are_sent(model, setting, sent):
    assert sends_dimensions(model, setting) is sent


def test_a_server_answering_floats_instead_of_base64_works(server, make_embedder):
    server.script(Reply(floats=True))

    assert_vectors(make_embedder().embed(["plain floats"]), ["plain floats"])


def test_batches_keep_the_order_even_when_the_server_shuffles(server, make_embedder):
    texts = [f"text number {number}" for number in range(8)]
    server.script(*(Reply(shuffle=True) for _ in range(3)))

    vectors = make_embedder(batch_size=3).embed(texts)

    assert [request.json["input"] for request in server.requests] == [
        texts[0:3],
        texts[3:6],
        texts[6:8],
    ]
    assert_vectors(vectors, texts)


def test_a_query_is_embedded_like_a_passage(server, make_embedder):
    embedder = make_embedder()

    assert embedder.embed_query(["a question"]) == embedder.embed(["a question"])
    assert [request.json["input"] for request in server.requests] == [["a question"]] * 2
    assert embedder.passage_words is None


def test_no_texts_no_request(server, make_embedder):
    assert make_embedder().embed([]) == []
    assert server.requests == []


def test_blank_texts_are_refused_before_any_request(server, make_embedder):
    with pytest.raises(EmbeddingError, match="text 1 of 2 is blank"):
        make_embedder().embed(["fine", " "])
    assert server.requests == []


def test_429_then_success_waits_as_long_as_retry_after_says(server, make_embedder, sleeps):
    server.script(Reply(429, headers={"Retry-After": "2"}))

    vectors = make_embedder().embed(["rate limited"])

    assert_vectors(vectors, ["rate limited"])
    assert len(server.requests) == 2
    assert sleeps == [2.0]


def test_retry_after_ms_is_honored_before_retry_after(server, make_embedder, sleeps):
    server.script(Reply(429, headers={"retry-after-ms": "150", "Retry-After": "3"}))

    make_embedder().embed(["rate limited"])

    assert sleeps == [0.15]


def test_a_retry_after_longer_than_the_backoff_cap_gives_up_at_once(server, make_embedder, sleeps):
    server.script(Reply(429, headers={"Retry-After": "120"}))

    with pytest.raises(EmbeddingUnavailable, match="asked to wait 120 s") as caught:
        make_embedder(backoff_max=10.0).embed(["rate limited"])

    assert caught.value.retry_after == 120.0
    assert len(server.requests) == 1
    assert sleeps == []


def test_500_then_success_backs_off(server, make_embedder, sleeps):
    server.script(Reply(500))

    vectors = make_embedder().embed(["flaky"])

    assert_vectors(vectors, ["flaky"])
    assert len(server.requests) == 2
    assert sleeps == [0.25]


def test_backoff_doubles_up_to_its_cap(server, make_embedder, sleeps):
    server.script(Reply(503), Reply(502), Reply(500), Reply(503))

    make_embedder(retries=4, backoff=0.1, backoff_max=0.3).embed(["flaky"])

    assert len(server.requests) == 5
    assert sleeps == [0.1, 0.2, 0.3, 0.3]


def test_still_failing_after_the_retries_is_unavailable(server, make_embedder, sleeps):
    server.script(Reply(503), Reply(503), Reply(503))

    with pytest.raises(EmbeddingUnavailable, match=r"failed 3 time.*HTTP 503") as caught:
        make_embedder(retries=2).embed(["down"])

    assert caught.value.retry_after is None
    assert len(server.requests) == 3
    assert sleeps == [0.25, 0.5]


def test_a_timeout_on_every_try_is_unavailable(server, make_embedder, sleeps):
    server.script(*(Reply(delay=30) for _ in range(3)))

    with pytest.raises(EmbeddingUnavailable, match=r"failed 3 time.*timed out"):
        make_embedder(read_timeout=0.2, retries=2).embed(["slow"])

    assert len(server.requests) == 3
    assert sleeps == [0.25, 0.5]


def test_a_timeout_then_success(server, make_embedder, sleeps):
    server.script(Reply(delay=30))

    vectors = make_embedder(read_timeout=0.2).embed(["slow once"])

    assert_vectors(vectors, ["slow once"])
    assert len(server.requests) == 2
    assert sleeps == [0.25]


def test_no_server_listening_is_unavailable(make_embedder, sleeps):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there

    with pytest.raises(EmbeddingUnavailable, match="failed 2 time"):
        make_embedder(base_url=f"http://127.0.0.1:{port}/v1", retries=1).embed(["anyone?"])
    assert sleeps == [0.25]


def test_vectors_of_the_wrong_length_are_a_permanent_error(server, make_embedder):
    server.script(Reply(dimensions=768))

    with pytest.raises(EmbeddingError) as caught:
        make_embedder().embed(["hello"])

    assert not isinstance(caught.value, EmbeddingUnavailable)
    assert "returned 768-dimension vectors, but MNEMO_EMBEDDING_DIMENSIONS=256" in str(caught.value)
    assert "MNEMO_EMBEDDING_DIMENSIONS=768 and MNEMO_EMBEDDING_SEND_DIMENSIONS=false" in str(
        caught.value
    )
    assert len(server.requests) == 1


def test_wrong_length_without_dimensions_says_what_to_set(server, make_embedder):
    with pytest.raises(EmbeddingError, match="set MNEMO_EMBEDDING_DIMENSIONS=1536, or MNEMO_"):
        make_embedder(send_dimensions=False).embed(["hello"])


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (400, "set MNEMO_EMBEDDING_SEND_DIMENSIONS=false"),
        (401, "check OPENAI_API_KEY"),
        (404, "check MNEMO_EMBEDDING_MODEL and OPENAI_BASE_URL"),
    ],
)
def test_a_refused_request_is_a_permanent_error(server, make_embedder, sleeps, status, hint):
    server.script(Reply(status, body={"error": {"message": "nope", "type": "invalid"}}))

    with pytest.raises(EmbeddingError, match=f"HTTP {status}: nope.*{hint}") as caught:
        make_embedder().embed(["hello"])

    assert not isinstance(caught.value, EmbeddingUnavailable)
    assert len(server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "body",
    [
        {"object": "list", "data": [], "model": "m"},
        {
            "object": "list",
            "data": [{"object": "embedding", "index": 5, "embedding": [1.0] * 256}],
            "model": "m",
        },
        {"object": "list", "data": [{"index": 0, "embedding": [0.0] * 256}], "model": "m"},
        {"unexpected": True},
    ],
    ids=["no data", "wrong index", "zero vector", "no list"],
)
def test_an_unusable_answer_is_a_permanent_error(server, make_embedder, body):
    server.script(Reply(body=body))

    with pytest.raises(EmbeddingError) as caught:
        make_embedder().embed(["hello"])

    assert not isinstance(caught.value, EmbeddingUnavailable)


def test_an_api_key_is_required():
    with pytest.raises(EmbeddingError, match="needs OPENAI_API_KEY"):
        OpenAIEmbedder(api_key="")


# --- choosing a provider from the settings ------------------------------------------------


@pytest.fixture
def embedding_settings(settings):
    settings.MNEMO_EMBEDDING_PROVIDER = "auto"
    settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "auto"
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    settings.MNEMO_EMBEDDING_MODEL = "text-embedding-3-small"
    settings.MNEMO_EMBEDDING_DIMENSIONS = 256
    settings.MNEMO_EMBEDDING_SEND_DIMENSIONS = "auto"
    settings.MNEMO_EMBEDDING_BATCH_SIZE = 64
    settings.MNEMO_EMBEDDING_CONNECT_TIMEOUT = 2.0
    settings.MNEMO_EMBEDDING_TIMEOUT = 5.0
    settings.MNEMO_EMBEDDING_RETRIES = 2
    settings.MNEMO_EMBEDDING_BACKOFF = 0.01
    settings.MNEMO_EMBEDDING_BACKOFF_MAX = 1.0
    yield settings
    reset_embedder()


def test_auto_without_a_key_is_e5_for_memories_and_wordllama_for_documents(embedding_settings):
    memories, documents = get_embedder(), get_embedder("documents")

    assert isinstance(memories, E5Embedder)
    assert memories.model == E5_MODEL_ID
    assert get_embedder("memories") is memories
    assert isinstance(documents, WordLlamaEmbedder)
    assert documents.model == "local:wordllama-l2-supercat-256"
    assert get_embedder("documents") is documents
    # A search embeds its query with the same local model (its embed_query).
    assert get_query_embedder() is memories
    assert get_query_embedder("documents") is documents


def test_auto_with_a_key_is_openai(embedding_settings, server):
    embedding_settings.OPENAI_API_KEY = "sk-from-settings"
    embedding_settings.OPENAI_BASE_URL = server.url
    embedding_settings.MNEMO_EMBEDDING_BATCH_SIZE = 2
    server.script(Reply(500))  # retried after MNEMO_EMBEDDING_BACKOFF, really slept

    embedder = get_embedder()
    vectors = embedder.embed(["one", "two", "three"])

    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.model == "openai:text-embedding-3-small:256"
    assert get_embedder("documents") is embedder  # documents follow an openai provider
    assert_vectors(vectors, ["one", "two", "three"])
    assert [request.json["input"] for request in server.requests] == [
        ["one", "two"],
        ["one", "two"],
        ["three"],
    ]
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-settings"
    assert server.requests[0].json["dimensions"] == 256


def test_the_openai_query_embedder_tries_once(embedding_settings, server):
    embedding_settings.OPENAI_API_KEY = "sk-from-settings"
    embedding_settings.OPENAI_BASE_URL = server.url
    server.script(Reply(500))

    query_embedder = get_query_embedder()

    assert query_embedder is not get_embedder()
    assert query_embedder is get_query_embedder("documents")
    assert query_embedder.retries == 0
    with pytest.raises(EmbeddingUnavailable, match="failed 1 time"):
        query_embedder.embed_query(["a question"])


@pytest.mark.parametrize(
    ("memories", "documents", "key", "expected"),
    [
        ("auto", "auto", "", ("e5", "wordllama")),
        ("auto", "auto", "sk-x", ("openai", "openai")),
        ("e5", "auto", "sk-x", ("e5", "wordllama")),
        ("wordllama", "auto", "", ("wordllama", "wordllama")),
        ("local", "auto", "sk-x", ("wordllama", "wordllama")),  # the old name, as it was
        ("auto", "same", "", ("e5", "e5")),
        ("auto", "same", "sk-x", ("openai", "openai")),
        ("openai", "wordllama", "sk-x", ("openai", "wordllama")),
        ("wordllama", "e5", "", ("wordllama", "e5")),
        ("e5", "openai", "sk-x", ("e5", "openai")),
    ],
)
def test_each_role_gets_its_provider(embedding_settings, memories, documents, key, expected):
    embedding_settings.MNEMO_EMBEDDING_PROVIDER = memories
    embedding_settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = documents
    embedding_settings.OPENAI_API_KEY = key

    assert (provider_name(), provider_name("documents")) == expected
    assert provider_name("memories") == expected[0]


def test_one_model_serves_both_roles(embedding_settings):
    embedding_settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "same"

    assert get_embedder("documents") is get_embedder("memories")
    assert isinstance(get_embedder(), E5Embedder)


def test_local_is_wordllama_even_with_a_key(embedding_settings):
    embedding_settings.OPENAI_API_KEY = "sk-unused"
    embedding_settings.MNEMO_EMBEDDING_PROVIDER = "local"

    assert isinstance(get_embedder(), WordLlamaEmbedder)
    assert isinstance(get_embedder("documents"), WordLlamaEmbedder)


def test_openai_without_a_key_is_an_error(embedding_settings):
    embedding_settings.MNEMO_EMBEDDING_PROVIDER = "openai"

    with pytest.raises(EmbeddingError, match="needs OPENAI_API_KEY"):
        get_embedder()


def test_openai_for_documents_without_a_key_is_an_error(embedding_settings):
    embedding_settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "openai"

    assert isinstance(get_embedder(), E5Embedder)
    with pytest.raises(EmbeddingError, match="needs OPENAI_API_KEY"):
        get_embedder("documents")


def test_an_unknown_provider_or_role_is_refused(embedding_settings):
    embedding_settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "bert"

    with pytest.raises(EmbeddingError, match="MNEMO_DOCUMENT_EMBEDDING_PROVIDER='bert' is not"):
        get_embedder("documents")
    with pytest.raises(ValueError, match="unknown embedding role 'chunks'"):
        get_embedder("chunks")


def test_changing_a_setting_or_resetting_builds_a_new_embedder(embedding_settings):
    first = get_embedder()
    reset_embedder()
    second = get_embedder()
    embedding_settings.OPENAI_API_KEY = "sk-now-set"

    assert second is not first
    assert isinstance(get_embedder(), OpenAIEmbedder)
    embedding_settings.MNEMO_DOCUMENT_EMBEDDING_PROVIDER = "wordllama"
    assert isinstance(get_embedder("documents"), WordLlamaEmbedder)


def _settings_process(tmp_path, **environment):
    names = [
        "MNEMO_EMBEDDING_PROVIDER",
        "MNEMO_DOCUMENT_EMBEDDING_PROVIDER",
        "MNEMO_EMBEDDING_DIMENSIONS",
        "MNEMO_EMBEDDING_SEND_DIMENSIONS",
        "MNEMO_EMBEDDING_BATCH_SIZE",
        "MNEMO_EMBEDDING_CONNECT_TIMEOUT",
        "MNEMO_EMBEDDING_TIMEOUT",
        "MNEMO_EMBEDDING_RETRIES",
        "MNEMO_EMBEDDING_BACKOFF",
        "MNEMO_EMBEDDING_BACKOFF_MAX",
        "MNEMO_SEARCH_EMBED_TIMEOUT",
        "MNEMO_SEARCH_EMBED_COOLDOWN",
    ]
    drop = ("MNEMO_EMBEDDING", "MNEMO_DOCUMENT_EMBEDDING", "OPENAI", "MNEMO_SEARCH")
    return load_settings(tmp_path, names, drop=drop, **environment)


def test_settings_defaults_and_values_from_the_environment(tmp_path):
    defaults = _settings_process(tmp_path)
    chosen = _settings_process(
        tmp_path,
        MNEMO_EMBEDDING_PROVIDER="OpenAI",
        MNEMO_DOCUMENT_EMBEDDING_PROVIDER="Same",
        OPENAI_API_KEY="sk-x",
        MNEMO_EMBEDDING_DIMENSIONS="1024",
        MNEMO_EMBEDDING_SEND_DIMENSIONS="false",
        MNEMO_EMBEDDING_BATCH_SIZE="16",
        MNEMO_EMBEDDING_CONNECT_TIMEOUT="1.5",
        MNEMO_EMBEDDING_TIMEOUT="60",
        MNEMO_EMBEDDING_RETRIES="0",
        MNEMO_EMBEDDING_BACKOFF="0.1",
        MNEMO_EMBEDDING_BACKOFF_MAX="2",
        MNEMO_SEARCH_EMBED_TIMEOUT="0.5",
        MNEMO_SEARCH_EMBED_COOLDOWN="10",
    )

    assert defaults.returncode == 0, defaults.stderr
    assert defaults.stdout.split() == [
        "auto",
        "auto",
        "256",
        "auto",
        "64",
        "5.0",
        "30.0",
        "3",
        "0.5",
        "8.0",
        "2.0",
        "30.0",
    ]
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.split() == [
        "openai",
        "same",
        "1024",
        "false",
        "16",
        "1.5",
        "60.0",
        "0",
        "0.1",
        "2.0",
        "0.5",
        "10.0",
    ]


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        (
            {"MNEMO_EMBEDDING_PROVIDER": "bert"},
            "MNEMO_EMBEDDING_PROVIDER='bert' must be one of auto, e5, wordllama, openai, local.",
        ),
        (
            {"MNEMO_DOCUMENT_EMBEDDING_PROVIDER": "same-as-memories"},
            "MNEMO_DOCUMENT_EMBEDDING_PROVIDER='same-as-memories' must be one of auto, e5, "
            "wordllama, openai, local, same.",
        ),
        ({"MNEMO_EMBEDDING_PROVIDER": "openai"}, "MNEMO_EMBEDDING_PROVIDER=openai needs OPENAI"),
        (
            {"MNEMO_DOCUMENT_EMBEDDING_PROVIDER": "openai"},
            "MNEMO_DOCUMENT_EMBEDDING_PROVIDER=openai needs OPENAI",
        ),
        ({"MNEMO_EMBEDDING_TIMEOUT": "soon"}, "MNEMO_EMBEDDING_TIMEOUT='soon' is not a number"),
        ({"MNEMO_EMBEDDING_BACKOFF": "0"}, "MNEMO_EMBEDDING_BACKOFF='0' must be a positive"),
        ({"MNEMO_EMBEDDING_DIMENSIONS": "0"}, "MNEMO_EMBEDDING_DIMENSIONS=0 must be at least 1."),
        (
            {"MNEMO_EMBEDDING_SEND_DIMENSIONS": "maybe"},
            "MNEMO_EMBEDDING_SEND_DIMENSIONS='maybe' must be one of auto, true, false.",
        ),
    ],
)
def test_bad_embedding_settings_stop_the_process(tmp_path, environment, message):
    result = _settings_process(tmp_path, **environment)

    assert result.returncode != 0
    assert message in result.stderr


def test_outside_the_tests_memories_default_to_e5_and_documents_to_wordllama(tmp_path):
    """What a deployment without OPENAI_API_KEY embeds with (config.settings, not the test
    settings, which pick WordLlama for speed)."""
    code = (
        "from search.embeddings import provider_name; "
        "print(provider_name('memories'), provider_name('documents'))"
    )
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MNEMO_EMBEDDING", "MNEMO_DOCUMENT_EMBEDDING", "OPENAI"))
    }
    environment.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        MNEMO_DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://u:p@127.0.0.1:1/none",
        SECRET_KEY="test-only",
    )

    def providers(**extra):
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=environment | extra,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert providers() == ["e5", "wordllama"]
    assert providers(OPENAI_API_KEY="sk-x") == ["openai", "openai"]
