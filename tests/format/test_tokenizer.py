"""Offline tiktoken encodings: the right encoding per model, local files only, checked hashes."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from governed_memory import ConfigurationError, TokenizerError, counter_for
from governed_memory._format._tokenizer import (
    encoding_name_for,
    litellm_tokenizer_dir,
    load_encoding,
)

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_FILE = hashlib.sha1(CL100K_URL.encode()).hexdigest()


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        (None, "cl100k_base"),
        ("", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("openai/gpt-4o-mini", "o200k_base"),
        ("openrouter/openai/gpt-4.1-mini", "o200k_base"),
        ("GPT-4o", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5.4", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("gpt-oss-120b", "o200k_base"),
        ("claude-sonnet-4-6", "cl100k_base"),
        ("ollama/llama3", "cl100k_base"),
        ("text-davinci-003", "cl100k_base"),
        ("local/extractive", "cl100k_base"),
    ],
)
def test_encoding_per_model(model: str | None, encoding: str) -> None:
    assert encoding_name_for(model) == encoding


def test_litellm_ships_the_vocabularies() -> None:
    folder = litellm_tokenizer_dir()
    assert folder is not None
    assert (folder / CL100K_FILE).is_file()


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_local_encoding_matches_tiktokens_own(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same tokens as tiktoken.get_encoding reading the same files from its cache."""
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(litellm_tokenizer_dir()))
    reference = tiktoken.get_encoding(name)
    ours = load_encoding(name)
    text = "Héllo wörld!\n\n[2026-11-30T04:00:25.196358] Human: the budget is 1000 EUR 🚀\t  x"
    assert ours.encode(text) == reference.encode(text)
    assert ours.n_vocab == reference.n_vocab


def test_known_counts() -> None:
    assert counter_for(None)("hello world") == 2
    assert counter_for("gpt-4o")("hello world") == 2
    assert counter_for(None)("") == 0


def test_special_token_text_is_counted_not_refused() -> None:
    count = counter_for("gpt-4")
    assert count("<|endoftext|>") == 7
    assert counter_for("gpt-4o")("say <|endoftext|> and <|endofprompt|>") > 4


def test_counters_are_cached_per_encoding() -> None:
    assert counter_for("gpt-4") is counter_for(None)
    assert counter_for("gpt-4o") is counter_for("o3")
    assert counter_for("gpt-4o") is not counter_for("gpt-4")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError) as info:
        load_encoding("cl100k_base", dirs=[tmp_path])
    message = str(info.value)
    assert CL100K_FILE in message
    assert str(tmp_path) in message
    assert "never downloads" in message
    assert "reinstall litellm" in message


def test_corrupt_file_fails_its_hash(tmp_path: Path) -> None:
    source = litellm_tokenizer_dir()
    assert source is not None
    data = bytearray((source / CL100K_FILE).read_bytes())
    data[10] ^= 1
    (tmp_path / CL100K_FILE).write_bytes(bytes(data))
    with pytest.raises(TokenizerError, match="SHA-256"):
        load_encoding("cl100k_base", dirs=[tmp_path])


def test_a_copy_in_another_folder_loads(tmp_path: Path) -> None:
    source = litellm_tokenizer_dir()
    assert source is not None
    shutil.copy(source / CL100K_FILE, tmp_path / CL100K_FILE)
    encoding = load_encoding("cl100k_base", dirs=[tmp_path / "missing", tmp_path])
    assert encoding.name == "cl100k_base"
    assert len(encoding.encode("hello world")) == 2


def test_unknown_encoding_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"'r50k_base'.*cl100k_base, o200k_base"):
        load_encoding("r50k_base")


def test_loading_touches_neither_environment_nor_tiktoken_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    before = dict(os.environ)
    load_encoding("o200k_base")
    assert dict(os.environ) == before
    assert list(cache.iterdir()) == []
