"""A vLLM replica under continuous batching, as an event-driven model (pure Python, no I/O).

What is modelled, following vLLM's schedulers (the profile's `scheduler`, from its vLLM version):
- V1 (vLLM >= 0.7; vllm/v1/core/sched/scheduler.py `Scheduler.schedule`, read at
  vllm-project/vllm@00024d31): every step first schedules the RUNNING requests in order, one
  token per decoding request, a prefill chunk per request still prefilling, from the token
  budget (`max_num_batched_tokens`); each needs `KVCacheManager.allocate_slots` to succeed, and
  when it fails the scheduler preempts the last running request (`self.running.pop()`: the most
  recently admitted) and retries. Only if that step preempted nobody (`if not preempted_reqs`)
  does it admit WAITING requests FCFS, each while `allocate_slots` succeeds for its chunk alone
  (vllm/v1/core/kv_cache_manager.py `allocate_slots`, read at vllm-project/vllm@003df296: free
  blocks must cover the chunk plus `watermark_blocks` when other requests are scheduled; the
  KVCacheManager's watermark defaults to 0.0). A preempted request goes back to the head of the
  queue with its blocks freed (recompute); with prefix caching its freed full blocks keep their
  hashes in the free queue (FIFO: blocks freed earlier are evicted first) and, on resumption,
  `get_computed_blocks` finds those not yet evicted, so only the rest is recomputed.
- V0 (vLLM < 0.7, prefill-first; vllm/core/scheduler.py `_schedule_default`): a step runs either
  prefills only (whole prompts of waiting requests, FCFS, while their tokens fit
  `max_num_batched_tokens` and the block manager's `can_allocate` leaves the 1% watermark free)
  or, when none can be admitted, a decode step of every running request; a decode step that
  cannot append a slot preempts the newest running request (recompute; no prefix caching).
- at most `max_num_seqs` requests run at once;
- a step costs what the profile's `capacity.engine.roofline.StepCost` says for its batch;
- the API server's per-request cost (`profile.server_s`: tokenize, detokenize, HTTP/SSE) is
  serialized in front of the engine: a burst reaches the scheduler one request per `server_s`;
  in V0 the server and the engine share one asyncio loop (AsyncLLMEngine), so that time also
  stalls the engine: a burst of 1,280 requests is tokenized before the first step runs (the
  Lambda H100 result JSON: every request's TTFT >= 6.1 s).

Between events (admission, prefill chunk, first token, completion) a pure-decode batch is
constant, so time advances analytically over many steps at once (`StepCost.decode_span`),
never step by step in Python: a 24 h trace of ~1M requests runs in seconds.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from capacity.engine.prefix_cache import MOONCAKE_BLOCK_TOKENS, BlockPool, CpuTier
from capacity.engine.profile import EngineProfile
from capacity.engine.roofline import DecodeLine, DecodeLines


class Request(NamedTuple):
    """One request as the engine sees it (immutable). A NamedTuple: a simulated day builds one per
    request, and a frozen dataclass's `__init__` costs three times as much."""

    id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int
    # The prompt's 512-token units as chained keys (`prefix_cache.unit_keys` of its Mooncake
    # hash_ids); empty: nothing is known of its prefix, it never shares a cached block.
    prefix: tuple[int, ...] = ()


class Finished(NamedTuple):
    """A completed request's times (immutable; a NamedTuple like `Request`, one per request)."""

    request: Request
    first_token_time: float
    finish_time: float
    scheduled_time: float = 0.0  # first admission into the batch (end of queueing)

    @property
    def latency(self) -> float:
        return self.finish_time - self.request.arrival

    @property
    def ttft(self) -> float:
        return self.first_token_time - self.request.arrival


