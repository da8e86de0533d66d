"""Offline token counting with tiktoken (reference-behaviour C15).

tiktoken normally downloads its vocabulary files from the internet on first
use. That is not acceptable here (regulated deployments, offline tests), so
the two encodings we use are read from files already on disk and checked
against the SHA-256 that tiktoken itself publishes for them:

=============  =====================================================  ==========================
encoding       models                                                 file (name = sha1 of URL)
=============  =====================================================  ==========================
``o200k_base``  gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1/o3/o4, gpt-oss,    ``fb374d41…``
                chatgpt-4o, ``ft:gpt-4o…``
``cl100k_base`` everything else: gpt-3.5, gpt-4, embeddings, every     ``9b5ad71b…``
                non-OpenAI model (Claude, Gemini, Llama, …, an
                approximation) and no model at all
=============  =====================================================  ==========================

The model-to-encoding table is tiktoken's own (:mod:`tiktoken.model`), applied
to the last ``/``-separated part of a litellm model string
(``openrouter/openai/gpt-4o`` counts as ``gpt-4o``); the legacy r50k/p50k
models also count with ``cl100k_base``.

Where the files come from: litellm ships them inside its package
(``litellm/litellm_core_utils/tokenizers/``), named the way tiktoken names its
cache entries. We locate that folder without importing litellm (importing it
takes seconds). The regex and special tokens come from
:mod:`tiktoken_ext.openai_public`, so they always match the installed
tiktoken.

Why not ``tiktoken.load.load_tiktoken_bpe(path, expected_hash)``: for a local
path it still goes through tiktoken's download cache, and writes a copy of the
file into ``$TIKTOKEN_CACHE_DIR``, which litellm points at its own
site-packages folder on import. We read the file, check the hash and parse the
(two-column, base64) format ourselves, and never touch the environment.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.util
import os
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .._errors import TokenizerError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "counter_for",
    "encoding_name_for",
    "litellm_tokenizer_dir",
    "load_encoding",
]

DEFAULT_ENCODING = "cl100k_base"
ENCODINGS = ("cl100k_base", "o200k_base")
"""The encodings governed_memory can load offline."""

_FIX = (
    "reinstall litellm (pip install --force-reinstall 'litellm>=1.50,<2'), which ships the "
    "vocabulary files, or pass token_counter= to Conversation"
)


def encoding_name_for(model_name: str | None) -> str:
    """The encoding that counts tokens for ``model_name`` (see the module table)."""
    if not model_name:
        return DEFAULT_ENCODING
    from tiktoken.model import encoding_name_for_model

    base = model_name.strip().rsplit("/", 1)[-1].lower()
    try:
        name = encoding_name_for_model(base)
    except KeyError:
        return DEFAULT_ENCODING
    # o200k_harmony (gpt-oss) has o200k_base's vocabulary plus special tokens,
    # which we count as ordinary text anyway.
    return "o200k_base" if name.startswith("o200k") else DEFAULT_ENCODING


def litellm_tokenizer_dir() -> Path | None:
    """litellm's bundled tokenizer folder, found without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


def _default_dirs() -> tuple[Path, ...]:
    folder = litellm_tokenizer_dir()
    return (folder,) if folder is not None else ()


def _parse_bpe(data: bytes, path: Path) -> dict[bytes, int]:
    # The .tiktoken format: one "<base64 token> <rank>" pair per line.
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:
            raise TokenizerError(
                f"{path} is not a tiktoken vocabulary file (bad line {line[:60]!r}); {_FIX}"
            ) from exc
    return ranks


def _local_loader(name: str, dirs: Sequence[Path]) -> Callable[..., dict[bytes, int]]:
    """A drop-in for ``load_tiktoken_bpe(url, expected_hash)`` that only reads ``dirs``."""

    def load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        file_name = hashlib.sha1(url.encode()).hexdigest()
        for folder in dirs:
            path = folder / file_name
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise TokenizerError(
                    f"cannot read {path} for encoding {name!r}: {exc}; {_FIX}"
                ) from exc
            actual = hashlib.sha256(data).hexdigest()
            if expected_hash is not None and actual != expected_hash:
                raise TokenizerError(
                    f"{path} has SHA-256 {actual}, but tiktoken publishes {expected_hash} for "
                    f"encoding {name!r}: the file is corrupt or was replaced; {_FIX}"
                )
            return _parse_bpe(data, path)
        looked = ", ".join(str(d) for d in dirs) or "no folder (litellm is not installed)"
        raise TokenizerError(
            f"the vocabulary of encoding {name!r} ({file_name}, from {url}) is not on this machine; "
            f"looked in {looked}, and governed_memory never downloads it; {_FIX}"
        )

    return load


def load_encoding(
    name: str, dirs: Sequence[str | os.PathLike[str]] | None = None
) -> tiktoken.Encoding:
    """Build the tiktoken encoding ``name`` from local files only.

    Args:
        name: ``"cl100k_base"`` or ``"o200k_base"``.
        dirs: folders holding the vocabulary files, named as tiktoken names
            its cache entries (default: litellm's bundled folder).

    Raises:
        ConfigurationError: ``name`` is not one of :data:`ENCODINGS`.
        TokenizerError: the file is missing, unreadable or fails its hash.
    """
    if name not in ENCODINGS:
        from .._errors import ConfigurationError

        raise ConfigurationError(
            f"encoding {name!r} is not available offline; use one of {', '.join(ENCODINGS)}"
        )
    folders = tuple(Path(d) for d in dirs) if dirs is not None else _default_dirs()
    return _build(name, folders)


def _build(name: str, folders: tuple[Path, ...]) -> tiktoken.Encoding:
    import tiktoken
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    constructor = getattr(openai_public, name)
    # Run tiktoken's own constructor (pattern, special tokens, expected hash)
    # with its loader swapped for the local one: a copy of the function with
    # one global replaced, so nothing shared is patched.
    offline = types.FunctionType(
        constructor.__code__,
        {**constructor.__globals__, "load_tiktoken_bpe": _local_loader(name, folders)},
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    spec = cast(dict[str, Any], offline())
    return tiktoken.Encoding(
        spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
        explicit_n_vocab=spec.get("explicit_n_vocab"),
    )


@functools.cache
def _counter(name: str) -> Callable[[str], int]:
    encoding = load_encoding(name)
    encode = encoding.encode

    def count(text: str) -> int:
        # disallowed_special=(): text that contains "<|endoftext|>" and the
        # like is counted as ordinary text instead of raising.
        return len(encode(text, disallowed_special=()))

    return count


def counter_for(model_name: str | None) -> Callable[[str], int]:
    """A function counting the tokens of a string as ``model_name`` would.

    The encoding is loaded once per process and shared by every counter that
    uses it (a few hundred ms the first time).

    Raises:
        TokenizerError: the vocabulary file is missing or corrupt.
    """
    return _counter(encoding_name_for(model_name))
