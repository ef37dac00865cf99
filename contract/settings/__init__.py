"""Typed stack settings, validated as a whole before any resource exists.

`parse()` validates the `inference-platform` config mapping; `stack_file` holds the one
loader from a stack name or `Pulumi.<stack>.yaml` path (the capacity tooling, the tests) and
from the engine's config (the program), so a `pulumi config set` means the same thing everywhere.
"""

from __future__ import annotations

import itertools
import re
from datetime import date
from typing import Any, Literal

from pydantic import Field, ValidationError

from .autoscaling import DEFAULT_KEY, ModelAutoscaling, merged_policy
from .base import Section
from .capacity_planning import CapacityPlanningSettings
from .cluster import ClusterSettings
from .errors import NAMESPACE, SettingsError, key_path, problems_of
from .gateway import GatewaySettings, gateway_problems
from .gpu_capacity import GpuCapacitySettings
from .model_store import ModelStoreSettings, model_store_problems
from .models import ModelSettings, instance_family_problems, request_fit_problems
from .network import NetworkSettings
from .observability import ObservabilitySettings
from .serving import ServingSettings, gpu_fit_problems

__all__ = ["NAMESPACE", "ModelAutoscaling", "ModelSettings", "SettingsError", "StackSettings", "key_path", "parse"]

PROD_MIN_ZONES = 3


class StackSettings(Section):
    """Every section of `inference-platform:*` config. Sections are added here, one line each."""

    environment: Literal["dev", "prod"] = "prod"
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    # Required: every stack declares how its deployer reaches the API (cluster.endpointAccess).
    cluster: ClusterSettings
    gpu_capacity: GpuCapacitySettings = Field(default_factory=GpuCapacitySettings)
    model_store: ModelStoreSettings = Field(default_factory=ModelStoreSettings)
    serving: ServingSettings = Field(default_factory=ServingSettings)
    gateway: GatewaySettings
    models: list[ModelSettings] = Field(min_length=1)
    # Raw `autoscaling` mapping: `default` plus per-model overrides; see `autoscaling_for`.
    autoscaling: dict[str, dict[str, Any]] = Field(default_factory=dict)
    capacity_planning: CapacityPlanningSettings = Field(default_factory=CapacityPlanningSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)

    def model(self, name: str) -> ModelSettings:
        return next(m for m in self.models if m.name == name)

    def autoscaling_for(self, model_name: str) -> ModelAutoscaling:
        """The merged policy of one model: defaults < `autoscaling.default` < `autoscaling.<model>`."""
        return merged_policy(self.autoscaling.get(DEFAULT_KEY, {}), self.autoscaling.get(model_name, {}))

    def warnings(self, today: date | None = None) -> list[str]:
        """What deploys but needs attention soon (one line each, key named)."""
        return [f"{NAMESPACE}:{w}" for w in self.cluster.support_warnings(today or date.today())]

    def headroom_model(self) -> ModelSettings | None:
        """The model whose replica shape the warm headroom holds (None: no headroom)."""
        headroom = self.gpu_capacity.headroom
        if not headroom.placeholders:
            return None
        return self.model(headroom.model) if headroom.model else self.models[0]

    def with_autoscaling(self, section: dict[str, Any]) -> StackSettings:
        """The same stack with its `autoscaling` section replaced (a policy file, a tuning
        candidate), validated by the same rules as the stack file itself."""
        if not isinstance(section, dict) or not all(isinstance(v, dict) for v in section.values()):
            raise SettingsError([f"{NAMESPACE}:autoscaling must map 'default' or model names to settings"])
        candidate = self.model_copy(update={"autoscaling": section})
        problems = _autoscaling_problems(candidate, {p.name: p for p in candidate.gpu_capacity.pools})
        if problems:
            raise SettingsError(problems)
        return candidate