@dataclass
class IterationStats:
    """What the engine did since the last drain, in the shape vLLM's metrics logger records it:
    as vllm/v1/metrics/stats.py `IterationStats.update_from_output` counts, a prompt's tokens once,
    with the request's first output (not per prefill chunk, not again after a preemption), and a
    step's tokens as its prompt plus generation tokens (`vllm:iteration_tokens_total`)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    # (seconds between consecutive tokens of one request, how many such gaps)
    inter_token_latencies: list[tuple[float, int]] = field(default_factory=list)
    # (prompt + generation tokens of one engine step, how many such steps)
    step_tokens: list[tuple[int, int]] = field(default_factory=list)


class _Seq:
    __slots__ = (
        "admitted",
        "cache_ahead",
        "cache_mark",
        "cached",
        "computed",
        "finish_step",
        "first_token_time",
        "generated",
        "held",
        "join_step",
        "last_token_time",
        "load",
        "order",
        "queried",
        "ready",
        "req",
        "scheduled_time",
        "to_prefill",
    )

    def __init__(self, req: Request, order: int, ready: float) -> None:
        self.req = req
        self.order = order
        self.ready = ready  # when the API server hands it to the engine (arrival + server time)
        self.admitted = 0  # admission counter: the last admitted running request is preempted first
        self.cached = 0  # full-block tokens left in the prefix cache when it was preempted
        self.cache_mark = 0  # tokens allocated (cumulative) when it was preempted
        self.cache_ahead = 0  # free tokens ahead of its blocks in the free queue then
        self.to_prefill = req.prompt_tokens  # tokens still to compute before the next token
        self.computed = 0  # tokens whose KV is cached (prefill progress)
        self.generated = 0
        self.first_token_time = -1.0
        self.scheduled_time = -1.0
        self.join_step = 0  # step index at which it joined the decode batch
        self.finish_step = 0  # step index that produces its last token
        self.last_token_time = 0.0
        self.held: list[int] = []  # prefix-cache units it holds (prompt order)
        self.queried = 0  # 0: never admitted; 1: in its first admission step; 2: after
        self.load = 0  # of its planned prefix hit, tokens loaded from LMCache's CPU tier


class ReplicaEngine:
    """Continuous-batching replica. Call `advance(now)` before `submit(request, now)`.

    The hot paths (`advance`, `submit`) read the profile through fields cached on the engine."""

    def __init__(self, profile: EngineProfile, now: float = 0.0, record_stats: bool = False) -> None:
        self.profile = profile
        self._clock = now  # end of the last executed step (the next step starts here or later)
        self._step = 0  # steps executed
        self._order = 0
        self._admissions = 0
        self._allocated = 0  # KV tokens allocated so far (prefill chunks + decode tokens): eviction pressure
        self._server_free = now  # when the API server is done with the requests submitted so far
        self._waiting: deque[_Seq] = deque()
        self._prefilling: list[_Seq] = []
        self._decoding: dict[int, _Seq] = {}
        self._heap: list[tuple[int, int, _Seq]] = []  # (finish_step, order, seq)
        # sum of decoders' context at step G is _ctx_base + len(decoding) * G
        self._ctx_base = 0
        self._prefill_ctx = 0  # KV tokens held by requests still prefilling
        self._new_first_tokens: list[tuple[Request, float]] = []
        self._record = record_stats
        self.stats = IterationStats()
        self.total_preemptions = 0
        # vLLM's prefix-cache counters (vllm:prefix_cache_queries / _hits): prompt tokens looked
        # up at a request's first admission, and those found cached
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.external_hits = 0  # prompt tokens loaded from LMCache's CPU tier instead
        self._pool: BlockPool | None = None  # created by the first request with a known prefix
        self._cpu: CpuTier | None = None  # LMCache's CPU tier, with the pool when the profile has one
        self._pool_mark: tuple[int, int, int, int] = (-1, -1, -1, -1)

    @property
    def profile(self) -> EngineProfile:
        return self._profile

    @profile.setter
    def profile(self, profile: EngineProfile) -> None:
        self._profile = profile
        # flat copies of the profile for the hot paths (attribute chains cost in a 1M-call loop)
        self._max_seqs = profile.max_num_seqs
        self._max_batched = profile.max_num_batched_tokens
        self._kv_cap = profile.kv_cache_tokens
        self._kv_blocks = profile.kv_blocks
        self._max_len = profile.max_model_len
        self._bs = profile.block_size
        self._cost = profile.cost
        self._v0 = profile.scheduler == "v0"
        self._server_s = profile.server_s
        self._watermark = profile.watermark_blocks * profile.block_size
        self._prefix_caching = profile.prefix_caching and not self._v0
        # the last decode line asked for, by (b, ctx): an advance that cannot fit a step asks again
        self._lines = DecodeLines(self._cost)
        self._line_b, self._line_ctx, self._line = -1, -1, self._lines.line(1, 0)

    # --- observable state --------------------------------------------------------------
    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def num_running(self) -> int:
        return len(self._prefilling) + len(self._decoding)

    @property
    def outstanding(self) -> int:
        return len(self._waiting) + len(self._prefilling) + len(self._decoding)

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks in use (vllm:kv_cache_usage_perc)."""
        bs = self._bs
        step = self._step
        blocks = sum(-(-s.computed // bs) for s in self._prefilling)
        for s in self._decoding.values():
            blocks += -(-(s.computed + (step - s.join_step)) // bs)
        return min(1.0, blocks / self._kv_blocks)

    def generated_tokens(self, request_id: int) -> int:
        """Tokens generated so far by a running request (0 if waiting or unknown)."""
        for s in self._prefilling:
            if s.req.id == request_id:
                return s.generated
        for s in self._decoding.values():
            if s.req.id == request_id:
                return s.generated + (self._step - s.join_step)
        return 0

    def running_progress(self) -> dict[int, int]:
        """request id -> tokens generated so far, for every running request (one pass)."""
        out = {s.req.id: s.generated for s in self._prefilling}
        step = self._step
        for s in self._decoding.values():
            out[s.req.id] = s.generated + (step - s.join_step)
        return out

    @property
    def has_prefix_cache(self) -> bool:
        """Has it cached a known prefix (a request with block ids came with prefix caching on)?"""
        return self._pool is not None

    def first_tokens(self) -> list[tuple[Request, float]]:
        """First-token events (request, absolute time) since the last call."""
        out, self._new_first_tokens = self._new_first_tokens, []
        return out

    def drain_stats(self) -> IterationStats:
        out, self.stats = self.stats, IterationStats()
        return out

    # --- inputs ----------------------------------------------------------------------------
    def submit(self, request: Request, now: float) -> None:
        prompt, output = request.prompt_tokens, request.output_tokens
        if prompt < 1 or output < 1:
            raise ValueError(f"request {request.id}: prompt_tokens and output_tokens must be >= 1")
        if prompt + output + self._bs > self._kv_cap:
            raise ValueError(f"request {request.id}: does not fit the KV cache ({self._kv_cap} tokens)")
        if prompt + output > self._max_len:
            raise ValueError(
                f"request {request.id}: prompt_tokens + output_tokens "
                f"({prompt + output}) exceeds max_model_len {self._max_len}"
            )
        if not (self._waiting or self._prefilling or self._decoding) and now > self._clock:
            self._clock = now  # == max(self._clock, now)
        if request.prefix and self._pool is None and self._prefix_caching:
            self._pool = BlockPool(self._kv_blocks, MOONCAKE_BLOCK_TOKENS // self._bs)
            if self.profile.lmcache_tokens:
                self._cpu = CpuTier(self.profile.lmcache_tokens)
        self._order += 1
        start = request.arrival if request.arrival > self._server_free else self._server_free
        ready = start + self._server_s
        self._server_free = ready
        if self._v0 and ready > self._clock and not self._step_under_way(now):
            # V0's API server and engine share one event loop: tokenizing stalls the next step.
            # A step already under way runs on (its forward pass is in a worker thread:
            # AsyncLLMEngine's execute_model_async): moving the clock would restart it, and
            # arrivals faster than a step would starve the engine.
            self._clock = ready
        self._waiting.append(_Seq(request, self._order, ready))

    def _step_under_way(self, now: float) -> bool:
        """A step started at the clock, at or before `now`: the engine had work it could run."""
        startable = self._decoding or self._prefilling or (self._waiting and self._waiting[0].ready <= self._clock)
        return self._clock <= now and bool(startable)

    def abort(self, request_id: int) -> bool:
        """Drop a request (client went away), freeing its slot and KV; False if not present."""
        for s in self._waiting:
            if s.req.id == request_id:
                self._waiting.remove(s)
                return True
        for s in self._prefilling:
            if s.req.id == request_id:
                self._prefilling.remove(s)
                self._prefill_ctx -= s.computed
                self._release(s)
                return True
        for s in self._decoding.values():
            if s.req.id == request_id:
                self._leave_decode(s)  # its heap entry goes stale and is skipped
                self._release(s)
                return True
        return False

    # --- time ------------------------------------------------------------------------------
    def next_event_time(self) -> float | None:
        """Time of the next internal change if nothing else arrives; None when idle."""
        if not self._has_work():
            return None
        if not self.num_running and self._waiting[0].ready > self._clock:
            return self._waiting[0].ready
        if self._v0:
            plan = self._v0_plan()
            if plan:
                return self._clock + self._prefill_only_time(plan)
        elif self._prefilling or self._admissible():
            return self._clock + self._step_time(self._plan_prefill()[1])
        while self._heap and self._heap[0][2].finish_step != self._heap[0][0]:
            heapq.heappop(self._heap)
        k = self._heap[0][0] - self._step
        if self._waiting and self.num_running < self.profile.max_num_seqs:
            # the first step boundary after the queue head arrived admits it
            k = min(k, max(1, self._steps_until(self._waiting[0].ready - self._clock)))
        return self._clock + self._decode_span(k)

    def next_step_time(self) -> float | None:
        """End of the next engine step (the next token of every decoding request) if nothing else
        arrives; None when idle. What a server streaming every token as it is generated wakes for."""
        nxt = self.next_event_time()
        if nxt is None or not self._decoding:
            return nxt
        return min(nxt, self._clock + self._decode_span(1))

    def step_bound(self) -> str | None:
        """Which roofline side limits the next step ("memory" or "compute"); None when idle."""
        if not (self._prefilling or self._decoding):
            return None
        if self._v0:
            v0_plan = self._v0_plan()
            if v0_plan:
                _, tokens, sampled, kv, pairs = self._batch(v0_plan, decoders=False)
                return "memory" if self._cost.memory_bound(tokens, sampled, kv, pairs) else "compute"
            plan = []
        else:
            plan = self._plan_prefill()[1] if self._prefilling or self._admissible() else []
        _, tokens, sampled, kv, pairs = self._batch(plan)
        return "memory" if self._cost.memory_bound(tokens, sampled, kv, pairs) else "compute"

    def advance(self, now: float) -> list[Finished]:
        """Execute every step that ends by `now`; return requests finished in that span."""
        done: list[Finished] = []
        waiting, prefilling, decoding = self._waiting, self._prefilling, self._decoding
        while waiting or prefilling or decoding:
            if prefilling:
                if not self._mixed_step(now, done):
                    break
                continue
            if not decoding:
                ready = waiting[0].ready
                if ready > self._clock:
                    if ready > now:
                        break
                    self._clock = ready  # idle until the server hands it over
            if waiting:
                if self._v0:
                    plan = self._v0_plan()
                    if plan:
                        if not self._prefill_only_step(now, done, plan):
                            break
                        continue
                elif self._admissible():
                    if not self._mixed_step(now, done):
                        break
                    continue
            if not self._decode_segment(now, done):
                break
        if not (waiting or prefilling or decoding) and now > self._clock:
            self._clock = now  # == max(self._clock, now)
        return done

    # --- internals -------------------------------------------------------------------------
    def _has_work(self) -> bool:
        return bool(self._waiting or self._prefilling or self._decoding)

    def _ctx_of(self, s: _Seq) -> int:
        return s.computed + (self._step - s.join_step)

    def _kv_tokens_used(self) -> int:
        return self._ctx_base + len(self._decoding) * self._step + self._prefill_ctx

    def _cache_hit(self, s: _Seq) -> int:
        """Tokens of a preempted request still in the prefix cache (vLLM V1 get_computed_blocks:
        full blocks only, at most all but the last token); 0 for a request never preempted."""
        if not s.cached:
            return 0
        evicted = self._allocated - s.cache_mark - s.cache_ahead
        hit = s.cached - evicted if evicted > 0 else s.cached
        total = s.computed + s.to_prefill
        if hit > total - 1:
            hit = total - 1
        return (hit // self._bs) * self._bs if hit > 0 else 0

    def _admit_need(self, s: _Seq, budget: int) -> tuple[int, int]:
        """(chunk, prefix-cache hit) of admitting waiting request `s` with `budget` tokens left."""
        if self._pool is not None and s.req.prefix:
            hit = self._pool_hit(s)
        else:  # `_cache_hit` is 0 for a request never preempted (the common case, not called)
            hit = self._cache_hit(s) if self._prefix_caching and s.cached else 0
        rest = s.to_prefill - hit
        return (rest if rest < budget else budget), hit

    # --- automatic prefix caching (capacity.engine.prefix_cache) -----------------------------
    def _sync_pool(self, pool: BlockPool) -> None:
        """Bring the pool's free queue to the engine's free blocks (evicting from its head) once
        per engine state: allocations since the last look took blocks from the queue's head."""
        mark = (self._step, self._allocated, self.num_running, self._admissions)
        if mark == self._pool_mark:
            return
        self._pool_mark = mark
        bs, step = self._bs, self._step
        used = 0
        for s in self._prefilling:
            used += -(-s.computed // bs)
        for s in self._decoding.values():
            used += -(-(s.computed + (step - s.join_step)) // bs)
        free = self._kv_blocks - used
        pool.evict_to(free if free > 0 else 0)

    def _pool_hit(self, s: _Seq) -> int:
        """Tokens of `s`'s prompt found cached (`get_computed_blocks`: leading full blocks, at
        most all but the last token to compute)."""
        pool = self._pool
        assert pool is not None
        self._sync_pool(pool)
        blocks, _ = pool.lookup(s.req.prefix, s.req.prompt_tokens)
        hit = blocks * self._bs
        total = s.computed + s.to_prefill
        cap = ((total - 1) // self._bs) * self._bs
        if hit > cap:
            hit = cap
        s.load = 0
        if self._cpu is not None:
            # get_num_new_matched_tokens: LMCache's hit beyond vLLM's, less the last token
            external = self._cpu.lookup(s.req.prefix, s.req.prompt_tokens)
            if external >= total:
                external = total - 1
            if external > hit:
                s.load = external - hit
                return external
        return hit

    def _pool_touch(self, s: _Seq, hit: int) -> None:
        """Admitted with `hit` cached tokens: it holds (touches) the units they span."""
        pool = self._pool
        assert pool is not None
        left = hit // self._bs
        prompt = s.req.prompt_tokens
        for i, key in enumerate(s.req.prefix):
            if left <= 0:
                break
            own = pool.blocks_of(prompt, i)
            n = own if own < left else left
            pool.acquire(key, n)
            s.held.append(key)
            left -= n

    def _pool_cache(self, s: _Seq) -> None:
        """Its prefill is done: every full block of its known prefix is cached (`cache_full_blocks`)."""
        pool = self._pool
        assert pool is not None
        prompt = s.req.prompt_tokens
        held = len(s.held)
        for i, key in enumerate(s.req.prefix):
            own = pool.blocks_of(prompt, i)
            if own <= 0:
                break
            if i < held:
                pool.deepen(key, own)
            else:
                pool.acquire(key, own)
                s.held.append(key)

    def _release(self, s: _Seq) -> None:
        """Its blocks are freed: the units it held go to the free queue's tail, deepest first."""
        if s.held and self._pool is not None:
            ctx = s.computed
            self._pool.release(s.held, -(-ctx // self._bs))
            s.held = []

    def _admissible(self) -> bool:
        """Could the head of the queue be admitted in a step starting at the clock?"""
        waiting = self._waiting
        if not waiting:
            return False
        b = len(self._decoding)
        running = len(self._prefilling) + b  # == num_running (read once: a hot path)
        if running >= self._max_seqs:
            return False
        head = waiting[0]
        if head.ready > self._clock:
            return False
        chunk, hit = self._admit_need(head, self._max_batched - b)
        if chunk <= 0:
            return False
        watermark = self._watermark if running else 0
        used = self._ctx_base + b * self._step + self._prefill_ctx  # == _kv_tokens_used()
        # the KV it needs, plus the partly filled last block of every running request and its own
        return used + hit + chunk + watermark + (running + 1) * self._bs <= self._kv_cap

    def _plan_prefill(self, admit: bool = True) -> tuple[int, list[tuple[_Seq, int, int]], int]:
        """Prefill tokens of the next step, the (seq, chunk, cache hit) triples, and how many
        waiting requests it admits (none when `admit` is False: the step preempted)."""
        max_seqs, bs, kv_cap = self._max_seqs, self._bs, self._kv_cap
        budget = self._max_batched - len(self._decoding)
        plan: list[tuple[_Seq, int, int]] = []
        tokens = 0
        for s in self._prefilling:
            if budget <= 0:
                break
            c = s.to_prefill if s.to_prefill < budget else budget
            plan.append((s, c, 0))
            tokens += c
            budget -= c
        admitted = 0
        running = len(self._prefilling) + len(self._decoding)
        used = self._ctx_base + len(self._decoding) * self._step + self._prefill_ctx + tokens
        clock = self._clock
        if not admit:
            return tokens, plan, 0
        for s in self._waiting:
            if budget <= 0 or running >= max_seqs or s.ready > clock:
                break
            c, hit = self._admit_need(s, budget)
            watermark = self._watermark if running or plan else 0
            if c <= 0 or used + s.computed + hit + c + watermark + (running + 1) * bs > kv_cap:
                break
            plan.append((s, c, hit))
            tokens += c
            budget -= c
            used += s.computed + hit + c
            running += 1
            admitted += 1
        return tokens, plan, admitted

    def _v0_plan(self) -> list[tuple[_Seq, int, int]]:
        """V0's prefill step: waiting requests FCFS whose whole prompt (plus tokens generated
        before a preemption) fits the token budget, the batch and the KV cache with the block
        manager's watermark free (vllm/core/scheduler.py `_schedule_prefills`,
        vllm/core/block_manager `can_allocate`); empty when the head cannot be admitted."""
        budget, bs = self._max_batched, self._bs
        running = len(self._decoding)
        used = self._ctx_base + running * self._step
        free = self._kv_cap - used - running * bs
        plan: list[tuple[_Seq, int, int]] = []
        clock = self._clock
        for s in self._waiting:
            c = s.to_prefill
            if s.ready > clock or running >= self._max_seqs or (c > budget and plan):
                break
            need = -(-c // bs) * bs
            if free - need < self._watermark:
                break
            plan.append((s, c, 0))
            budget -= c
            free -= need
            running += 1
        return plan

    def _batch(self, plan: list[tuple[_Seq, int, int]], decoders: bool = True) -> tuple[int, int, int, int, int]:
        """(sequences, tokens, sampled, KV tokens read, attention pairs) of a step running every
        decoder (unless `decoders` is False: a V0 prefill step) plus the prefill chunks of `plan`
        (a chunk of c tokens after o cached ones attends to o + 1 .. o + c tokens; a sequence is
        sampled when its prefill completes)."""
        b = len(self._decoding) if decoders else 0
        ctx = self._ctx_base + b * self._step if b else 0
        seqs, tokens, sampled, kv, pairs = b, b, b, ctx, ctx
        for s, c, hit in plan:
            o = s.computed + hit
            seqs += 1
            tokens += c
            kv += o + c
            pairs += c * o + c * (c + 1) // 2
            if c + hit == s.to_prefill:
                sampled += 1
        return seqs, tokens, sampled, kv, pairs

    def _step_time(self, plan: list[tuple[_Seq, int, int]]) -> float:
        """The step's compute, plus the host-to-device copy of what its admissions load from
        LMCache (the connector's load completes before their first forward pass)."""
        if self._cpu is None:
            return self._cost.step_time(*self._batch(plan))
        loaded = sum(s.load for s, _, hit in plan if hit)
        return self._cost.step_time(*self._batch(plan)) + loaded * self.profile.kv_load_s_per_token

    def _prefill_only_time(self, plan: list[tuple[_Seq, int, int]]) -> float:
        return self._cost.step_time(*self._batch(plan, decoders=False))

    def _decode_span(self, k: int) -> float:
        """Duration of k pure-decode steps from the clock (context grows by b per step)."""
        b = len(self._decoding)
        return self._cost.decode_span(b, self._ctx_base + b * self._step, k)

    def _steps_within(self, dt: float) -> int:
        """Largest k with _decode_span(k) <= dt."""
        b = len(self._decoding)
        return self._cost.decode_steps_within(b, self._ctx_base + b * self._step, dt)

    def _preempt_if_needed(self) -> bool:
        """Free KV for one more decode step by preempting the most recently admitted running
        request (V1 `self.running.pop()`, V0 `running.pop()`), as often as needed; True if any."""
        p = self.profile
        preempted = False
        while self._decoding or self._prefilling:
            used = self._kv_tokens_used()
            need = used + len(self._decoding) + self.num_running * p.block_size
            if need <= p.kv_cache_tokens or self.num_running <= 1:
                return preempted
            victim = max([*self._decoding.values(), *self._prefilling], key=lambda s: s.admitted)
            if victim.order in self._decoding:
                self._leave_decode(victim)
                held = victim.computed
                victim.to_prefill = victim.req.prompt_tokens + victim.generated
            else:
                self._prefilling.remove(victim)
                self._prefill_ctx -= victim.computed
                held = victim.computed
                victim.to_prefill += victim.computed
            self._release(victim)
            victim.computed = 0
            # its full blocks go to the tail of the free queue, behind every block free now
            victim.cached = (held // p.block_size) * p.block_size
            victim.cache_mark = self._allocated
            victim.cache_ahead = p.kv_cache_tokens - used
            self._waiting.appendleft(victim)
            self.total_preemptions += 1
            preempted = True
            if self._record:
                self.stats.preemptions += 1
        return preempted

    def _join_decode(self, s: _Seq) -> None:
        step = self._step
        s.join_step = step
        s.finish_step = step + (s.req.output_tokens - s.generated)
        self._decoding[s.order] = s
        self._ctx_base += s.computed - step
        heapq.heappush(self._heap, (s.finish_step, s.order, s))

    def _leave_decode(self, s: _Seq) -> None:
        # caller guarantees membership; heap entries of departed seqs are skipped lazily
        del self._decoding[s.order]
        ran = self._step - s.join_step
        s.generated += ran
        s.computed += ran
        self._ctx_base -= s.computed - ran - s.join_step
        s.finish_step = -1

    def _admit(self, count: int, start: float) -> list[_Seq]:
        out = []
        for _ in range(count):
            s = self._waiting.popleft()
            if s.scheduled_time < 0:
                s.scheduled_time = start
            if not s.queried and self._prefix_caching:
                s.queried = 1
                self.prefix_queries += s.req.prompt_tokens
            self._admissions += 1
            s.admitted = self._admissions
            out.append(s)
        return out

    def _complete_prefills(self, completed: list[_Seq], end: float, done: list[Finished]) -> int:
        """Sample the first token (or, after a preemption, the next one) of each sequence whose
        prefill completed at `end`; the prompt tokens counted once, with the first output."""
        record = self._record
        first_prompts = 0
        for s in completed:
            s.generated += 1
            if record:
                self.stats.generation_tokens += 1
            if s.first_token_time < 0:
                s.first_token_time = end
                self._new_first_tokens.append((s.req, end))
                first_prompts += s.req.prompt_tokens
            elif record:
                self.stats.inter_token_latencies.append((end - s.last_token_time, 1))
            s.last_token_time = end
            if s.generated >= s.req.output_tokens:
                done.append(Finished(s.req, s.first_token_time, end, s.scheduled_time))
                self._release(s)
            else:
                self._join_decode(s)
        if record:
            self.stats.prompt_tokens += first_prompts
        return first_prompts

    def _mixed_step(self, now: float, done: list[Finished]) -> bool:
        """One V1 step with prefill work. False if it would end after `now` (not executed)."""
        prefilling, decoding = self._prefilling, self._decoding
        b = len(decoding)
        nrun = len(prefilling) + b
        preempted = False
        if nrun > 1 and (self._ctx_base + b * self._step + self._prefill_ctx + b + nrun * self._bs > self._kv_cap):
            preempted = self._preempt_if_needed()
            b = len(decoding)
        # the step's time without its prefill chunks: a lower bound of its duration, so if even
        # that ends after `now` the step cannot run and need not be planned
        start = self._clock
        if b and start + self._decode_line(b, self._ctx_base + b * self._step).first > now:  # == decode_step
            return False
        tokens, plan, admitted = self._plan_prefill(admit=not preempted)
        if not plan:
            return self._decode_segment(now, done, preempted=True)
        dur = self._step_time(plan)
        end = start + dur
        if end > now:
            return False
        if admitted:
            prefilling.extend(self._admit(admitted, start))
        self._step += 1
        self._clock = end
        self._allocated += tokens + b
        record = self._record
        if record:
            stats = self.stats
            stats.generation_tokens += b
            if b:
                stats.inter_token_latencies.append((dur, b))
        completed: list[_Seq] = []
        pool = self._pool
        for s, c, hit in plan:
            if s.queried == 1:
                s.queried = 2
                self.prefix_hits += hit - s.load
                self.external_hits += s.load
            if hit:
                if pool is not None and s.req.prefix:
                    self._pool_touch(s, hit - s.load)  # what LMCache loads is cached when computed
                    s.load = 0
                s.computed += hit
                s.to_prefill -= hit
                self._prefill_ctx += hit
            s.cached = 0
            s.to_prefill -= c
            s.computed += c
            if s.to_prefill == 0:
                completed.append(s)
        self._prefill_ctx += tokens  # == the sum of the chunks (ints)
        if self._heap and self._heap[0][0] <= self._step:
            self._pop_finished(end, done)
        for s in completed:
            prefilling.remove(s)
            self._prefill_ctx -= s.computed
            if pool is not None and s.req.prefix:
                self._pool_cache(s)
                if self._cpu is not None:
                    self._cpu.store(s.req.prefix, s.req.prompt_tokens)
        first_prompts = self._complete_prefills(completed, end, done)
        if record:
            self.stats.step_tokens.append((first_prompts + b + len(completed), 1))
        return True

    def _prefill_only_step(self, now: float, done: list[Finished], plan: list[tuple[_Seq, int, int]]) -> bool:
        """One V0 prefill step: whole prompts of the admitted requests, no decode (the running
        requests wait: their step index does not advance). False if it would end after `now`."""
        start = self._clock
        dur = self._prefill_only_time(plan)
        end = start + dur
        if end > now:
            return False
        admitted = self._admit(len(plan), start)
        self._clock = end
        tokens = 0
        for s in admitted:
            tokens += s.to_prefill
            s.computed += s.to_prefill
            s.to_prefill = 0
        self._allocated += tokens
        first_prompts = self._complete_prefills(admitted, end, done)
        if self._record:
            self.stats.step_tokens.append((first_prompts + len(admitted), 1))
        return True

    def _decode_segment(self, now: float, done: list[Finished], preempted: bool = False) -> bool:
        """Many identical pure-decode steps up to the next completion, arrival or `now` (one
        step only right after a preemption: the next step may readmit the preempted request)."""
        decoding = self._decoding
        b = len(decoding)
        nrun = len(self._prefilling) + b
        bs = self._bs
        used = self._ctx_base + b * self._step + self._prefill_ctx  # == _kv_tokens_used()
        if nrun > 1 and used + b + nrun * bs > self._kv_cap:
            preempted = self._preempt_if_needed() or preempted
            b = len(decoding)
            nrun = len(self._prefilling) + b
            used = self._ctx_base + b * self._step + self._prefill_ctx
        if not b:
            return False
        step = self._step
        clock = self._clock
        ctx = self._ctx_base + b * step
        # The `now` bound first: when no step fits (the common end of an advance) the other
        # bounds cannot matter (k = min(..., 0)), so they are not computed.
        dt = now - clock
        if b != self._line_b or ctx != self._line_ctx:  # == _decode_line(b, ctx), inline: the hottest path
            self._line_b, self._line_ctx, self._line = b, ctx, self._lines.line(b, ctx)
        line = self._line  # one line answers every question below
        if line.first > dt + 1e-12:  # == cost.decode_step(b, ctx)
            return False
        k = 1 if preempted else line.steps_within(dt)
        if k <= 0:
            return False
        heap = self._heap
        while heap[0][2].finish_step != heap[0][0]:
            heapq.heappop(heap)  # stale entry of a preempted request
        k_next = heap[0][0] - step
        if k_next < k:
            k = k_next
        waiting = self._waiting
        if waiting and nrun < self._max_seqs:
            ready = waiting[0].ready
            if ready > clock:  # stop at the first step starting after the server hands it over
                dt = ready - clock
                ka = line.steps_within(dt)  # == _steps_until(dt)
                if not (line.span(ka) >= dt):
                    ka += 1
                if ka < 1:
                    ka = 1
                if ka < k:
                    k = ka
        kf = (self._kv_cap - used - nrun * bs) // b  # b >= 1 here: == free // max(1, b)
        if kf < 1:
            kf = 1
        if kf < k:
            k = kf
        if k <= 0:
            return False
        dur = line.span(k)
        self._step = step = step + k
        self._clock = clock = clock + dur
        self._allocated += b * k
        if self._record:
            stats = self.stats
            stats.generation_tokens += b * k
            stats.step_tokens.append((b, k))
            stats.inter_token_latencies.append((dur / k, b * k))
        if heap[0][0] <= step:
            self._pop_finished(clock, done)
        if self._record:  # only the metrics of a preempted request's resumption need it
            for s in decoding.values():
                s.last_token_time = clock
        return True

    def _decode_line(self, b: int, ctx: int) -> DecodeLine:
        """The decode line of b sequences from `ctx` (the last one asked is kept: an advance that
        cannot fit a step, and the mixed step after it, ask for it again)."""
        if b != self._line_b or ctx != self._line_ctx:
            self._line_b, self._line_ctx, self._line = b, ctx, self._lines.line(b, ctx)
        return self._line

    def _steps_until(self, dt: float) -> int:
        k = self._steps_within(dt)
        return k if self._decode_span(k) >= dt else k + 1

    def _pop_finished(self, t: float, done: list[Finished]) -> None:
        heap = self._heap
        step = self._step
        pop = heapq.heappop
        while heap and heap[0][0] <= step:
            fs, _, s = pop(heap)
            if s.finish_step != fs:
                continue
            self._leave_decode(s)  # frees its KV; the heap entry is already gone
            if s.held:
                self._release(s)
            done.append(Finished(s.req, s.first_token_time, t, s.scheduled_time))
