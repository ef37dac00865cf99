"""The planner's one door to the settings: a stack file turned into the plain data it runs on.

`pulumi config set` changes `Pulumi.<stack>.yaml`; this module reads that file with the
contract's one stack loader (`contract.settings.stack_file`), so the simulated policy is exactly
the deployed one, with every validation rule the program applies (a policy file that would not
deploy does not simulate). A model's policy reaches the simulator only as the ScaledObject the
platform renders (`contract.manifests`), read by `capacity.sim.scaledobject` as KEDA reads it.
No other module of the capacity tooling's simulator or planner reads settings.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from capacity.engine import PROFILES, EngineProfile, get_profile
from capacity.engine.architecture import TensorParallelError
from capacity.engine.hardware import (
    Gpu,
    Interconnect,
    checkpoint,
    checkpoints,
    family_interconnects,
    gpus,
    interconnect,
)
from capacity.engine.profiles import derive, with_lmcache
from capacity.sim.cluster.router import RouterName
from capacity.sim.cluster.startup import Pool, Startup, replica_capacity
from capacity.sim.control.keda import ScaledObject
from capacity.sim.scaledobject import Manifest, parse_scaled_object
from contract.gpu import GPU_OF_FAMILY
from contract.instances import InstanceSize, Requests, daemonset_overhead, landing_size, pod_requests
from contract.manifests.monitored import MonitoredModel, ScaledTarget, monitored_models
from contract.manifests.scaled_object import API_VERSION, scaled_object_spec
from contract.manifests.scaled_object import scaled_object as scaled_object_manifest
from contract.settings import NAMESPACE, StackSettings
from contract.settings.autoscaling import ModelAutoscaling, deep_merge
from contract.settings.capacity_planning import GpuPrices

# ConfigEdit, ConfigRemove and config_command are re-exported: the rest of the planning package
# reaches the settings only through this module.
from contract.settings.config_path import ConfigEdit as ConfigEdit
from contract.settings.config_path import ConfigRemove as ConfigRemove
from contract.settings.config_path import config_command as config_command
from contract.settings.config_path import edited_config, holds
from contract.settings.errors import SettingsError
from contract.settings.gpu_capacity import duration_seconds
from contract.settings.models import ModelSettings, quantity
from contract.settings.stack_file import StackFile, read_stack
from contract.signals import Scope, Workload
from contract.startup import StartupFigures, headroom_for, stack_startup
from contract.triggers import TRIGGERS, Trigger

# The merged autoscaling policy of one model, for modules that take it from here.
Policy = ModelAutoscaling

AUTOSCALING_KEY = f"{NAMESPACE}:autoscaling"
DEFAULT_SCRAPE_INTERVAL_S = 15.0


@dataclass(frozen=True)
class StackModel:
    """One model of one stack, with the policy to simulate."""

    stack: str
    monitored: MonitoredModel  # the model, its merged policy and the selectors the platform deploys
    profile: EngineProfile
    pools: tuple[Pool, ...]
    startup: Startup
    spot_interruptions_per_hour: float
    scrape_interval_s: float
    attainment_target: float  # capacityPlanning.attainmentTarget: what a plan must reach held out
    raw_autoscaling: dict[str, Any]  # the autoscaling section as written (for tune's edits)
    source: StackFile  # the stack file, to re-validate a changed policy
    # Warm headroom placeholders whose nodes this model's replicas take (contract.startup.headroom_for).
    headroom: int = 0
    # Where each startup figure comes from (contract/startup.py): derived from the start features, or the stack's.
    startup_figures: StartupFigures | None = None

    @property
    def model(self) -> ModelSettings:
        return self.monitored.model

    @property
    def routing(self) -> RouterName:
        """How the gateway picks the model's replica (`serving.routing`)."""
        return self.model.serving.routing

    @property
    def policy(self) -> ModelAutoscaling:
        return self.monitored.policy

    @property
    def pool_replicas(self) -> int:
        """The replicas the model's pools hold at once, as the simulator places them."""
        return replica_capacity(self.pools, self.model.gpus_per_replica)

    @functools.cached_property
    def gpu_prices(self) -> GpuPrices:
        """capacityPlanning.gpuHourlyPriceUsd; the pools carry the model's own (`GpuPrices.of`)."""
        return self.source.settings(self.raw_autoscaling).capacity_planning.gpu_hourly_price_usd

    @functools.cached_property
    def manifest(self) -> Manifest:
        """The model's ScaledObject as the platform renders it, read as the simulator runs it."""
        return stack_manifest(self.monitored, self.stack)

    def with_policy(self, autoscaling: dict[str, Any]) -> StackModel:
        """The same stack with another autoscaling section, validated like a deploy would."""
        settings = self.source.settings(autoscaling)
        return replace(self, monitored=_monitored(settings, self.model.name), raw_autoscaling=autoscaling)

    def with_policy_file(self, path: Path) -> StackModel:
        """The stack with a policy file laid over its autoscaling section (`overlay_policy`), after
        the file's `config:` edits, if it has any (`read_compared_file`)."""
        try:
            section, edits = read_compared_file(path)
            edited = apply_config_set(self, edits) if edits else self
            return edited.with_policy(overlay_policy(edited.raw_autoscaling, section))
        except ValueError as error:
            if str(error).startswith(f"policy file {path}"):
                raise
            raise ValueError(f"policy file {path} does not validate against stack {self.stack}: {error}") from None


