"""What a committed stack costs, needs and takes, computed from its settings: the table the Deploy page
quotes (tests/docs/test_deploy_page.py fails when a stack change moves a number the page does not)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from capacity.planning.stack import landing, load_stack_model, read_stack

STACKS = ("dev", "prod")


@dataclass(frozen=True)
class StackFacts:
    stack: str
    region: str
    zones: int
    warm: dict[str, int]  # instance size -> replicas kept warm (sum of minReplicas x GPUs per node)
    warm_usd_spot: float  # the warm fleet's price per hour, all on spot
    warm_usd_on_demand: float  # ... all on demand
    ceiling_usd: float  # every pool at its gpuLimit, at its capacity type's price
    quota_vcpus: dict[str, int]  # capacity type -> G-family vCPUs the pools may launch
    start_seconds: tuple[float, float]  # one replica of the largest model: fastest, slowest start


def facts(stack: str, root: Path) -> StackFacts:
    source = read_stack(stack, root)
    settings = source.settings()
    warm: dict[str, int] = {}
    spot = on_demand = 0.0
    per_gpu_vcpus: dict[str, int] = {}
    for model in settings.models:
        sm = load_stack_model(stack, model.name, root=root)
        family = (model.instance_families or sm.model.landing_families(settings.gpu_capacity.pools))[0]
        size = landing(sm, family).size
        assert size is not None, f"{stack}/{model.name} lands on no size of {family}"
        replicas = settings.autoscaling_for(model.name).min_replicas
        warm[size.name] = warm.get(size.name, 0) + replicas
        prices = settings.capacity_planning.gpu_hourly_price_usd.of(model.instance_families)
        spot += replicas * model.gpus_per_replica * prices.spot
        on_demand += replicas * model.gpus_per_replica * prices.on_demand
        for pool in model.pools:
            per_gpu_vcpus[pool] = max(per_gpu_vcpus.get(pool, 0), size.vcpus // size.gpus)
    prices = settings.capacity_planning.gpu_hourly_price_usd
    ceiling = 0.0
    quota: dict[str, int] = {}
    for pool in settings.gpu_capacity.pools:
        price = prices.spot if pool.capacity_type == "spot" else prices.on_demand
        ceiling += pool.gpu_limit * price
        quota[pool.capacity_type] = quota.get(pool.capacity_type, 0) + pool.gpu_limit * per_gpu_vcpus.get(pool.name, 0)
    startup = settings.capacity_planning.startup
    largest = max(m.size_gib for m in settings.models)
    load = largest / startup.weight_load_gib_per_second
    fastest = (
        startup.node_provisioning_seconds.min + startup.image_pull_seconds.min + load + startup.engine_init_seconds.min
    )
    slowest = (
        startup.node_provisioning_seconds.max + startup.image_pull_seconds.max + load + startup.engine_init_seconds.max
    )
    region = str(source.config.get("aws:region", "(aws:region unset)"))
    return StackFacts(
        stack,
        region,
        len(settings.network.availability_zones),
        warm,
        spot,
        on_demand,
        ceiling,
        quota,
        (fastest, slowest),
    )


def table(root: Path) -> str:
    """The Deploy page's table, one row per committed stack."""
    rows = [
        "| stack | region, zones | kept warm | warm fleet $/h (spot / on demand) | at the pools' limits $/h | G and VT vCPU quota (spot / on demand) | a replica starts in |",
        "|---|---|---|---|---|---|---|",
    ]
    for stack in STACKS:
        f = facts(stack, root)
        warm = ", ".join(f"{n} x {size}" for size, n in sorted(f.warm.items()))
        rows.append(
            f"| {stack} | {f.region}, {f.zones} | {warm} | {f.warm_usd_spot:.2f} / {f.warm_usd_on_demand:.2f} "
            f"| {f.ceiling_usd:.2f} | {f.quota_vcpus.get('spot', 0)} / {f.quota_vcpus.get('on-demand', 0)} "
            f"| {f.start_seconds[0] / 60:.1f}-{f.start_seconds[1] / 60:.1f} min |"
        )
    return "\n".join(rows)
