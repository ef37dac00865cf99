"""The commands the README and the Getting started and Tasks pages tell a user to run, run as the pages show
them, and what they print is what the pages quote."""

from __future__ import annotations

import copy
import csv
import shlex
import subprocess
import sys

import pytest
import yaml

from capacity.__main__ import main
from capacity.measure.envelope import read_envelope
from capacity.measure.recommend import recommend
from capacity.workload.traces import load as load_trace
from components.gateway import objects as gateway
from components.gateway import tls
from contract import startup
from contract.settings import SettingsError
from contract.settings.stack_file import StackFile, load_stack, read_stack
from tests.docs.pages import REPO, blocks, capacity_command, expand, joined, quoted, read


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """A page's `.venv/bin/python -m capacity ...` line, from the clone as the pages run it (piped: the
    tables print at 100 columns)."""
    return subprocess.run(
        [sys.executable, *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_readmes_quick_start_simulates_prods_policy():
    run = _run(capacity_command("README.md", "simulate"))
    assert run.returncode == 0, run.stderr
    assert "stack prod" in run.stdout and "report: out/simulate-prod-qwen25-14b-awq.html" in run.stdout
    header = run.stdout.split("┡")[0]  # the table's header cells, folded over their lines
    assert all(word in header for word in ("SLO %", "GPU-h", "orc", "cost", "scale")), header


def test_the_candidate_policy_compare_prints_what_the_page_quotes():
    page = "tasks/simulate-and-compare.md"
    run = _run(capacity_command(page, "compare"))
    assert run.returncode == 0, run.stderr
    (quoted,) = [b for b in blocks(page) if b.marker and b.marker[0] == "output" and b.language == "text"]
    assert [line for line in quoted.text.splitlines() if line not in run.stdout] == []


def test_the_add_a_model_page_checks_a_profile_offline(capsys):
    argv = capacity_command("tasks/add-a-model.md", "model")
    assert main(argv[3:]) == 0
    assert "trust:" in capsys.readouterr().out


def test_the_laptop_recipe_names_the_gateway_service_ca_client_and_model_the_program_deploys():
    """docs/getting-started/first-request.md: what the recipe port-forwards, trusts and sends exists in
    dev as the program renders it (it needs a cluster, so only its names and its syntax are checked)."""
    (recipe,) = [b for b in blocks("getting-started/first-request.md") if "port-forward" in b.text]
    text = " ".join(joined(recipe.text))
    dev = load_stack("dev", REPO)
    service = gateway.load_balancer_service(dev.gateway, dev.cluster.auto_mode, dev.network.cidr)
    port = service["spec"]["ports"][0]["port"]
    namespace, name = service["metadata"]["namespace"], service["metadata"]["name"]
    assert f"kubectl -n {namespace} port-forward svc/{name} 8443:{port}" in text
    assert f"kubectl -n {dev.gateway.namespace} get secret {tls.CA_SECRET}" in text
    assert f'."{dev.gateway.clients[0].name}"' in text and f'"model": "{dev.models[0].name}"' in text
    assert "export SSL_CERT_FILE" not in text  # it would change what pulumi and kubectl trust


def test_the_pages_candidate_policy_is_the_file_it_shows():
    shown = next(
        b
        for b in blocks("tasks/simulate-and-compare.md")
        if b.language == "yaml" and "trend: {enabled: false}" in b.text
    )
    assert yaml.safe_load(shown.text) == yaml.safe_load((REPO / "docs/examples/candidate-policy.yaml").read_text())
    assert "candidate-policy.yaml" in read("tasks/simulate-and-compare.md")


def test_the_capacity_loop_quotes_the_committed_evidence():
    """Step 2's held-out numbers are the `# Evidence` that `plan --write` put above prod's 14B block
    (the plan takes 8 minutes; tests/test_evidence.py re-checks the evidence against the policy)."""
    evidence = {line.strip().lstrip("#").strip() for line in (REPO / "Pulumi.prod.yaml").read_text().splitlines()}
    (quote,) = quoted("tasks/capacity-loop.md", "test_the_capacity_loop_quotes_the_committed_evidence")
    assert [line for line in quote.splitlines() if line.strip() not in evidence] == []
    assert "held day 5 at 1.07x but the 10x day at 1.99x" in (REPO / "Pulumi.prod.yaml").read_text()
    # the policy the page describes is the committed one
    policy = load_stack("prod", REPO).autoscaling_for("qwen25-14b-awq")
    trend, prompt = policy.triggers.trend, policy.triggers.prompt_tokens
    described = (
        f"{policy.min_replicas} warm replicas at night",
        f"the prompt-token rate's last {trend.range_seconds // 60:.0f} minutes extrapolated {trend.lead_seconds:.0f} s ahead, "
        f"{trend.target_per_replica:.0f} tokens/s",
        f"runs replicas at\n   {prompt.target_per_replica:.0f} tokens/s",
    )
    page = read("tasks/capacity-loop.md")
    assert [d for d in described if " ".join(d.split()) not in " ".join(page.split())] == []


def test_the_days_simulate_block_counts_the_requests_its_trace_holds():
    """The day's simulation takes minutes (marked slow); the one number the page quotes of it, the
    requests of the day it replays, is the trace's own (loaded in about 2 s)."""
    page = "tasks/simulate-and-compare.md"
    (block,) = [b for b in blocks(page) if b.marker == ("needs", "slow")]
    (argv,) = [shlex.split(line) for line in joined(block.text)]
    trace = load_trace(argv[argv.index("--trace") + 1])
    assert f"~{round(len(trace.arrivals) / 1000)}k requests" in read(page)


def test_the_fast_start_pages_figures_and_trust_are_the_ones_the_stack_derives():
    """docs/tasks/fast-starts-and-headroom.md's start-time table: each row's figure and trust level
    are contract/startup.py's, the one home of the figures the simulator starts replicas with."""
    rows = {
        ("node launch", "any"): startup.NODE_PROVISIONING,
        ("image pull", "no SOCI"): startup.PULL_DEFAULT,
        ("image pull", "SOCI, Karpenter AL2023"): startup.PULL_SOCI_AL2023,
        ("image pull", "SOCI, Karpenter Bottlerocket"): startup.PULL_SOCI_BOTTLEROCKET,
        ("image pull", "Auto Mode (its own SOCI)"): startup.PULL_SOCI_AUTO_MODE,
        ("weight load", "vLLM's loader"): startup.WEIGHT_LOAD_DEFAULT,
        ("weight load", "Run:ai streamer"): startup.WEIGHT_LOAD_RUNAI,
        ("engine start", "no shared cache"): startup.ENGINE_INIT,
        ("engine start", "shared compile cache"): startup.ENGINE_INIT_CACHED,
    }
    (table,) = quoted(
        "tasks/fast-starts-and-headroom.md",
        "test_the_fast_start_pages_figures_and_trust_are_the_ones_the_stack_derives",
    )
    shown = {}
    for line in table.splitlines()[2:]:
        step, features, figure, _, trust = (cell.strip() for cell in line.strip("|").split("|"))
        shown[(step, features)] = (figure, trust.split(" (")[0])  # "measured (other instances, ...)"
    expected = {}
    for key, f in rows.items():
        if key[0] == "weight load":
            figure = f"size / {f.low:.3g} GiB/s"
        else:
            figure = f"{f.low:g}-{f.high:g} s" if key[0] != "image pull" else f"{f.low:.1f}-{f.high:.1f} s"
        expected[key] = (figure, f.trust)
    assert shown == expected


def test_the_lab_page_reads_the_committed_envelope_as_it_is():
    """The lab page's numbers of the committed envelope (its recommend run's are checked by
    tests/capacity/cli/test_advice.py): one replica's req/s at concurrency 1, TTFT p95 at 5."""
    with (REPO / "tests/capacity/cli/data/lab-a10g-envelope.csv").open() as f:
        rows = {int(r["concurrency"]): r for r in csv.DictReader(f)}
    said = " ".join(read("getting-started/lab.md").split())
    assert f"at concurrency 1 ({float(rows[1]['successful_rps']):.2f} req/s;" in said
    assert f"concurrency 5 reads {float(rows[5]['ttft_p95_s']):.2f} s)" in said


def test_the_sweep_page_reads_the_calibration_sweep_as_recommend_does():
    rec = recommend(
        read_envelope(REPO.parent / "shared/calibration/a10g-deepseek-r1-14b-awq-concurrency.csv"), slo_p99=30
    )
    said = " ".join(read("tasks/sweep-and-profile.md").split())
    assert (
        f"with `--slo-p99 30` it reads {rec.planning_rps:.2f} req/s per replica, knee at {rec.knee.concurrency}."
        in said
    )


def test_the_retune_pages_window_error_is_what_dev_says():
    dev = read_stack("dev", REPO)
    config = copy.deepcopy(dev.config)
    config["inference-platform:autoscaling"]["qwen25-1p5b"]["triggers"]["queueDepth"]["windowSeconds"] = 20
    with pytest.raises(SettingsError) as refused:
        StackFile(dev.path, config).settings()
    (quote,) = quoted("tasks/retune-a-threshold.md", "test_the_retune_pages_window_error_is_what_dev_says")
    assert quote == str(refused.value).splitlines()[-1].strip()


def test_the_capacity_loops_plan_command_is_the_one_its_evidence_records():
    """Step 2's plan takes minutes (marked slow); the command it shows, expanded as a shell would, is
    the one `plan --write` recorded above prod's 14B block (flags in any order)."""
    page = "tasks/capacity-loop.md"
    words = expand(page, "python -m capacity " + _line(page, "plan").split(" -m capacity ", 1)[1])
    recorded = next(
        line.strip().lstrip("#").strip()
        for line in (REPO / "Pulumi.prod.yaml").read_text().splitlines()
        if "python -m capacity plan --stack prod --model qwen25-14b-awq --trace rates:" in line
    )
    assert _flags(words) == _flags(shlex.split(recorded))


def _line(page: str, command: str) -> str:
    return next(
        line for b in blocks(page) if b.is_shell for line in joined(b.text) if f" -m capacity {command} " in line
    )


def _flags(words: list[str]) -> list[tuple[str, str]]:
    """A command's options as sorted (flag, value) pairs, so their order does not matter."""
    pairs, flag = [], ""
    for word in words[3:]:
        if word.startswith("--"):
            if flag:
                pairs.append((flag, ""))
            flag = word
        else:
            pairs.append((flag, word))
            flag = ""
    return sorted([*pairs, (flag, "")] if flag else pairs)
