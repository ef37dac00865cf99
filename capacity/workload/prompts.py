"""Exact-length prompts with a unique fingerprint per request (no accidental prefix-cache hits),
or, given a trace's prefix blocks (Mooncake `hash_ids`), prompts whose leading blocks are the same
text wherever the trace has the same block id (the prefix reuse it recorded); and token counting.

With a local tokenizer (a `tokenizer.json` loaded by the `tokenizers` library) the prompt has
exactly N tokens for that tokenizer; without one, N whitespace-separated words, an
approximation of N tokens that the mock server counts exactly. A tokenizer is never downloaded:
`find_tokenizer` takes an explicit path, or the model's files in the local Hugging Face cache.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Sequence
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
# Tokens per prefix block of a trace's `hash_ids` (the Mooncake traces' block: ../shared/traces/README.md).
BLOCK_TOKENS = 512


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
        self._blocks: dict[tuple[int, int], str] = {}  # (block id, tokens) -> its text
        self._ends: list[int] = []
        if self._tokenizer is None:
            self._filler = " ".join(words)
            # end offset of the k-th word, so a k-word slice costs one string slice
            pos = 0
            for w in words:
                pos += len(w)
                self._ends.append(pos)
                pos += 1
        else:
            self._filler_ids: list[int] = self._tokenizer.encode(" ".join(words), add_special_tokens=False).ids

    def build(self, index: int, tokens: int, blocks: Sequence[int] | None = None) -> str:
        """A prompt of exactly `tokens` tokens (words without a tokenizer) that starts uniquely; with
        `blocks` (a trace's prefix block ids), its first tokens are those blocks, BLOCK_TOKENS each
        (the last one cut to what the prompt has left), the same text for the same id in this run,
        then a unique remainder when the prompt is longer than its blocks."""
        if tokens < 1:
            raise ValueError(f"prompt tokens must be >= 1, got {tokens}")
        if blocks:
            return self._build_from_blocks(index, tokens, blocks)
        fingerprint = f"r{self.run_id}q{index}"
        if self._tokenizer is None:
            if tokens == 1:
                return fingerprint
            return fingerprint + " " + self._filler[: self._ends[min(tokens - 2, len(self._ends) - 1)]]
        return self._build_tokenized(fingerprint, tokens)

    def _build_from_blocks(self, index: int, tokens: int, blocks: Sequence[int]) -> str:
        pieces: list[str] = []
        have = 0
        for block in blocks:
            if have == tokens:
                break
            size = min(BLOCK_TOKENS, tokens - have)
            pieces.append(self._block(block, size))
            have += size
        if have < tokens:  # longer than its blocks: the rest is this request's own
            rest = tokens - have
            pieces.append(
                self.build(index, rest)
                if self._tokenizer is None
                else self._tokenized_piece(f" r{self.run_id}q{index}", rest)
            )
        # Whitespace words count per piece when joined by a space; with a tokenizer every piece
        # starts with a space, where the pre-tokenizer splits, so pieces keep their counts.
        return (" " if self._tokenizer is None else "").join(pieces)

    def _block(self, block: int, size: int) -> str:
        """Block `block`'s first `size` tokens: its id and this run's in the first word (no two
        blocks, nor two runs against one server, share a prefix by accident), then filler from an
        offset the id picks."""
        if isinstance(block, bool) or not isinstance(block, int) or block < 0:
            raise ValueError(f"prefix block ids must be whole numbers >= 0, got {block!r}")
        key = (block, size)
        cached = self._blocks.get(key)
        if cached is not None:
            return cached
        head = f"b{self.run_id}k{block}"
        words = len(self._ends) if self._tokenizer is None else len(self._filler_ids)
        offset = random.Random(block).randrange(words - BLOCK_TOKENS)
        if self._tokenizer is None:
            start = self._ends[offset - 1] + 1 if offset else 0
            text = head if size == 1 else head + " " + self._filler[start : self._ends[offset + size - 2]]
        else:
            text = self._tokenized_piece(" " + head, size, offset)
        self._blocks[key] = text
        return text

    def _tokenized_piece(self, head_text: str, tokens: int, offset: int = 0, what: str = "a prompt piece") -> str:
        """`head_text` and filler from `offset`: exactly `tokens` tokens."""
        tok = self._tokenizer
        n = max(0, tokens - len(tok.encode(head_text, add_special_tokens=False).ids))
        for _ in range(16):  # merges across the seam can shift the count by a token or two
            text = head_text + tok.decode(self._filler_ids[offset : offset + n])
            have = self.count(text)
            if have == tokens:
                return text
            n += tokens - have
            if n < 0:
                break
        raise ValueError(f"could not build {what} of exactly {tokens} tokens with this tokenizer")

    def _build_tokenized(self, fingerprint: str, tokens: int) -> str:
        head = self._tokenizer.encode(fingerprint, add_special_tokens=False).ids
        if tokens < len(head):
            raise ValueError(f"prompt tokens ({tokens}) must be >= the fingerprint's {len(head)} tokens")
        return self._tokenized_piece(fingerprint, tokens, what="a prompt")


def _load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # the library raises bare Exceptions for files it cannot read
        raise ValueError(f"--tokenizer: {path} is not a readable tokenizer.json ({error})") from None
