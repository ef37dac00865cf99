"""Exact-length prompts with a unique fingerprint per request (no accidental prefix-cache hits),
and token counting.

With a local tokenizer (a `tokenizer.json` loaded by the `tokenizers` library) the prompt has
exactly N tokens for that tokenizer; without one, N whitespace-separated words, an
approximation of N tokens that the mock server counts exactly. A tokenizer is never downloaded:
`find_tokenizer` takes an explicit path, or the model's files in the local Hugging Face cache.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from pathlib import Path

# Common short English words: close to one token each in most BPE vocabularies.
_VOCAB = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "it",
    "be",
    "this",
    "are",
    "or",
    "an",
    "his",
    "not",
    "which",
    "have",
    "but",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "time",
    "year",
    "people",
    "way",
    "day",
    "man",
    "thing",
    "woman",
    "life",
    "child",
    "world",
    "school",
    "state",
    "family",
    "student",
    "group",
    "country",
    "problem",
    "hand",
    "part",
    "place",
    "case",
    "week",
    "company",
    "system",
    "program",
    "question",
    "work",
    "government",
    "number",
    "night",
    "point",
    "home",
    "water",
    "room",
    "mother",
    "area",
    "money",
    "story",
    "fact",
    "month",
    "lot",
    "right",
    "study",
    "book",
    "eye",
    "job",
    "word",
    "business",
    "issue",
]


WHITESPACE = "whitespace words"


def find_tokenizer(explicit: str | Path | None, models: Iterable[str] = ()) -> Path | None:
    """The tokenizer.json to count with: `explicit` (a file or its folder; an error if it has none),
    else the first model that is a local folder with one or is in the local Hugging Face cache
    (`$HF_HUB_CACHE`, `$HF_HOME/hub`, ~/.cache/huggingface/hub); None: count whitespace words."""
    if explicit is not None:
        path = Path(explicit)
        path = path / "tokenizer.json" if path.is_dir() else path
        if not path.is_file():
            raise ValueError(f"--tokenizer: {path} is not a tokenizer.json file")
        return path
    hub = Path(
        os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME") or Path.home() / ".cache/huggingface") / "hub"
    )
    for model in models:
        local = Path(model) / "tokenizer.json"
        if local.is_file():  # vLLM serving a local folder lists it as the model's root
            return local
        # the Hub cache's layout: models--{org}--{name}/snapshots/{revision}/tokenizer.json
        snapshots = sorted((hub / f"models--{model.replace('/', '--')}" / "snapshots").glob("*/tokenizer.json"))
        if snapshots:
            return snapshots[-1]
    return None


class TokenCounter:
    """Counts tokens as the model does when its tokenizer.json is at hand, else whitespace words."""

    def __init__(self, tokenizer: str | Path | None = None) -> None:
        path = find_tokenizer(tokenizer) if tokenizer is not None else None
        self.tokenizer = _load_tokenizer(path) if path is not None else None
        self.counting = f"tokenizer {path}" if path is not None else WHITESPACE  # said in a run's output

    def count(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)


class PromptBuilder:
    """Prompts of exact lengths, and the token counts of the texts a server streams back."""

    def __init__(self, tokenizer: str | Path | None = None, seed: int = 0, run_id: str | None = None) -> None:
        rng = random.Random(seed)
        self.run_id = run_id or f"{rng.randrange(16**6):06x}"
        words = [rng.choice(_VOCAB) for _ in range(40_000)]
        self.counter = TokenCounter(tokenizer)
        self.count = self.counter.count
        self._tokenizer = self.counter.tokenizer
        if self._tokenizer is None:
            self._filler = " ".join(words)
            # end offset of the k-th word, so a k-word slice costs one string slice
            self._ends: list[int] = []
            pos = 0
            for w in words:
                pos += len(w)
                self._ends.append(pos)
                pos += 1
        else:
            self._filler_ids: list[int] = self._tokenizer.encode(" ".join(words), add_special_tokens=False).ids

    def build(self, index: int, tokens: int) -> str:
        """A prompt of exactly `tokens` tokens (words without a tokenizer) that starts uniquely."""
        if tokens < 1:
            raise ValueError(f"prompt tokens must be >= 1, got {tokens}")
        fingerprint = f"r{self.run_id}q{index}"
        if self._tokenizer is None:
            if tokens == 1:
                return fingerprint
            return fingerprint + " " + self._filler[: self._ends[min(tokens - 2, len(self._ends) - 1)]]
        return self._build_tokenized(fingerprint, tokens)

    def _build_tokenized(self, fingerprint: str, tokens: int) -> str:
        tok = self._tokenizer
        head = tok.encode(fingerprint, add_special_tokens=False).ids
        if tokens < len(head):
            raise ValueError(f"prompt tokens ({tokens}) must be >= the fingerprint's {len(head)} tokens")
        n = max(0, tokens - len(head))
        for _ in range(16):  # merges across the seam can shift the count by a token or two
            text = fingerprint + tok.decode(self._filler_ids[:n])
            have = self.count(text)
            if have == tokens:
                return text
            n += tokens - have
            if n < 0:
                break
        raise ValueError(f"could not build a prompt of exactly {tokens} tokens with this tokenizer")


def _load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # the library raises bare Exceptions for files it cannot read
        raise ValueError(f"--tokenizer: {path} is not a readable tokenizer.json ({error})") from None
