"""Scenario files: a published benchmark's setup in, vLLM's benchmark metrics out."""

from pathlib import Path

import pytest
import yaml

from capacity.__main__ import main
from capacity.engine.scenario import ScenarioError, load, parse, run

REPO = Path(__file__).resolve().parents[3]
PUBLIC = REPO / "benchmarks" / "scenarios" / "public"
CSV = REPO.parent / "shared" / "calibration" / "public" / "vllm-public-measurements.csv"

BASE = {
    "gpu": "a10g",
    "model": "Qwen/Qwen2.5-7B-Instruct-AWQ",
    "vllm_version": "0.25.1",
    "engine": {"max_model_len": 4096, "max_num_seqs": 64, "max_num_batched_tokens": 2048},
    "arrival": {"burst": 8},
    "lengths": {"input": 256, "output": 64},
}


def scenario(**changes):
    return parse({**BASE, **changes})


def test_every_public_vllm_row_has_a_scenario_file_that_reproduces_it():
    import csv

    with CSV.open() as f:
        rows = [r for r in csv.DictReader(f) if r["vllm_version"] != "n/a"]
    measured = {(round(v, 2)) for s in map(load, PUBLIC.glob("*.yaml")) for v in s.measured.values()}
    assert all(round(float(r["measured"]), 2) in measured for r in rows)
    assert len(rows) == sum(len(load(p).measured) for p in PUBLIC.glob("*.yaml"))


def test_a_burst_sends_every_request_at_once_and_reports_benchmark_serving_metrics():
    m = run(scenario())
    assert m.completed == 8
    assert m.output_throughput == pytest.approx(8 * 64 / m.duration_s)
    assert m.total_token_throughput == pytest.approx(8 * (256 + 64) / m.duration_s)
    assert m.mean_ttft_ms < m.mean_e2el_ms
    # TPOT = (e2e - TTFT) / (output - 1), averaged over requests
    assert m.mean_tpot_ms == pytest.approx((m.mean_e2el_ms - m.mean_ttft_ms) / 63, rel=1e-9)


def test_offline_batches_have_no_api_server_in_front():
    assert scenario(arrival={"offline": 8}).profile().server_s == 0.0  # LLM.generate: no HTTP, no SSE
    assert scenario(arrival={"burst": 8}).profile().server_s > 0.0


def test_closed_loop_keeps_concurrency_requests_in_flight():
    one, four = (
        run(scenario(arrival={"concurrency": 1, "requests": 8})),
        run(scenario(arrival={"concurrency": 4, "requests": 8})),
    )
    assert one.duration_s > 2 * four.duration_s  # four in flight share each step's weight read


def test_poisson_seeds_average_their_runs():
    m = run(scenario(arrival={"poisson": 2.0, "requests": 20, "seeds": 3}))
    assert m.completed == 20 and m.duration_s > 5


def test_gpu_and_model_may_be_given_by_their_datasheet_and_config_fields():
    fields = {
        "name": "my-gpu",
        "memory_mib": 23028,
        "bandwidth_gb_s": 600,
        "fp16_tflops": 70,
        "memory_class": "gddr",
        "sustained_fp16_tflops": 67.24,
    }
    config = {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    }
    named = run(scenario())
    custom = run(scenario(gpu=fields, model=config, quantization="awq-int4"))
    assert custom.duration_s == pytest.approx(named.duration_s, rel=0.02)  # same physics, biases aside


def test_lengths_may_be_per_request_lists_or_a_file(tmp_path):
    listed = scenario(lengths={"input": [10, 20, 30], "output": [5, 6, 7]}, arrival={"burst": 3})
    assert listed.lengths == [(10, 5), (20, 6), (30, 7)]
    path = tmp_path / "lengths.json"
    path.write_text('{"input_lens": [10, 20, 30], "output_lens": [5, 0, 7]}')
    filed = parse({**BASE, "lengths": {"file": "lengths.json", "skip_empty": True}}, tmp_path)
    assert filed.lengths == [(10, 5), (30, 7)]


def test_a_tensor_parallel_scenario_runs_over_its_interconnect():
    engine = {**BASE["engine"], "tensor_parallel_size": 2}
    two = scenario(engine=engine, interconnect="g5")
    assert two.profile().tensor_parallel_size == 2 and two.profile().cost.comm is not None
    assert run(two).median_tpot_ms < run(scenario()).median_tpot_ms  # half the weights read per GPU


def test_the_vllm_version_picks_the_scheduler():
    assert scenario(vllm_version="0.5.4").profile().scheduler == "v0"
    assert scenario().profile().scheduler == "v1"


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"gpu": "a10x"}, "gpu: unknown GPU 'a10x'"),
        ({"gpu": {"memory_mib": 100}}, "gpu.bandwidth_gb_s: required"),
        ({"model": "nope/nope"}, "model: unknown checkpoint"),
        ({"model": {"hidden_size": 1}}, "model.intermediate_size: required"),
        ({"model": {"model_type": "llama", "num_experts": 4}}, "model.num_experts: unknown config.json field"),
        ({"quantization": "int3"}, "quantization: unknown 'int3'"),
        ({"vllm_version": "latest"}, "vllm_version:"),
        ({"engine": {"max_num_seqz": 4}}, "engine.max_num_seqz: unknown flag"),
        ({"arrival": {"burst": 4, "poisson": 1}}, "arrival: exactly one of"),
        ({"arrival": {"burst": 0}}, "arrival.burst: must be > 0"),
        ({"lengths": {"input": 5}}, "lengths.output: required"),
        ({"lengths": {"input": "many", "output": 5}}, "lengths.input:"),
        ({"colour": "blue"}, "colour: unknown key"),
        ({"engine": {"tensor_parallel_size": 2}}, "interconnect: required with engine.tensor_parallel_size > 1"),
        (
            {"engine": {"tensor_parallel_size": 3}, "interconnect": "g5"},
            "engine.tensor_parallel_size: qwen2.5-7b: num_attention_heads (28) must be divisible",
        ),
        ({"engine": {"tensor_parallel_size": 2}, "interconnect": "g99"}, "interconnect: unknown instance family 'g99'"),
    ],
)
def test_bad_scenario_input_names_the_key(changes, key):
    with pytest.raises(ScenarioError, match=key.replace("(", r"\(").replace(")", r"\)")):
        scenario(**changes)


def test_model_command_prints_the_scenario_metrics_as_json(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, "measured": {"benchmark_duration_s": 1.0}}))
    assert main(["model", "--scenario", str(path), "--json"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    assert out["scheduler"] == "v1" and out["completed"] == 8
    assert out["measured"]["benchmark_duration_s"]["predicted"] == pytest.approx(out["duration_s"])


def test_model_command_refuses_a_bad_scenario_in_one_line(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({**BASE, "gpu": "a10x"}))
    assert main(["model", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gpu: unknown GPU 'a10x'" in err