def overlay_policy(stack_section: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """A policy file laid over the stack's autoscaling section as written, by the stack file's own
    merge rule (`deep_merge`: mappings merge key by key, lists and scalars replace): a file that sets
    one key changes that key, and keeps the stack's SLO, triggers and bounds unless it sets them."""
    return deep_merge(stack_section, policy)


def _monitored(settings: StackSettings, name: str) -> MonitoredModel:
    return next(m for m in monitored_models(settings) if m.name == name)


def read_policy_file(path: Path) -> dict[str, Any]:
    """An autoscaling section shaped like the stack's (`default:` and per-model blocks); a file
    that still carries the `inference-platform:autoscaling:` key is accepted too. `config:` edits
    are refused by name: only compare reads them (`read_compared_file`)."""
    section, edits = read_compared_file(path)
    if edits:
        raise ValueError(f"policy file {path}: `config:` edits are read by compare only; give an autoscaling section")
    return section


def read_compared_file(path: Path) -> tuple[dict[str, Any], list[ConfigEdit]]:
    """A policy file as compare reads it: (its autoscaling section, its `config:` edits). Beside
    the section, a document of `autoscaling:` and `config:` may carry `pulumi config set --path`
    edits (path: value, under `inference-platform:`), so one file can compare a policy with warm
    headroom or another startup (`gpuCapacity.headroom.placeholders: 2`)."""
    try:
        document = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ValueError(f"policy file {path}: {error.strerror.lower()}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"policy file {path}: not YAML{where} ({getattr(error, 'problem', None) or error})") from None
    if not isinstance(document, dict):
        raise ValueError(f"policy file {path}: expected a mapping like the stack's autoscaling section")
    edits: list[ConfigEdit] = []
    if "config" in document and set(document) <= {"config", "autoscaling"}:
        config = document["config"]
        if not isinstance(config, dict) or not all(isinstance(k, str) for k in config):
            raise ValueError(f"policy file {path}: `config:` must map setting paths to values")
        edits = list(config.items())
        document = document.get("autoscaling") or {}
    for key in (AUTOSCALING_KEY, "autoscaling"):
        if set(document) == {key}:
            document = document[key]
    return document, edits


def _stack_profile(name: str, model: ModelSettings, model_index: int | None) -> EngineProfile:
    where = f"{NAMESPACE}:models[{model_index}]" if model_index is not None else "--profile"
    try:
        device = _physics_device(name, model)
        if device is not None:  # any models.yaml checkpoint on any GPU, derived with the stack's flags
            named = PROFILES.get(name)
            profile = _derive_for_stack(name, model, device, named.description if named else "")
        else:
            profile = with_engine_flags(_profile(name, model_index), model)
    except TensorParallelError as exc:  # vLLM refuses --tensor-parallel-size for this model
        key = f"{where}.gpusPerReplica ({model.gpus_per_replica})" if model_index is not None else where
        raise ValueError(f"{key}: {exc}") from None
    except ValueError as exc:  # vLLM would not start with these flags on this GPU
        raise ValueError(f"{where}{'.engine' if model_index is not None else ''}: {exc}") from None
    # engine.prefixCaching: false renders --no-enable-prefix-caching (V0 never caches prefixes here)
    profile = replace(profile, prefix_caching=profile.prefix_caching and model.engine.prefix_caching)
    if not model.engine.lmcache_bytes:
        return profile
    try:
        return with_lmcache(profile, model.engine.lmcache_bytes)
    except ValueError as exc:
        where = f"{NAMESPACE}:models[{model_index}].engine.lmcache" if model_index is not None else "--profile"
        raise ValueError(f"{where}: {exc}") from None


def _profile(name: str, model_index: int | None) -> EngineProfile:
    """The engine profile; an unknown name from the stack points at its config key."""
    try:
        return get_profile(name)
    except ValueError as exc:
        if model_index is None:
            raise
        raise ValueError(
            f"{NAMESPACE}:models[{model_index}].capacityProfile ({name!r}): {exc}; fix the stack or pass --profile"
        ) from None


def _physics_device(name: str, model: ModelSettings) -> Gpu | None:
    """The GPU of a `<gpu>-<model short>` physics profile of this model's checkpoint, else None."""
    known = checkpoints().get(model.hugging_face_id)
    return next((g for gpu_name, g in gpus().items() if known and name == f"{gpu_name}-{known.short}"), None)


def stack_interconnect(model: ModelSettings, device: Gpu) -> Interconnect | None:
    """The link between the GPUs of one replica (None on one GPU): the interconnect of the
    model's pinned instance family of this GPU (contract/gpu.py GPU_OF_FAMILY), else of any
    family of this GPU; a GPU in no family with a known link cannot host a multi-GPU replica."""
    if model.gpus_per_replica == 1:
        return None
    families = [f for f, g in GPU_OF_FAMILY.items() if g == device.name]
    pinned = [f for f in model.instance_families or () if f in families]
    for family in [*pinned, *sorted(families)]:
        if family in family_interconnects():
            return interconnect(family)
    raise ValueError(f"no instance family with a known GPU interconnect carries {device.description}")


def _derive_for_stack(
    name: str, model: ModelSettings, device: Gpu, description: str = "", served: str = ""
) -> EngineProfile:
    engine = model.engine
    return derive(
        name,
        checkpoint(model.hugging_face_id),
        device,
        max_model_len=engine.max_model_len,
        max_num_seqs=engine.max_num_seqs,
        max_num_batched_tokens=engine.max_num_batched_tokens,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        description=description,
        served_model_name=served,
        tensor_parallel_size=model.gpus_per_replica,
        interconnect=stack_interconnect(model, device),
    )


def with_engine_flags(profile: EngineProfile, model: ModelSettings) -> EngineProfile:
    """A physics profile of this model (`<gpu>-<model short>`) re-derived with the stack's own
    engine flags and gpusPerReplica (tensor parallelism), so a committed maxNumSeqs,
    maxNumBatchedTokens, gpuMemoryUtilization, maxModelLen or GPU count is what the simulator
    runs; a measured profile (its flags fixed by the measurement) as it is, on one GPU only."""
    device = _physics_device(profile.name, model)
    if device is None:
        if model.gpus_per_replica != profile.tensor_parallel_size:
            raise ValueError(
                f"engine profile {profile.name} runs on {profile.tensor_parallel_size} GPU, not gpusPerReplica "
                f"{model.gpus_per_replica}: name a <gpu>-<model> physics profile, which is derived for that many"
            )
        return profile
    return _derive_for_stack(profile.name, model, device, profile.description, profile.served_model_name)


def load_stack_model(
    stack: str | Path,
    model: str | None = None,
    profile: str | None = None,
    policy_file: Path | None = None,
    root: Path | None = None,
    source: StackFile | None = None,
) -> StackModel:
    source = source or read_stack(stack, root)
    autoscaling = None
    if policy_file:
        policy = read_policy_file(policy_file)
        autoscaling = overlay_policy(dict(source.settings().autoscaling), policy)
    try:
        settings = source.settings(autoscaling)
    except ValueError as error:
        if policy_file is None:
            raise
        raise ValueError(f"policy file {policy_file} does not validate against stack {source.name}: {error}") from None
    names = [m.name for m in settings.models]
    name = model or names[0]
    if name not in names:
        raise ValueError(f"model {name!r} is not in stack {source.path.name}; models: {names}")
    chosen = settings.model(name)
    profile_name = profile or chosen.capacity_profile
    if not profile_name:
        raise ValueError(
            f"{NAMESPACE}:models[{names.index(name)}].capacityProfile is not set for {name!r}; set it or pass --profile"
        )
    plan = settings.capacity_planning
    prices = plan.gpu_hourly_price_usd.of(chosen.instance_families)  # where its replicas run
    pools = tuple(
        Pool(
            p.name,
            p.capacity_type,
            p.weight,
            p.gpu_limit,
            prices.spot if p.capacity_type == "spot" else prices.on_demand,
            duration_seconds(p.consolidate_after),
        )
        for p in settings.gpu_capacity.pools
        if chosen.families_in(p)  # a pool that launches none of the model's instanceFamilies never hosts it
    )
    figures = stack_startup(settings, chosen)
    startup = Startup(
        (figures.node_provisioning_s.low, figures.node_provisioning_s.high),
        (figures.image_pull_s.low, figures.image_pull_s.high),
        chosen.size_gib / figures.weight_load_gib_per_s.low,
        (figures.engine_init_s.low, figures.engine_init_s.high),
    )
    observability = getattr(settings, "observability", None)
    scrape = float(getattr(observability, "scrape_interval_seconds", DEFAULT_SCRAPE_INTERVAL_S))
    return StackModel(
        stack=source.name,
        monitored=_monitored(settings, name),
        profile=_stack_profile(profile_name, chosen, None if profile else names.index(name)),
        pools=pools,
        startup=startup,
        spot_interruptions_per_hour=plan.spot_interruptions_per_hour,
        scrape_interval_s=scrape,
        attainment_target=plan.attainment_target,
        raw_autoscaling=autoscaling if autoscaling is not None else dict(settings.autoscaling),
        source=source,
        headroom=headroom_for(settings, chosen),
        startup_figures=figures,
    )


# A rendered manifest names Observability's Prometheus; the simulator reads its own metric store.
SIMULATED_PROMETHEUS = "http://prometheus.simulated"


def stack_manifest(monitored: MonitoredModel, stack: str) -> Manifest:
    """The ScaledObject the platform deploys for this model (`contract.manifests`), read as
    KEDA would: the simulator's only way in, so the simulated policy is the deployed one."""
    return parse_scaled_object(scaled_object_manifest(monitored, SIMULATED_PROMETHEUS), f"of {stack}/{monitored.name}")


def policy_manifest(policy: ModelAutoscaling, triggers: Sequence[Trigger] = TRIGGERS) -> Manifest:
    """A bare policy's ScaledObject (no stack around it), rendered and read the same way."""
    target = ScaledTarget(policy, Scope("model", "serving"), Workload("serving", "model-predictor", "model-predictor"))
    document = {
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "spec": scaled_object_spec(target, SIMULATED_PROMETHEUS, triggers),
    }
    return parse_scaled_object(document, "of the policy", unnamed="policy")


def rendered_behavior(sm: StackModel) -> tuple[dict[str, Any], int]:
    """The HPA behaviour and maxReplicaCount of the model's ScaledObject as the platform renders
    it: what the policy pack judges."""
    spec = scaled_object_spec(sm.monitored, SIMULATED_PROMETHEUS)
    return spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"], spec["maxReplicaCount"]


def scaled_object(policy: ModelAutoscaling, triggers: Sequence[Trigger] = TRIGGERS) -> ScaledObject:
    """A fresh ScaledObject + HPA of a bare policy for one simulation run (both keep state)."""
    return policy_manifest(policy, triggers).scaled_object()


def pool_families(sm: StackModel) -> dict[str, tuple[str, ...]]:
    """The instance families each of the model's pools allows, by pool name: the GPU types a
    `gpu_type_edits` choice may pin (the stack requires a pinned family to be allowed by one of
    the model's pools). The model's current `instanceFamilies` do not narrow it, since they are
    the choice itself; where the pinned model can run now is `sm.pools`."""
    pools = sm.source.settings(sm.raw_autoscaling).gpu_capacity.pools
    return {p.name: tuple(p.instance_families) for p in pools if p.name in sm.model.pools}


@dataclass(frozen=True)
class Landing:
    """Where one replica of the model lands in an instance family: its predictor's requests, the
    DaemonSets every GPU node of the stack runs, and the smallest size holding both (None: none)."""

    family: str
    pod: Requests
    overhead: Requests
    size: InstanceSize | None


def landing(sm: StackModel, family: str) -> Landing:
    """The instance size of `family` a replica of the model lands on under the stack's provisioner
    (contract/instances.py: Karpenter's allocatable less the GPU node's DaemonSets)."""
    capacity = sm.source.settings(sm.raw_autoscaling).gpu_capacity
    overhead = daemonset_overhead(capacity.provisioner, capacity.node_class.needs_device_plugin)
    requests = sm.model.container_resources()["requests"]  # LMCache's host memory included
    pod = pod_requests(quantity(requests["cpu"]), quantity(requests["memory"]), sm.model.gpus_per_replica)
    return Landing(family, pod, overhead, landing_size(family, pod, overhead))


def replica_budget(sm: StackModel) -> int:
    """The most maxReplicas the stack lets this model have: what its pools hold (`pool_replicas`)
    after the ceilings it gives the other models there. The settings' GPU-budget rule: for every
    set of pools, the models confined to it fit its gpuLimit (maxReplicas x gpusPerReplica each)."""
    settings = sm.source.settings(sm.raw_autoscaling)
    pools = {p.name: p.gpu_limit for p in settings.gpu_capacity.pools}
    hosts = {m.name: {p.name for p in settings.gpu_capacity.pools if m.families_in(p)} for m in settings.models}
    others = {
        m.name: settings.autoscaling_for(m.name).max_replicas * m.gpus_per_replica
        for m in settings.models
        if m.name != sm.model.name
    }
    room = min(
        sum(pools[p] for p in within)
        - sum(gpus for name, gpus in others.items() if hosts[name] and hosts[name] <= within)
        for within in _pool_sets_holding(set(pools), hosts[sm.model.name])
    )
    return max(1, min(sm.pool_replicas, room // sm.model.gpus_per_replica))


def _pool_sets_holding(names: set[str], own: set[str]) -> list[set[str]]:
    """Every set of pools that contains all of `own`."""
    rest = sorted(names - own)
    return [own | set(extra) for size in range(len(rest) + 1) for extra in itertools.combinations(rest, size)]


def scope_sets(sm: StackModel, scope: str, path: str) -> bool:
    """Does the stack's `autoscaling.<scope>` block, as written, set the leaf at `path`?"""
    return holds(sm.raw_autoscaling.get(scope), path)


def model_index(sm: StackModel) -> int:
    """The model's position in `models` (its `pulumi config set --path 'models[i]...'` index)."""
    return [m.name for m in sm.source.settings(sm.raw_autoscaling).models].index(sm.model.name)


def gpu_type_edits(sm: StackModel, family: str, profile_name: str) -> list[ConfigEdit]:
    """The edits that deploy GPU type `family` for the model: `models[i].instanceFamilies` becomes
    exactly `[family]`, `models[i].capacityProfile` becomes `profile_name`.

    `pulumi config set --path` writes one leaf: a JSON list as the value is stored as a string
    (pulumi/pulumi sdk/go/common/resource/config/value.go `coerceObject` types only booleans and
    integers; `config set` has no --json, only `set-all --json`, which takes no paths), and
    `[n]` may only overwrite an element or append one (object.go `Set`: "array index out of
    range" past the end). So element 0 is set, and the elements after it of a longer pin are
    removed highest index first (object.go `Delete` shifts the later ones down)."""
    key = f"models[{model_index(sm)}]"
    pinned = sm.model.instance_families or []
    edits: list[ConfigEdit] = [(f"{key}.instanceFamilies[0]", family)]
    edits += [ConfigRemove(f"{key}.instanceFamilies[{k}]") for k in range(len(pinned) - 1, 0, -1)]
    edits.append((f"{key}.capacityProfile", profile_name))
    return edits


def apply_config_set(sm: StackModel, edits: Sequence[ConfigEdit]) -> StackModel:
    """The stack model after each edit as `pulumi config set --path KEY VALUE` (or `pulumi config
    rm --path KEY` for a ConfigRemove; keys under the program's namespace, e.g.
    `autoscaling.<model>.minReplicas`, `models[0].engine.maxNumSeqs`), validated by the
    contract's stack loader as a deploy would be; a ValueError says why not."""
    source = StackFile(sm.source.path, edited_config(sm.source.config, edits))
    try:
        # The stack's own capacityProfile (as edited) unless a --profile overrode it.
        override = None if sm.profile.name == sm.model.capacity_profile else sm.profile.name
        reloaded = load_stack_model(sm.stack, sm.model.name, override, None, sm.source.path.parent, source)
    except SettingsError as exc:
        raise ValueError(f"would not deploy: {'; '.join(exc.problems)}") from None
    return reloaded


def headroom_edits(sm: StackModel, placeholders: int) -> list[ConfigEdit]:
    """The edits that keep `placeholders` warm GPU nodes shaped like this model's replica
    (`gpuCapacity.headroom`; 0 turns the headroom off)."""
    return [("gpuCapacity.headroom.placeholders", placeholders), ("gpuCapacity.headroom.model", sm.model.name)]


def start_feature_edits(
    sm: StackModel,
    *,
    soci_parallel_pull: bool | None = None,
    weight_loader: str | None = None,
    compile_cache_storage_class: str | None = None,
) -> list[ConfigEdit]:
    """The edits that deploy these start features (None: leave the stack's as it is).
    SOCI parallel pull is a Karpenter EC2NodeClass setting (Auto Mode turns it on itself);
    the weight loader and the compile cache are predictor settings (serving.fastStart)."""
    edits: list[ConfigEdit] = []
    if soci_parallel_pull is not None:
        edits.append(("gpuCapacity.nodeClass.sociParallelPull", soci_parallel_pull))
    if weight_loader is not None:
        edits.append(("serving.fastStart.weightLoader", weight_loader))
    if compile_cache_storage_class is not None:
        edits.append(("serving.fastStart.compileCache.storageClass", compile_cache_storage_class))
    return edits


def with_headroom(sm: StackModel, placeholders: int) -> StackModel:
    """The stack model with `placeholders` warm nodes shaped like its replica, validated as a deploy
    (the GPU budget counts them; a ValueError says why not)."""
    return apply_config_set(sm, headroom_edits(sm, placeholders))


def with_start_features(
    sm: StackModel,
    *,
    soci_parallel_pull: bool | None = None,
    weight_loader: str | None = None,
    compile_cache_storage_class: str | None = None,
) -> StackModel:
    """The stack model with these start features deployed (see `start_feature_edits`); its startup
    follows from them unless the stack sets its own measured `capacityPlanning.startup` keys."""
    edits = start_feature_edits(
        sm,
        soci_parallel_pull=soci_parallel_pull,
        weight_loader=weight_loader,
        compile_cache_storage_class=compile_cache_storage_class,
    )
    return apply_config_set(sm, edits)
