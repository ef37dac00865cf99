"""Shared prefixes on purpose (issue 26, item 3): a trace's prefix block ids (Mooncake hash_ids,
512-token blocks) become prompts whose leading blocks are the same text for the same id, of the
right token length; without them, and by default, every prompt still starts uniquely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity.engine import get_profile
from capacity.measure.config import LoadConfig
from capacity.measure.generator import run_load, trace_arrivals
from capacity.mock.serving import serve_replicas
from capacity.workload import traces
from capacity.workload.prompts import BLOCK_TOKENS, PromptBuilder

MOONCAKE = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces" / "mooncake-synthetic.jsonl"


def words(text: str) -> list[str]:
    return text.split()


def test_identical_block_ids_give_identical_leading_blocks_of_512_tokens_each() -> None:
    builder = PromptBuilder(seed=3)
    a = builder.build(0, 2 * BLOCK_TOKENS + 300, [7, 8, 9])
    b = builder.build(1, 2 * BLOCK_TOKENS + 100, [7, 8, 4])
    assert len(words(a)) == 2 * BLOCK_TOKENS + 300 and len(words(b)) == 2 * BLOCK_TOKENS + 100
    shared = 2 * BLOCK_TOKENS
    assert words(a)[:shared] == words(b)[:shared]
    assert words(a)[shared] != words(b)[shared]  # block 9 is not block 4


def test_a_block_is_the_same_text_in_every_request_that_carries_it_wherever_it_sits() -> None:
    builder = PromptBuilder(seed=3)
    first = words(builder.build(0, BLOCK_TOKENS, [5]))
    later = words(builder.build(9, 2 * BLOCK_TOKENS, [6, 5]))[BLOCK_TOKENS:]
    assert first == later


def test_the_last_block_is_cut_to_what_the_prompt_has_left_and_a_longer_prompt_ends_uniquely() -> None:
    builder = PromptBuilder(seed=3)
    cut = words(builder.build(0, BLOCK_TOKENS + 10, [1, 2]))
    assert len(cut) == BLOCK_TOKENS + 10
    assert cut[BLOCK_TOKENS:] == words(builder.build(1, 2 * BLOCK_TOKENS, [1, 2]))[BLOCK_TOKENS : BLOCK_TOKENS + 10]
    longer_a, longer_b = (words(builder.build(i, BLOCK_TOKENS + 50, [1])) for i in (2, 3))
    assert longer_a[:BLOCK_TOKENS] == longer_b[:BLOCK_TOKENS]
    assert longer_a[BLOCK_TOKENS] != longer_b[BLOCK_TOKENS]  # the request's own remainder
    assert len(longer_a) == BLOCK_TOKENS + 50


def test_two_runs_do_not_share_a_block_by_accident() -> None:
    one, two = PromptBuilder(seed=1), PromptBuilder(seed=2)
    assert words(one.build(0, 64, [0]))[0] != words(two.build(0, 64, [0]))[0]


def test_without_blocks_prompts_are_the_fingerprinted_default() -> None:
    builder = PromptBuilder(seed=1)
    assert builder.build(4, 300, None) == builder.build(4, 300) == builder.build(4, 300, [])
    assert words(builder.build(4, 300))[0] == f"r{builder.run_id}q4"


def test_block_ids_must_be_whole_numbers() -> None:
    with pytest.raises(ValueError, match="block ids"):
        PromptBuilder().build(0, 10, [-1])


def test_with_a_tokenizer_shared_blocks_are_identical_and_every_prompt_has_its_exact_length(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["[UNK]"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 50, trainer)
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    builder = PromptBuilder(tokenizer=path)

    def ids(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False).ids

    a, b = builder.build(0, BLOCK_TOKENS + 200, [3, 4]), builder.build(1, BLOCK_TOKENS + 40, [3, 5])
    assert len(ids(a)) == BLOCK_TOKENS + 200 and len(ids(b)) == BLOCK_TOKENS + 40
    assert ids(a)[:BLOCK_TOKENS] == ids(b)[:BLOCK_TOKENS]
    assert ids(a)[BLOCK_TOKENS : BLOCK_TOKENS + 40] != ids(b)[BLOCK_TOKENS : BLOCK_TOKENS + 40]


def mooncake_like(path: Path) -> Path:
    rows = [
        {"timestamp": 0, "input_length": 1100, "output_length": 3, "hash_ids": [0, 1, 2]},
        {"timestamp": 200, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_the_trace_loader_keeps_hash_ids_in_arrival_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 500, "input_length": 10, "output_length": 1, "hash_ids": [4]}\n'
        '{"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [1, 2]}\n'
    )
    trace = traces.load(path)
    assert trace.block_ids == ((1, 2), (4,))
    assert trace.window(0.25, 1.0).block_ids == ((4,),)


def test_a_trace_without_hash_ids_on_every_line_carries_no_block_ids(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [4]}\n'
        '{"timestamp": 5, "input_length": 20, "output_length": 2}\n'
    )
    assert traces.load(path).block_ids is None


def test_bad_hash_ids_are_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": "abc"}\n')
    with pytest.raises(ValueError, match="line 1: hash_ids"):
        traces.load(path)


def test_arrivals_carry_block_ids_only_when_prefix_reuse_asks(tmp_path: Path) -> None:
    path = mooncake_like(tmp_path / "m.jsonl")
    assert [a[3] for a in trace_arrivals(path)] == [None, None]
    assert [a[3] for a in trace_arrivals(path, prefix_reuse=True)] == [(0, 1, 2), (0, 1)]


def test_prefix_reuse_needs_a_trace_with_block_ids(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--prefix-reuse"):
        LoadConfig(urls=("http://127.0.0.1:1",), rate=1.0, prefix_reuse=True)
    csv = tmp_path / "t.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50.0,5,6\n")
    with pytest.raises(ValueError, match="no prefix block ids"):
        list(trace_arrivals(csv, prefix_reuse=True))


def test_the_shared_mooncake_trace_has_block_ids_for_every_request() -> None:
    if not MOONCAKE.is_file():
        pytest.skip(f"{MOONCAKE} is not here (../shared/traces/)")
    trace = traces.load(MOONCAKE)
    assert trace.block_ids is not None and len(trace.block_ids) == len(trace)
    # a request's blocks cover its prompt: ceil(input_length / 512) of them
    assert all(len(b) == -(-int(p) // BLOCK_TOKENS) for b, p in zip(trace.block_ids[:200], trace.prompt_tokens[:200]))


@pytest.mark.asyncio
async def test_a_prefix_reuse_replay_sends_each_request_at_its_trace_length(tmp_path: Path) -> None:
    path = mooncake_like(tmp_path / "m.jsonl")
    async with serve_replicas(get_profile("8gb-qwen2.5-1.5b"), speedup=20) as [replica]:
        config = LoadConfig(urls=(replica.url,), trace=path, prefix_reuse=True, warmup_s=0, duration_s=5, time_scale=20)
        result = await run_load(config)
    assert sorted(r.prompt_tokens for r in result.records if r.ok) == [600, 1100]
