"""Trace loading, synthetic generation and rescaling."""

import json
import re
import warnings
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from capacity.workload import traces

AZURE = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces" / "azure-llm-2023-conv.csv"


def test_azure_csv_rows_become_sorted_arrivals_from_zero(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:50.5000000,20,2\n2023-11-16 18:15:46.0000000,10,1\n"
    )
    trace = traces.load(path)
    assert trace.arrivals.tolist() == [0.0, 4.5]
    assert trace.prompt_tokens.tolist() == [10, 20]
    assert trace.output_tokens.tolist() == [1, 2]


def test_azure_csv_without_token_columns_names_the_missing_columns(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,Tokens\n2023-11-16 18:15:50,1\n")
    with pytest.raises(ValueError, match=r"missing columns \['ContextTokens', 'GeneratedTokens'\]"):
        traces.load(path)


def test_jsonl_accepts_seconds_and_iso_timestamps(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps({"timestamp": "2024-01-01T00:00:02", "input_length": 5, "output_length": 6})
        + "\n"
        + json.dumps({"timestamp": "2024-01-01T00:00:00", "input_length": 7, "output_length": 8})
        + "\n"
    )
    trace = traces.load(path)
    assert trace.arrivals.tolist() == [0.0, 2.0]
    assert trace.prompt_tokens.tolist() == [7, 5]


def test_a_2024_azure_trace_with_utc_offsets_loads_in_utc_without_warnings(tmp_path):
    # AzureLLMInferenceTrace_*_1week.csv (2024) writes `2024-05-10 00:00:00.009930+00:00`.
    path = tmp_path / "AzureLLMInferenceTrace_code_1week.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2024-05-10 00:00:00.009930+00:00,100,10\n"
        "2024-05-10 02:00:01.509930+02:00,200,20\n"  # 1.5 s later, written in another zone
        "2024-05-10 00:00:03+00:00,300,30\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = traces.load(path)
    assert trace.arrivals.tolist() == pytest.approx([0.0, 1.5, 2.99007])
    assert trace.start == datetime(2024, 5, 10, 0, 0, 0, 9930)


BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"  # HPMLL/BurstGPT data/*.csv


def test_a_burstgpt_trace_loads_with_its_timestamps_as_seconds(tmp_path):
    path = tmp_path / "BurstGPT_without_fails_1.csv"
    path.write_text(BURSTGPT_HEADER + "5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,230,1317,API log\n")
    trace = traces.load(path)
    assert trace.arrivals.tolist() == [0.0, 40.0]
    assert trace.prompt_tokens.tolist() == [472, 1087] and trace.output_tokens.tolist() == [18, 230]


def test_a_failed_burstgpt_request_is_named_with_the_file_that_leaves_failures_out(tmp_path):
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text(BURSTGPT_HEADER + "5,ChatGPT,472,18,490,Conversation log\n9,ChatGPT,300,0,300,Conversation log\n")
    with pytest.raises(
        ValueError,
        match=r"line 3: Response tokens must be >= 1 token .*got 0 \(a failed request in "
        r"BurstGPT: use its BurstGPT_without_fails_\*\.csv\)",
    ):
        traces.load(path)


def test_a_mooncake_trace_timestamp_is_milliseconds_since_the_first_request(tmp_path):
    # The two samples of kvcache-ai/Mooncake's README "Open Source Trace"; NVIDIA Dynamo's
    # benchmarks/data_generator/README.md: "The arrival time (in milliseconds) of the request".
    path = tmp_path / "mooncake_trace.jsonl"
    path.write_text(
        '{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 2353]}\n'
        '{"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [46, 47, 2366]}\n'
    )
    trace = traces.load(path)
    assert trace.arrivals.tolist() == pytest.approx([0.0, 3.053])
    assert trace.prompt_tokens.tolist() == [6955, 6472] and trace.output_tokens.tolist() == [52, 26]


def test_jsonl_offset_s_is_seconds(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"offset_s": 0.5, "prompt_tokens": 5, "output_tokens": 6}\n{"offset_s": 2, "prompt_tokens": 7, "output_tokens": 8}\n'
    )
    assert traces.load(path).arrivals.tolist() == [0.0, 1.5]


