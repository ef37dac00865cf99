"""One mock vLLM replica: the engine model driven in real time, its requests and its vLLM metrics.

Time: the engine runs in model seconds; with `speedup` X one model second passes in 1/X
wall seconds. Everything the replica reports (histograms, usage) is in model seconds, so a
sped-up replica looks like the real GPU it models; only wall-clock rates are X times higher.

Streaming follows vLLM's output processor: a stream gets an output per engine step that gave
the request a token (`stream_interval` tokens, default 1: vLLM's
`OutputProcessor(stream_interval=1)`, whose `RequestState.make_request_output` sends the first
token, then every `stream_interval` tokens, and the last), at any speedup. Each stream holds one
slot that the engine fills and its writer empties, and progress that comes before the writer took
the last is merged, as vLLM's `RequestOutputCollector.put` merges outputs when the producer gets
ahead of the consumer.

Finish reasons and `vllm:request_success_total` follow vLLM: a request with `max_tokens` runs to
it ("length": the mock never samples EOS, as with `ignore_eos`); without it vLLM allows the rest
of the context (`get_max_tokens`: max_model_len - prompt) and the mock stops after
DEFAULT_MAX_TOKENS as at an EOS ("stop"), or at the context ("length") if that comes first. A
client that disconnects is aborted (`OutputProcessor.abort_requests`), which records no finished
request: no `request_success`, no per-request histogram. Prompt tokens are counted with the
model's tokenizer when one is at hand (`tokenizer=`), else as whitespace words. Faults
(`capacity.mock.faults`) are reported as vLLM reports them.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

from capacity.engine import EngineProfile, Finished, ReplicaEngine, Request
from capacity.mock.faults import Faults
from capacity.mock.metrics import VllmMetrics
from capacity.workload.prompts import TokenCounter

DEFAULT_MAX_TOKENS = 256  # where a request without max_tokens stops, as if it sampled EOS


@dataclass
class PendingRequest:
    request: Request
    stream: bool
    done: asyncio.Future[Finished]
    finish_reason: str  # "length", "stop" or "error" (an injected fault), once the engine finishes it
    max_tokens: int  # the effective max_tokens (vLLM's sampling_params.max_tokens)
    generated: int = 0
    first_token_time: float = -1.0
    progress: asyncio.Event = field(default_factory=asyncio.Event)
    lagged: bool = False  # progress came again before the writer took the last: merge (the collector's put)

    def advance_to(self, generated: int) -> None:
        """The engine's progress, handed to the stream's writer like vLLM's RequestOutputCollector.put."""
        self.generated = generated
        if self.progress.is_set():
            self.lagged = True
        self.progress.set()

    async def next_output(self) -> tuple[int, bool]:
        """Wait for progress and take it, like RequestOutputCollector.get: the tokens generated so
        far, and whether the engine got ahead of the writer (then its outputs merge into one)."""
        await self.progress.wait()
        self.progress.clear()
        lagged, self.lagged = self.lagged, False
        return self.generated, lagged


def emission_points(sent: int, generated: int, target: int, interval: int) -> list[int]:
    """Token counts in (sent, generated] at which vLLM's output processor emits an output:
    the first token, then every `interval` tokens, and the last (RequestState.make_request_output)."""
    points = list(range(1 if sent == 0 else sent + interval, generated + 1, interval))
    if generated == target and (not points or points[-1] != target):
        points.append(target)
    return points