def _cross_section_problems(s: StackSettings, aws_region: str | None, today: date) -> list[str]:
    """Rules that span sections; each problem names the key a user would change."""
    problems: list[str] = []
    where = f"{NAMESPACE}:"
    problems += [f"{where}{p}" for p in s.cluster.support_problems(today)]
    problems += _zone_region_problems(s, aws_region)
    problems += [f"{where}{p}" for p in s.cluster.deployer_problems(s.network.cidr)]
    if s.environment == "prod" and s.model_store.force_destroy:
        problems.append(
            f"{where}modelStore.forceDestroy (True) is not allowed in a prod stack: `pulumi destroy` would "
            "delete every synced model with the bucket"
        )
    prefixes: dict[str, int] = {}
    for i, model in enumerate(s.models):
        first = prefixes.setdefault(model.store_prefix, i)
        if first != i and s.models[first].name != model.name:  # a duplicate entry is reported as one
            problems.append(
                f"{where}models[{i}].s3Prefix ({model.store_prefix!r}) is also models[{first}]'s; two models "
                "in one prefix overwrite each other's weights and manifest"
            )
    if s.environment == "prod" and len(s.network.availability_zones) < PROD_MIN_ZONES:
        problems.append(
            f"{where}network.availabilityZones ({s.network.availability_zones}) must list at least "
            f"{PROD_MIN_ZONES} zones in a prod stack (survive a zone loss with capacity to spare)"
        )
    wants_auto_mode = s.gpu_capacity.provisioner == "auto-mode"
    if wants_auto_mode != s.cluster.auto_mode:
        problems.append(
            f"{where}gpuCapacity.provisioner ({s.gpu_capacity.provisioner!r}) requires cluster.autoMode to be "
            f"{str(wants_auto_mode).lower()} (Auto Mode runs its own Karpenter; two would fight over nodes)"
        )
    pools = {p.name: p for p in s.gpu_capacity.pools}
    names = [m.name for m in s.models]
    for i, model in enumerate(s.models):
        if model.name in names[:i]:
            problems.append(
                f"{where}models[{i}].name ({model.name!r}) repeats models[{names.index(model.name)}]; "
                "served names must be unique (remove the duplicate entry)"
            )
        for pool_name in model.pools:
            pool = pools.get(pool_name)
            if pool is None:
                problems.append(
                    f"{where}models[{i}].pools ({pool_name!r}) is not a GPU NodePool; known: {sorted(pools)}"
                )
            elif pool.gpu_limit < model.gpus_per_replica:
                j = s.gpu_capacity.pools.index(pool)
                problems.append(
                    f"{where}gpuCapacity.pools[{j}].gpuLimit ({pool.gpu_limit}) must be >= gpusPerReplica "
                    f"({model.gpus_per_replica}) of model {model.name!r}, which may run there"
                )
    headroom = s.gpu_capacity.headroom
    if headroom.model is not None and headroom.model not in names:
        problems.append(
            f"{where}gpuCapacity.headroom.model ({headroom.model!r}) names no model; known: {sorted(names)}"
        )
    elif len(set(names)) == len(names):  # a duplicate entry would also count twice against the GPU budget
        problems += _autoscaling_problems(s, pools)
    problems += instance_family_problems(s.models, s.gpu_capacity.pools)
    problems += gpu_fit_problems(s.models, s.gpu_capacity.pools)
    problems += request_fit_problems(s.models, s.gpu_capacity)
    problems += gateway_problems(s)
    problems += model_store_problems(s)
    problems += _window_problems(s)
    return problems