def test_a_timestamp_that_is_not_a_number_says_milliseconds(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": NaN, "input_length": 5, "output_length": 6}\n')
    with pytest.raises(ValueError, match="line 1: timestamp must be a number of milliseconds, got nan"):
        traces.load(path)


def test_jsonl_missing_key_names_line_and_key(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 1, "input_length": 5}\n')
    with pytest.raises(ValueError, match="line 1: missing key 'output_length'"):
        traces.load(path)


def test_real_azure_conversation_trace_loads():
    if not AZURE.is_file():
        pytest.skip(f"shared trace not present at {AZURE}")
    trace = traces.load(AZURE)
    assert len(trace) > 19_000
    assert 3500 < trace.duration < 3700


def test_synthetic_step_has_the_peak_rate_inside_the_step():
    trace = traces.load("synthetic:step:base=1,peak=10,at=1000,length=1000,duration=3000,seed=3")
    inside = np.sum((trace.arrivals >= 1000) & (trace.arrivals < 2000))
    outside = len(trace) - inside
    assert 9000 < inside < 11000
    assert 1700 < outside < 2300


def test_synthetic_is_reproducible_for_a_seed():
    a = traces.load("synthetic:bursty:seed=5,duration=600")
    b = traces.load("synthetic:bursty:seed=5,duration=600")
    assert np.array_equal(a.arrivals, b.arrivals)


def test_synthetic_ramp_rate_grows_over_time():
    trace = traces.load("synthetic:ramp:start=1,end=9,duration=2000")
    assert np.sum(trace.arrivals >= 1000) > 2 * np.sum(trace.arrivals < 1000)


def test_synthetic_diurnal_peaks_at_half_period():
    trace = traces.load("synthetic:diurnal:mean=2,amplitude=0.9,period=4000,duration=4000")
    middle = np.sum((trace.arrivals >= 1500) & (trace.arrivals < 2500))
    edge = np.sum(trace.arrivals < 500) + np.sum(trace.arrivals >= 3500)
    assert middle > 4 * edge


def test_synthetic_lognormal_lengths_keep_the_mean():
    trace = traces.load("synthetic:step:base=20,peak=20,duration=2000,prompt=500,sigma=0.8")
    assert abs(trace.prompt_tokens.mean() - 500) < 25


def test_synthetic_unknown_parameter_is_named():
    with pytest.raises(ValueError, match="unknown parameter 'peek'"):
        traces.load("synthetic:step:peek=3")


def test_synthetic_unknown_kind_lists_the_kinds():
    with pytest.raises(ValueError, match="KIND in \\['bursty', 'diurnal', 'ramp', 'step'\\]"):
        traces.load("synthetic:sawtooth")


def test_time_scale_stretches_arrivals():
    trace = traces.load("synthetic:step:duration=100")
    assert traces.time_scale(trace, 2.0).duration == pytest.approx(2 * trace.duration)


def test_rate_scale_multiplies_requests_over_the_same_duration():
    trace = traces.load("synthetic:step:base=5,peak=5,duration=1000")
    scaled = traces.rate_scale(trace, 2.5)
    assert abs(len(scaled) / len(trace) - 2.5) < 0.05
    assert scaled.duration <= trace.duration


def test_rate_scale_below_one_thins_the_trace():
    trace = traces.load("synthetic:step:base=5,peak=5,duration=1000")
    assert abs(len(traces.rate_scale(trace, 0.5)) / len(trace) - 0.5) < 0.05


def test_missing_trace_file_is_reported(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        traces.load(tmp_path / "none.csv")


def test_offset_csv_and_jsonl_of_the_load_generator_load_as_the_same_trace(tmp_path):
    csv_path, jsonl_path = tmp_path / "t.csv", tmp_path / "t.jsonl"
    csv_path.write_text("offset_s,prompt_tokens,output_tokens\n1.5,20,2\n0.5,10,1\n")
    jsonl_path.write_text(
        '{"offset_s": 1.5, "prompt_tokens": 20, "output_tokens": 2}\n'
        '{"offset_s": 0.5, "prompt_tokens": 10, "output_tokens": 1}\n'
    )
    for path in (csv_path, jsonl_path):
        trace = traces.load(path)
        assert trace.arrivals.tolist() == [0.0, 1.0]
        assert trace.prompt_tokens.tolist() == [10, 20] and trace.output_tokens.tolist() == [1, 2]


def test_csv_errors_name_the_physical_line_of_the_file(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("offset_s,prompt_tokens,output_tokens\n0,10,5\n0.5,10,5\n1,10,2.5\n")
    with pytest.raises(ValueError, match=r"t\.csv: line 4: output_tokens must be a whole number of tokens, got '2\.5'"):
        traces.load(path)


def test_an_offset_that_is_not_a_number_names_its_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("offset_s,prompt_tokens,output_tokens\nsoon,10,5\n")
    with pytest.raises(ValueError, match="line 2: offset_s must be a number of seconds, got 'soon'"):
        traces.load(path)


def test_jsonl_tokens_must_be_whole_numbers_not_booleans_or_fractions(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"offset_s": 0, "prompt_tokens": 5, "output_tokens": 6}\n\n'
        '{"offset_s": 1, "prompt_tokens": true, "output_tokens": 6}\n'
    )
    with pytest.raises(ValueError, match="line 3: prompt_tokens must be a whole number of tokens, got True"):
        traces.load(path)


def test_jsonl_with_only_blank_lines_has_no_requests(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("\n\n")
    with pytest.raises(ValueError, match="no requests in the trace"):
        traces.load(path)


def test_a_jsonl_timestamp_that_is_neither_seconds_nor_iso_is_named(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": "noon", "input_length": 5, "output_length": 6}\n')
    with pytest.raises(ValueError, match="line 1: timestamp 'noon' is neither milliseconds nor an ISO-8601 date-time"):
        traces.load(path)


# --- FILE@FROM:TO: one window of a long trace ---------------------------------------------


def _hourly(tmp_path) -> Path:
    """One request at the start of each of 4 hours, from 2024-05-10 00:00 UTC."""
    path = tmp_path / "week.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        + "".join(f"2024-05-10 {h:02d}:00:00+00:00,{100 + h},10\n" for h in range(4))
    )
    return path


def test_a_window_keeps_its_requests_rebased_to_its_start_and_moves_the_wall_clock(tmp_path):
    trace = traces.load(f"{_hourly(tmp_path)}@1h:3h")
    assert trace.arrivals.tolist() == [0.0, 3600.0] and trace.prompt_tokens.tolist() == [101, 102]
    assert trace.start == datetime(2024, 5, 10, 1, 0) and trace.name == "week@1h:3h"


def test_a_window_may_leave_out_either_end(tmp_path):
    path = _hourly(tmp_path)
    assert traces.load(f"{path}@150m:").prompt_tokens.tolist() == [103]
    assert traces.load(f"{path}@:7200").prompt_tokens.tolist() == [100, 101]


def test_a_file_whose_name_has_an_at_sign_is_that_file(tmp_path):
    path = tmp_path / "t@1:2.csv"
    path.write_text(_hourly(tmp_path).read_text())
    assert len(traces.load(path)) == 4


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ("@1x:2h", "window bound '1x' is not a duration (e.g. 3600, 90m, 2h, 1d)"),
        ("@2h:1h", "the window must end after it starts"),
        ("@5h:6h", "no requests in that window (the trace spans 10800 s)"),
    ],
)
def test_a_bad_window_is_one_line_naming_it(tmp_path, window, message):
    source = f"{_hourly(tmp_path)}{window}"
    with pytest.raises(ValueError, match=re.escape(f"trace {source!r}: {message}")):
        traces.load(source)


def _with_blocks() -> traces.Trace:
    n = 40
    return traces.Trace(
        "blocks",
        np.arange(n, dtype=np.float64),
        np.full(n, 600, dtype=np.int64),
        np.full(n, 8, dtype=np.int64),
        None,
        tuple((i % 3, 100 + i) for i in range(n)),
    )


def test_rate_scaling_keeps_each_copy_s_prefix_block_ids():
    trace = _with_blocks()
    scaled = traces.rate_scale(trace, 2.5, seed=1)
    assert scaled.block_ids is not None and len(scaled.block_ids) == len(scaled)
    # a copy is its request again: same prompt, same prefix
    assert set(scaled.block_ids) == set(trace.block_ids)


def test_time_scaling_keeps_the_prefix_block_ids():
    assert traces.time_scale(_with_blocks(), 2.0).block_ids == _with_blocks().block_ids


def test_a_window_carries_the_requests_before_it_as_history_unless_told_not_to():
    trace = traces.Trace("t", np.arange(0.0, 100.0, 10.0), np.full(10, 5), np.full(10, 1))
    later = trace.window(50.0, 100.0)
    assert later.history is not None and later.history.arrivals.tolist() == [-50.0, -40.0, -30.0, -20.0, -10.0]
    assert trace.window(50.0, 100.0, history=False).history is None