class MockReplica:
    """One replica: an engine model driven in real time, plus its vLLM metrics."""

    def __init__(
        self,
        profile: EngineProfile,
        *,
        speedup: float = 1.0,
        served_model_name: str | None = None,
        stream_interval: int = 1,
        faults: Faults = Faults(),
        tokenizer: str | None = None,
        seed: int = 0,
    ) -> None:
        if speedup <= 0:
            raise ValueError(f"speedup must be > 0, got {speedup}")
        if stream_interval < 1:
            raise ValueError(f"--stream-interval must be >= 1 token, got {stream_interval}")
        self.profile = profile
        self.speedup = speedup
        self.model_name = served_model_name or profile.served_model_name
        self.stream_interval = stream_interval
        self.faults = faults
        self.tokens = TokenCounter(tokenizer)
        self._rng = random.Random(seed)
        self.engine = ReplicaEngine(profile, record_stats=True)
        self.metrics = VllmMetrics(self.model_name, profile.max_model_len)
        self.metrics.bind_gauges(self._running, self._waiting, self._kv)
        self._pending: dict[int, PendingRequest] = {}
        self._streams: dict[int, PendingRequest] = {}
        self._ids = 0
        self._t0 = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    # --- clock -------------------------------------------------------------------------
    def model_now(self) -> float:
        return (time.monotonic() - self._t0) * self.speedup

    def wall_seconds(self, model_seconds: float) -> float:
        return model_seconds / self.speedup

    # --- engine driving --------------------------------------------------------------------
    def submit(self, prompt_tokens: int, max_tokens: int | None, *, ignore_eos: bool, stream: bool) -> PendingRequest:
        """Start a request with vLLM's sampling params; it generates until its max_tokens (or the
        mock's EOS) and finishes, unless a fault strikes first. Raises ValueError for requests the
        engine model cannot hold."""
        effective_max = max_tokens if max_tokens is not None else self.profile.max_model_len - prompt_tokens
        if max_tokens is not None or ignore_eos:
            output_tokens, finish_reason = effective_max, "length"
        else:  # the mock's EOS comes after DEFAULT_MAX_TOKENS, unless the context ends first
            output_tokens = min(DEFAULT_MAX_TOKENS, effective_max)
            finish_reason = "stop" if output_tokens == DEFAULT_MAX_TOKENS else "length"
        now = self.model_now()
        self._catch_up(now)
        if self.faults.mid_stream_error and self._rng.random() < self.faults.mid_stream_error:
            output_tokens = self._rng.randint(1, max(1, output_tokens - 1))  # fails after at least one token
            finish_reason = "error"
        self._ids += 1
        request = Request(self._ids, now, prompt_tokens, output_tokens)
        self.engine.submit(request, now)
        pending = PendingRequest(
            request, stream, asyncio.get_running_loop().create_future(), finish_reason, effective_max
        )
        self._pending[request.id] = pending
        if stream:
            self._streams[request.id] = pending
        self._schedule()
        return pending

    def catch_up(self) -> None:
        """Advance the engine to now: its metrics then describe this moment (a scrape)."""
        self._catch_up(self.model_now())

    def _catch_up(self, now: float) -> None:
        finished = self.engine.advance(now)
        m = self.metrics
        for request, t in self.engine.first_tokens():
            m.ttft.observe(t - request.arrival)
            # vLLM looks the prefix up when it first schedules the request; the mock counts it with
            # the request's first token (at most one prefill later), with no hits: no prefix cache.
            m.record_prefix_lookup(request.prompt_tokens)
            pending = self._pending.get(request.id)
            if pending is not None:
                pending.first_token_time = t
        stats = self.engine.drain_stats()
        if stats.prompt_tokens:
            m.prompt_tokens.inc(stats.prompt_tokens)
        if stats.generation_tokens:
            m.generation_tokens.inc(stats.generation_tokens)
        if stats.preemptions:
            m.preemptions.inc(stats.preemptions)
        for seconds, count in stats.inter_token_latencies:
            m.inter_token_latency.observe(seconds, count)
        for tokens, count in stats.step_tokens:
            m.iteration_tokens.observe(tokens, count)
        stepped = stats.generation_tokens > 0  # the engine produced tokens since the last catch-up
        for f in finished:
            pending = self._pending.pop(f.request.id, None)
            if pending is None:
                continue
            self._observe_finished(f, pending)
            self._streams.pop(f.request.id, None)
            if not pending.done.done():
                pending.done.set_result(f)
            pending.advance_to(f.request.output_tokens)
        # Progress moves only when tokens were produced: most catch-ups come from a submit
        # between two steps, and scanning every stream then cost ~0.1 ms per request.
        if self._streams and stepped:
            progress = self.engine.running_progress()
            for rid, pending in self._streams.items():
                n = progress.get(rid, 0)
                if n > pending.generated:
                    pending.advance_to(n)

    def abort(self, pending: PendingRequest) -> None:
        """The client went away: free the request's slot and KV, as vLLM aborts it."""
        rid = pending.request.id
        if self._pending.pop(rid, None) is None:
            return
        self._streams.pop(rid, None)
        self.catch_up()
        self.engine.abort(rid)  # like vLLM's abort_requests: no finished-request stats
        self._schedule()

    def _observe_finished(self, f: Finished, pending: PendingRequest) -> None:
        """vLLM's per finished request metrics (PrometheusStatLogger.record, finished_requests)."""
        m = self.metrics
        r = f.request
        m.request_success[pending.finish_reason].inc()
        m.params_n.observe(1)
        m.max_num_generation_tokens.observe(r.output_tokens)
        m.params_max_tokens.observe(pending.max_tokens)
        m.e2e_latency.observe(f.finish_time - r.arrival)
        m.queue_time.observe(f.scheduled_time - r.arrival)
        m.inference_time.observe(f.finish_time - f.scheduled_time)
        m.prefill_time.observe(f.first_token_time - f.scheduled_time)
        m.decode_time.observe(f.finish_time - f.first_token_time)
        # vLLM's FinishedRequestStats.mean_time_per_output_token: 0 for a single token
        tpot = (f.finish_time - f.first_token_time) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        m.request_time_per_output_token.observe(tpot)
        m.request_prompt_tokens.observe(r.prompt_tokens)
        m.request_generation_tokens.observe(r.output_tokens)

    def _schedule(self) -> None:
        """Arm one timer for the next engine event, or the next step while streams want its tokens."""
        loop = asyncio.get_running_loop()
        nxt = self.engine.next_step_time() if self._streams else self.engine.next_event_time()
        at = float("inf") if nxt is None else self._t0 + self.wall_seconds(nxt)
        if at == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = at
        if at != float("inf"):
            # loop.time() and time.monotonic() share a clock on every asyncio loop we use
            self._timer = loop.call_at(max(at, loop.time()) + 1e-5, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = float("inf")
        self.catch_up()
        self._schedule()

    def _running(self) -> float:
        return self.engine.num_running

    def _waiting(self) -> float:
        return self.engine.num_waiting

    def _kv(self) -> float:
        return self.engine.kv_usage

    def close(self) -> None:
        """Stop the clock and release every waiter: the server is going away."""
        if self._timer is not None:
            self._timer.cancel()
        for pending in self._pending.values():
            if not pending.done.done():
                pending.done.cancel()
            pending.progress.set()
