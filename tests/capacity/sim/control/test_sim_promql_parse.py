"""The PromQL subset the simulator reads: every query the platform renders parses back to its
Query, the reference designs' queries parse, and anything outside the subset is refused by name."""

import pytest

from capacity.sim.control.promql_parse import duration_seconds, parse, parse_selecting
from contract.settings.autoscaling import ModelAutoscaling
from contract.signals import Query, Scope, Trend, Vllm
from contract.triggers import TRIGGERS

SCOPE = Scope("qwen25-14b-awq", "inference")


def test_every_trigger_query_the_platform_renders_parses_back_to_its_query():
    policy = ModelAutoscaling.model_validate({"triggers": {"ttft": {"enabled": True}}})
    signals = [t.signal(policy) for t in TRIGGERS if t.signal(policy) is not None]
    assert len(signals) == len(TRIGGERS) - 1  # all but cron
    for signal in signals:
        assert parse(signal.promql(SCOPE)) == signal


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("sum(avg_over_time(vllm:num_requests_waiting[1m]))", Query(Vllm.REQUESTS_WAITING, "sum_avg_over_time", 60)),
        ("sum(vllm:kv_cache_usage_perc)", Query(Vllm.KV_CACHE_USAGE, "sum")),
        ("max(vllm:kv_cache_usage_perc)", Query(Vllm.KV_CACHE_USAGE, "sum", aggregation="max")),
        ("avg(vllm:kv_cache_usage_perc)", Query(Vllm.KV_CACHE_USAGE, "sum", aggregation="avg")),
        (
            "min by (model_name) (vllm:kv_cache_usage_perc)",
            Query(Vllm.KV_CACHE_USAGE, "sum", aggregation="min", by=("model_name",)),
        ),
        (
            "sum(max_over_time(vllm:num_requests_waiting[2m])) by (namespace)",
            Query(Vllm.REQUESTS_WAITING, "sum_max_over_time", 120, by=("namespace",)),
        ),
        (
            "sum(rate(vllm:prompt_tokens_total[5m] offset 23h55m))",
            Query(Vllm.PROMPT_TOKENS, "sum_rate", 300, offset_seconds=86100),
        ),
        (
            "predict_linear((sum(rate(vllm:prompt_tokens_total[1m])))[10m:1m], 300)",
            Query(Vllm.PROMPT_TOKENS, "sum_rate", 60, trend=Trend(600, 60, 300)),
        ),
        (
            "predict_linear((sum(rate(vllm:prompt_tokens_total[1m])))[10m : 30s], 120)",
            Query(Vllm.PROMPT_TOKENS, "sum_rate", 60, trend=Trend(600, 30, 120)),
        ),
        (
            "sum(rate(vllm:e2e_request_latency_seconds_count[1h30m]))",
            Query(Vllm.E2E_LATENCY + "_count", "sum_rate", 5400),
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
            Query(Vllm.E2E_LATENCY, "quantile", 300, 0.99, zero_when_empty=False),
        ),
    ],
)
def test_queries_within_the_subset_parse(text, query):
    assert parse(text) == query


def test_label_matchers_are_accepted_and_the_rendering_round_trips():
    query = parse('max(vllm:kv_cache_usage_perc{namespace="inference",model_name="qwen25-14b-awq"})')
    assert query.promql(SCOPE) == 'max(vllm:kv_cache_usage_perc{namespace="inference",model_name="qwen25-14b-awq"})'


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("count(vllm:num_requests_waiting)", "'count'"),
        ("sum(vllm:num_requests_waiting) / 2", "'/'"),
        ("vllm:num_requests_waiting", "without an aggregation"),
        ('sum(vllm:num_requests_waiting{model_name=~"q.*"})', "'model_name=~'"),
        ("sum(avg_over_time(vllm:num_requests_waiting[5m:1m]))", "'subquery'"),
        ("sum(avg_over_time(vllm:num_requests_waiting[5m] offset 1m))", "'offset inside avg_over_time'"),
        ("sum(irate(vllm:num_requests_waiting[1m]))", "'irate'"),
        ("sum without (pod) (vllm:num_requests_waiting)", "'without'"),
        ("histogram_quantile(0.9, sum(rate(vllm:e2e_request_latency_seconds_bucket[1m])))", "without by (le)"),
        ("topk(1, vllm:kv_cache_usage_perc)", "'topk'"),
    ],
)
def test_a_construct_outside_the_subset_is_named_in_one_line(text, construct):
    with pytest.raises(ValueError, match="unsupported PromQL construct") as error:
        parse(text)
    assert construct in str(error.value) and "\n" not in str(error.value)


def test_durations_follow_prometheus_units():
    assert [duration_seconds(d) for d in ("90s", "5m", "1h30m", "1d")] == [90, 300, 5400, 86400]


def test_a_selectors_equality_matchers_come_back_beside_the_query():
    query, matchers = parse_selecting(
        "sum(avg_over_time(vllm:num_requests_waiting{namespace=\"inference\",model_name='m'}[1m]))"
    )
    assert query == parse("sum(avg_over_time(vllm:num_requests_waiting[1m]))")
    assert matchers == (("namespace", "inference"), ("model_name", "m"))