def _autoscaling_problems(s: StackSettings, pools: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    names = {m.name for m in s.models}
    for key in s.autoscaling:
        if key != DEFAULT_KEY and key not in names:
            problems.append(f"{NAMESPACE}:autoscaling.{key} names no model; use 'default' or one of {sorted(names)}")
    try:
        merged_policy(s.autoscaling.get(DEFAULT_KEY, {}))
    except ValidationError as exc:
        return problems + problems_of(exc, ("autoscaling", DEFAULT_KEY))
    demand: dict[str, int] = {}
    for _i, model in enumerate(s.models):
        scope = model.name if model.name in s.autoscaling else DEFAULT_KEY
        try:
            policy = s.autoscaling_for(model.name)
        except ValidationError as exc:
            problems += problems_of(exc, ("autoscaling", scope))
            continue
        if policy.min_replicas == 0 and model.workload != "batch":
            problems.append(
                f"{NAMESPACE}:autoscaling.{scope}.minReplicas (0) is only allowed for batch models; "
                f"{model.name!r} is interactive and needs a warm replica"
            )
        demand[model.name] = policy.max_replicas * model.gpus_per_replica
    held = s.headroom_model()
    if held is not None and held.name in demand:
        # The placeholders hold GPUs of the same pools: counted so the buffer can refill at maxReplicas.
        demand[held.name] += s.gpu_capacity.headroom.placeholders * held.gpus_per_replica
    problems += _gpu_budget_problems(s, pools, demand)
    return problems


def _gpu_budget_problems(s: StackSettings, pools: dict[str, Any], demand: dict[str, int]) -> list[str]:
    """Hall's condition: for every set of pools, the models confined to it must fit its GPU limits."""
    problems: list[str] = []
    names = sorted(pools)
    # A model runs only where a pool launches one of its instance families (a pool allowing none is
    # no room for it; a model with no such pool is reported by the instance-family rule).
    hosts = {m.name: {p.name for p in pools.values() if m.families_in(p)} for m in s.models}
    for size in range(1, len(names) + 1):
        for subset in itertools.combinations(names, size):
            confined = [m for m in s.models if m.name in demand and hosts[m.name] and hosts[m.name] <= set(subset)]
            need = sum(demand[m.name] for m in confined)
            have = sum(pools[p].gpu_limit for p in subset)
            if confined and need > have:
                detail = ", ".join(f"{m.name}: {_demand_terms(s, m)} = {demand[m.name]}" for m in confined)
                problems.append(
                    f"{NAMESPACE}:autoscaling maxReplicas ({need} GPUs: {detail}) must fit the gpuLimit "
                    f"of pools {list(subset)} ({have} GPUs); lower maxReplicas or raise gpuCapacity.pools[].gpuLimit"
                )
                return problems
    return problems


def _demand_terms(s: StackSettings, model: ModelSettings) -> str:
    held = s.headroom_model()
    if held is not None and held.name == model.name:
        return "(maxReplicas + gpuCapacity.headroom.placeholders) x gpusPerReplica"
    return "maxReplicas x gpusPerReplica"


def _window_problems(s: StackSettings) -> list[str]:
    """A rate or average over fewer than two scrapes is empty or noise: every PromQL window
    must span at least two scrape intervals."""
    interval = s.observability.scrape_interval_seconds
    windows = {f"observability.{path}": value for path, value in s.observability.windows().items()}
    for model in s.models:
        scope = model.name if model.name in s.autoscaling else DEFAULT_KEY
        try:
            policy = s.autoscaling_for(model.name)
        except ValidationError:
            continue  # reported by the autoscaling rules
        windows |= {f"autoscaling.{scope}.{path}": value for path, value in policy.windows().items()}
    return [
        f"{NAMESPACE}:{key} ({value}) must be >= 2 x observability.scrapeIntervalSeconds "
        f"({interval}s) = {2 * interval}s"
        for key, value in windows.items()
        if value < 2 * interval
    ]


_ZONE = re.compile(r"^(?P<region>[a-z]{2}(-[a-z]+)+-\d+)(-[a-z]+-\d+)?[a-z]$")


def _zone_region_problems(s: StackSettings, aws_region: str | None) -> list[str]:
    """Availability zones (and Local Zones) belong to the stack's `aws:region`."""
    if not aws_region:
        return []
    wrong = [z for z in s.network.availability_zones if (m := _ZONE.match(z)) is None or m["region"] != aws_region]
    if not wrong:
        return []
    return [f"{NAMESPACE}:network.availabilityZones ({wrong}) are not zones of aws:region ({aws_region!r})"]


def parse(raw: dict[str, Any], *, aws_region: str | None = None, today: date | None = None) -> StackSettings:
    """Validate the whole `inference-platform` config mapping (keys without the namespace);
    `aws_region` (the stack's `aws:region`) and `today` enable the rules that need them."""
    try:
        settings = StackSettings.model_validate(raw)
    except ValidationError as exc:
        raise SettingsError(problems_of(exc)) from None
    problems = _cross_section_problems(settings, aws_region, today or date.today())
    if problems:
        raise SettingsError(problems)
    return settings
