"""The model's pods and their GPU nodes, from the Deployment's replica count to the billed node-hours.

The HPA sets the Deployment's replicas; a new pod binds to an empty GPU node if one is left
(weights + engine start only), else a node is launched in the highest-weight NodePool with room
under its `gpuLimit` (else the pod stays Pending): node launch + image pull + weight load +
engine start; only then does vLLM serve and expose metrics. Scale-in deletes Pending, then
starting, then the newest ready pods (the ReplicaSet's order); a deleted ready pod leaves the
router and drains its in-flight requests; its node stays empty (and billed) for the pool's
`consolidateAfter`. A reclaimed spot node warns 2 minutes ahead: the pod drains, a replacement
is created at once, and what is still running at the deadline fails. GPU-hours are node-hours x GPUs.

Warm headroom (`headroom` placeholders, the Kubernetes overprovisioning pattern): each placeholder
pod of the lowest priority holds one GPU node of the model's pools with the serving image pulled;
Karpenter launches nodes for them like for any pending pod, in weight order under the pools'
`gpuLimit`, so they count against it. The scheduler places a new replica on an empty node first
(no preemption needed), else preempts a placeholder: the replica pays weight load and engine start
(plus what is left of the node's launch and pull if it is not warm yet: the first node up goes to
the higher-priority pod), and the placeholder goes Pending, so a node is launched for it and is warm
after launch + pull. A replica's node freed while a placeholder is Pending for lack of room takes
that placeholder at once (the image is there). Placeholder nodes are never empty, so never
consolidated; a reclaimed one is replaced. Not modelled: the placeholder's own (zero) grace period,
a Pending placeholder moving to a freed node while its own launch is in flight (the freed node
idles for `consolidateAfter` instead: the same billed time, warm later), Karpenter's consolidation
of placeholder nodes onto cheaper ones, and sharing one buffer between models (each model's run
sees the whole buffer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import IntEnum

import numpy as np

from capacity.engine import EngineProfile, ReplicaEngine, Request
from capacity.sim.cluster.startup import Pool, Startup, interruption_delay, place
from capacity.sim.events import EventKind, EventQueue
from capacity.sim.exposition import Exposition
from capacity.sim.results import NodeSpan

SPOT_WARNING_S = 120.0  # EC2 spot interruption notice


class Phase(IntEnum):
    """A pod's life; the order is the ReplicaSet's deletion order (lowest first)."""

    PENDING = 0  # no node yet
    STARTING = 1  # on a node: image, weights, engine
    READY = 2  # in the router, serving
    DRAINING = 3  # out of the router, finishing its in-flight requests
    GONE = 4


# The phases in which vLLM's endpoint is up, so Prometheus scrapes the pod.
SCRAPED = (Phase.READY, Phase.DRAINING)
# The phases the ReplicaSet counts (not terminating).
ALIVE = (Phase.PENDING, Phase.STARTING, Phase.READY)
# Looking up an Enum member costs ~0.1 us on Python 3.11: the per-tick loops compare with these.
_PENDING, _GONE = Phase.PENDING, Phase.GONE


class Pod:
    __slots__ = ("engine", "exposition", "id", "inflight", "node", "phase", "ready_at")

    def __init__(self, pod_id: int) -> None:
        self.id = pod_id
        self.phase = Phase.PENDING
        self.node: Node | None = None
        self.ready_at = math.inf
        self.engine: ReplicaEngine | None = None
        self.inflight: dict[int, Request] = {}
        self.exposition = Exposition()

    @property
    def gone(self) -> bool:
        """Deleted and drained (a property, so a check after a call that may end it reads it anew)."""
        return self.phase == Phase.GONE

    @property
    def serving_engine(self) -> ReplicaEngine:
        """The engine of a ready or draining pod (it gets one when it becomes ready)."""
        if self.engine is None:
            raise RuntimeError(f"pod {self.id} has no engine: it never became ready")
        return self.engine

    @property
    def outstanding(self) -> int:
        return len(self.inflight)

    @property
    def waiting(self) -> int:
        """vllm:num_requests_waiting of its engine."""
        return self.serving_engine.num_waiting

    @property
    def kv_usage(self) -> float:
        """vllm:kv_cache_usage_perc of its engine."""
        return self.serving_engine.kv_usage


class Node:
    """One single-replica GPU node, billed from launch to termination."""

    __slots__ = ("created", "held_since", "idle_since", "pod", "pool", "reclaimed", "terminated", "warm_at")

    def __init__(self, pool: Pool, created: float) -> None:
        self.pool = pool
        self.created = created
        self.pod: Pod | None = None
        self.idle_since: float | None = None
        self.reclaimed = False
        self.terminated = False
        # A headroom placeholder holds the node since `held_since` (None: it does not); the node is
        # up with the image pulled from `warm_at`.
        self.held_since: float | None = None
        self.warm_at = math.inf

    @property
    def holds_placeholder(self) -> bool:
        return self.held_since is not None


class Fleet:
    """The Deployment's pods (by creation order), the ready ones (the router's backends, oldest
    first) and the nodes under them; pod and node events go on `events`. `pods` keeps every pod
    for the run's results; the loops of a run walk `present()`, so their cost does not grow with
    the pods that came and went."""

    def __init__(
        self,
        profile: EngineProfile,
        pools: Sequence[Pool],
        startup: Startup,
        gpus_per_replica: int,
        spot_interruptions_per_hour: float,
        rng: np.random.Generator,
        events: EventQueue,
        spec_replicas: int,
        headroom: int = 0,
    ) -> None:
        self.profile = profile
        self.pools = pools
        self.startup = startup
        self.gpus_per_replica = gpus_per_replica
        self.spot_interruptions_per_hour = spot_interruptions_per_hour
        self.rng = rng
        self.events = events
        self.pods: list[Pod] = []
        self._present: list[Pod] = []  # not gone, by creation order (gone ones dropped by `present`)
        self.ready: list[Pod] = []
        self.nodes: list[Node] = []  # launched and not yet terminated
        self.used_gpus: dict[str, int] = {}
        self.node_spans: list[NodeSpan] = []
        self.spec_replicas = spec_replicas  # the Deployment's spec.replicas
        self.scale_times: list[float] = []  # when spec.replicas changed
        self.reclaim_notices: list[float] = []  # when a spot node got its 2-minute warning
        # most serving replicas at once: ready, in the router (a draining pod and the one that
        # replaces it are one replica of the policy's, not two)
        self.max_used = 0
        self.headroom = headroom  # placeholder pods (the Deployment's replicas)
        self.unplaced = 0  # placeholders Pending with no room under the pools' GPU limits
        self.headroom_spans: list[NodeSpan] = []  # each node's stretch holding a placeholder
        self._ended = False

    # --- the Deployment and its ReplicaSet ----------------------------------------------
    def present(self) -> list[Pod]:
        """The pods not gone, by creation order."""
        self._present = [p for p in self._present if p.phase != _GONE]
        return self._present

    def alive(self) -> list[Pod]:
        """Pods the ReplicaSet counts (not terminating)."""
        return [p for p in self.present() if p.phase in ALIVE]

    def set_replicas(self, desired: int, t: float) -> None:
        """Write the Deployment's spec replicas; the ReplicaSet creates or deletes pods at once."""
        if desired != self.spec_replicas:
            self.scale_times.append(t)
        self.spec_replicas = desired
        alive = self.alive()
        if desired > len(alive):
            for _ in range(desired - len(alive)):
                self.create_pod(t)
        elif desired < len(alive):
            # ReplicaSet deletion order: unscheduled, then not ready, then newest ready.
            order = sorted(alive, key=lambda p: (p.phase, -p.id))
            for pod in order[: len(alive) - desired]:
                self._delete(pod, t)

    def create_pod(self, t: float, warm: bool = False) -> None:
        """A new pod, scheduled at once if a node is free or can be launched; `warm` ones
        serve from t (the fleet that was running before the simulation starts)."""
        pod = Pod(len(self.pods))
        self.pods.append(pod)
        self._present.append(pod)
        self._schedule(pod, t, warm)

    def _delete(self, pod: Pod, t: float) -> None:
        if pod.phase == Phase.READY:
            self._drain(pod, t)
        elif pod.node is None:  # Pending: never had a node
            pod.phase = Phase.GONE
        else:  # still starting: nothing to drain
            self.release(pod, t)

    # --- scheduling onto nodes --------------------------------------------------------
    def _idle_node(self) -> Node | None:
        """An empty node the scheduler can bind to at once (cheapest pool first, then oldest)."""
        idle = [n for n in self.nodes if n.pod is None and not n.reclaimed and not n.holds_placeholder]
        return min(idle, key=lambda n: (-n.pool.weight, n.created), default=None)

    def _placeholder_node(self) -> Node | None:
        """The node whose placeholder a new replica displaces: the first warm (then cheapest pool)."""
        held = [n for n in self.nodes if n.holds_placeholder and not n.reclaimed]
        return min(held, key=lambda n: (n.warm_at, -n.pool.weight, n.created), default=None)

    def _schedule(self, pod: Pod, t: float, warm: bool = False) -> bool:
        node = self._idle_node()
        displaced = False
        if node is not None:  # the image is already on the node
            startup = self.startup.sample_on_node(self.rng)
        elif (node := self._placeholder_node()) is not None:  # preempts the placeholder
            startup = max(0.0, node.warm_at - t) + self.startup.sample_on_node(self.rng)
            self._end_hold(node, t)
            displaced = True
        else:
            pool = place(self.pools, self.used_gpus, self.gpus_per_replica)
            if pool is None:
                return False  # Pending until a NodePool has room under its GPU limit
            node = self._launch(pool, t)
            startup = self.startup.sample(self.rng)
        node.pod, node.idle_since = pod, None
        pod.node, pod.phase = node, Phase.STARTING
        pod.ready_at = t if warm else t + startup
        self.events.push(pod.ready_at, EventKind.READY, pod)
        if displaced:  # the preempted placeholder is Pending: Karpenter launches a node for it
            self.unplaced += 1
            self._refill(t)
        return True

    def _schedule_pending(self, t: float) -> None:
        for waiting in self.present():
            if waiting.phase == Phase.PENDING and not self._schedule(waiting, t):
                break

    def cancel_pending(self) -> None:
        """The end of the run: pods still waiting for a node never start."""
        for pod in self.present():
            if pod.phase == Phase.PENDING:
                pod.phase = Phase.GONE

    # --- warm headroom ----------------------------------------------------------------
    def start_headroom(self, t: float) -> None:
        """The placeholders of a stack that was running before t: their nodes up, the image pulled."""
        self.unplaced = self.headroom
        while self.unplaced and (pool := place(self.pools, self.used_gpus, self.gpus_per_replica)) is not None:
            self._hold(self._launch(pool, t), t, warm_at=t)
            self.unplaced -= 1

    def _refill(self, t: float) -> None:
        """Pending placeholders get a node launched while a pool has room (none after the run)."""
        while self.unplaced and not self._ended:
            pool = place(self.pools, self.used_gpus, self.gpus_per_replica)
            if pool is None:
                return
            self._hold(self._launch(pool, t), t, warm_at=t + self.startup.sample_node_warm(self.rng))
            self.unplaced -= 1

    def _hold(self, node: Node, t: float, warm_at: float) -> None:
        node.held_since, node.warm_at, node.idle_since = t, warm_at, None

    def _end_hold(self, node: Node, t: float) -> None:
        """The placeholder leaves the node (preempted, or the node goes): bill its stretch as headroom."""
        assert node.held_since is not None
        self.headroom_spans.append(
            NodeSpan(node.held_since, t, node.pool.capacity_type, self.gpus_per_replica, node.pool.price_per_gpu_hour)
        )
        node.held_since = None

    # --- nodes ------------------------------------------------------------------------
    def _launch(self, pool: Pool, t: float) -> Node:
        node = Node(pool, t)
        self.nodes.append(node)
        self.used_gpus[pool.name] = self.used_gpus.get(pool.name, 0) + self.gpus_per_replica
        if pool.capacity_type == "spot":
            self.events.push(
                t + interruption_delay(self.rng, self.spot_interruptions_per_hour), EventKind.RECLAIM, node
            )
        return node

    def _terminate(self, node: Node, t: float) -> None:
        """The instance is gone: bill it from launch, free its slot under the pool's limit."""
        if node.holds_placeholder:
            self._end_hold(node, t)
        node.terminated = True
        self.nodes.remove(node)
        self.node_spans.append(
            NodeSpan(node.created, t, node.pool.capacity_type, self.gpus_per_replica, node.pool.price_per_gpu_hour)
        )
        self.used_gpus[node.pool.name] -= self.gpus_per_replica
        self._schedule_pending(t)
        self._refill(t)  # predictors first: the scheduler places higher priorities first

    def terminate_nodes(self, t: float) -> None:
        """The end of the run: every node still up is billed until t."""
        self._ended = True
        for node in list(self.nodes):
            self._terminate(node, t)

    def on_consolidate(self, node: Node, t: float) -> None:
        if node.terminated or node.pod is not None or node.idle_since is None:
            return
        if t >= node.idle_since + node.pool.consolidate_after_s:  # empty for consolidateAfter
            self._terminate(node, t)

    def on_reclaim(self, node: Node, t: float) -> None:
        if node.terminated:
            return
        node.reclaimed = True  # cordoned: nothing new lands here
        self.reclaim_notices.append(t)
        pod = node.pod
        if pod is None:
            if node.holds_placeholder:  # its Deployment recreates it: Pending until a node is up
                self.unplaced += 1
            self._terminate(node, t)
        elif pod.phase == Phase.DRAINING:  # already being deleted: cut at the deadline
            self.events.push(t + SPOT_WARNING_S, EventKind.KILL, pod)
        else:
            if pod.phase == Phase.READY:
                self._drain(pod, t, t + SPOT_WARNING_S)
            else:
                self.release(pod, t)
            self.create_pod(t)  # the ReplicaSet replaces it at once

    def _pending(self) -> bool:
        return any(p.phase == _PENDING for p in self.present())

    # --- a pod's end ------------------------------------------------------------------
    def on_ready(self, pod: Pod, t: float) -> None:
        if pod.phase != Phase.STARTING or pod.ready_at != t:
            return
        pod.phase = Phase.READY
        pod.engine = ReplicaEngine(self.profile, t)
        self.ready.append(pod)
        self.max_used = max(self.max_used, len(self.ready))

    def _drain(self, pod: Pod, t: float, deadline: float = math.inf) -> None:
        if pod in self.ready:
            self.ready.remove(pod)
        pod.phase = Phase.DRAINING
        if not pod.inflight:
            self.release(pod, t)
        elif deadline < math.inf:
            self.events.push(deadline, EventKind.KILL, pod)

    def cut(self, pod: Pod, t: float) -> list[int]:
        """A draining pod's deadline passed: it goes, and the ids of the requests it still had
        in flight (which fail) are returned."""
        cut = list(pod.inflight)
        pod.inflight.clear()
        self.release(pod, t)
        return cut

    def release(self, pod: Pod, t: float) -> None:
        """The pod is gone; its node stays, empty, until consolidation (or goes, if reclaimed)."""
        pod.phase = Phase.GONE
        node = pod.node
        if node is None:
            return
        node.pod = None
        if self.unplaced and not node.reclaimed and not self._pending():
            # A placeholder Pending for lack of room takes the node; the image is already there.
            self._hold(node, t, warm_at=t)
            self.unplaced -= 1
            return
        after = node.pool.consolidate_after_s
        if node.reclaimed or after <= 0:
            self._terminate(node, t)
            return
        node.idle_since = t
        if math.isfinite(after):
            self.events.push(t + after, EventKind.CONSOLIDATE, node)
        self._schedule_pending(t)
