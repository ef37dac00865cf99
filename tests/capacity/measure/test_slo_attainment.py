"""A measured level is judged per request against the stack's SLO, as the simulator judges it
(`contract.settings.autoscaling.Slo.met_by`: TTFT and TPOT after the first token)."""

from capacity.measure.results import RequestRecord, slo_attainment
from contract.settings.autoscaling import Slo

SLO = Slo(ttft_p95_seconds=1.0, tpot_p95_seconds=0.1)


def record(
    ttft: float | None, latency: float | None, tokens: int, ok: bool = True, phase: str = "measure"
) -> RequestRecord:
    return RequestRecord(0, "u", phase, 0.0, ok=ok, ttft_s=ttft, latency_s=latency, output_tokens=tokens)


def test_a_request_meets_the_slo_on_ttft_and_time_per_output_token():
    assert SLO.met_by(0.5, 0.5 + 99 * 0.1, 100)  # TPOT exactly at the target
    assert not SLO.met_by(0.5, 0.5 + 99 * 0.11, 100)  # decode too slow
    assert not SLO.met_by(1.5, 2.0, 5)  # first token too late


def test_a_one_token_answer_is_judged_on_ttft_alone():
    assert SLO.met_by(0.9, 30.0, 1)


def test_attainment_counts_failed_requests_as_misses_and_skips_warmup():
    records = [
        record(0.2, 2.0, 20),
        record(0.2, 2.0, 20, ok=False),
        record(3.0, 4.0, 20),
        record(0.1, 0.5, 20, phase="warmup"),
    ]
    assert slo_attainment(records, SLO) == 1 / 3


def test_without_streamed_ttfts_there_is_nothing_to_judge():
    assert slo_attainment([record(None, 2.0, 20)], SLO) is None
