"""Node lifetime within what the provisioner honours: EKS Auto Mode replaces every node after at
most 21 days (EKS user guide, Auto Mode features; a NodePool may only lower it), so a longer
`expireAfter` would be silently ineffective there (issue 14, item 2)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from contract.settings import SettingsError, parse
from contract.settings.errors import problems_of
from contract.settings.gpu_capacity import AUTO_MODE_MAX_NODE_LIFETIME_S, GpuCapacitySettings, duration_seconds
from contract.settings.stack_file import namespace_config, read_stack
from tests.harness import ROOT


def pools(expire_after: str) -> list[dict[str, object]]:
    return [
        {"name": "gpu-spot", "capacityType": "spot", "weight": 100, "gpuLimit": 4, "expireAfter": expire_after},
        {"name": "gpu-on-demand", "capacityType": "on-demand", "weight": 10, "gpuLimit": 4},
    ]


def test_the_default_lifetime_fits_auto_mode() -> None:
    default = GpuCapacitySettings().pools[0].expire_after
    assert duration_seconds(default) <= AUTO_MODE_MAX_NODE_LIFETIME_S


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_both_stacks_keep_nodes_within_auto_modes_limit(stack: str) -> None:
    settings = read_stack(stack, ROOT).settings()
    assert all(duration_seconds(p.expire_after) <= AUTO_MODE_MAX_NODE_LIFETIME_S for p in settings.gpu_capacity.pools)


@pytest.mark.parametrize("expire_after", ["720h", "505h", "Never"])
def test_auto_mode_rejects_a_lifetime_beyond_21_days_naming_the_pool(expire_after: str) -> None:
    with pytest.raises(ValidationError) as caught:
        GpuCapacitySettings.model_validate({"provisioner": "auto-mode", "pools": pools(expire_after)})
    (problem,) = problems_of(caught.value, ("gpuCapacity",))
    assert problem.startswith("inference-platform:gpuCapacity.pools[0].expireAfter")
    assert "504h (21 days)" in problem


def test_auto_mode_accepts_exactly_21_days() -> None:
    GpuCapacitySettings.model_validate({"provisioner": "auto-mode", "pools": pools("504h")})


def test_self_managed_karpenter_keeps_its_own_range() -> None:
    settings = GpuCapacitySettings.model_validate({"provisioner": "karpenter", "pools": pools("720h")})
    assert settings.pools[0].expire_after == "720h"


def test_the_stack_error_names_the_key() -> None:
    raw = namespace_config(read_stack("prod", ROOT).config)
    with pytest.raises(SettingsError, match=r"inference-platform:gpuCapacity\.pools\[0\]\.expireAfter \('720h'\)"):
        parse({**raw, "gpuCapacity": {"pools": pools("720h")}})
