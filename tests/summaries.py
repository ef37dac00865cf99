"""Summaries as tests of the searches' rules need them: every field set, the ones a rule reads given."""

from dataclasses import replace

from capacity.planning.run import CombinedSummary, JudgedSlo, RunSummary

RUN = RunSummary(
    requests=100,
    slo_attainment=1.0,
    infeasible_requests=0,
    ttft_p95_s=None,
    tpot_p95_s=None,
    e2e_p99_s=None,
    gpu_hours=1.0,
    spot_gpu_hours=1.0,
    on_demand_gpu_hours=0.0,
    cost_usd=1.0,
    oracle_gpu_hours=None,
    oracle_ratio=None,
    scale_events=0,
    initial_replicas=1,
    max_replicas_used=1,
    failed_requests=0,
    rejected_requests=0,
    unfinished_requests=0,
    slo=JudgedSlo(1.0, 0.1, None, 0.95),
    simulated_s=60.0,
)
SEARCHED = CombinedSummary(
    slo_attainment=1.0,
    infeasible_share=0.0,
    rejected_share=0.0,
    gpu_hours=1.0,
    cost_usd=1.0,
    scale_events=0,
    max_replicas_used=1,
    usd_per_million_output_tokens=None,
)


def run(**fields) -> RunSummary:
    """One run's summary with `fields` set."""
    return replace(RUN, **fields)


def searched(**fields) -> CombinedSummary:
    """A candidate's search summary with `fields` set."""
    return replace(SEARCHED, **fields)
