"""Settings refuse a predictor whose requests fit no instance size its pools launch, in one line
naming the key and the largest allocatable (issue 22, item 5; sizes: contract/instances.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contract.settings import SettingsError
from contract.settings.stack_file import StackFile, read_stack
from tests.harness import ROOT

NS = "inference-platform"


def prod_with_requests(cpu: str, memory: str) -> dict[str, Any]:
    """Prod with its first model pinned to g6 (the L4 profile) and these requests."""
    config = copy.deepcopy(read_stack("prod", ROOT).config)
    config[f"{NS}:models"][0] |= {"instanceFamilies": ["g6"], "capacityProfile": "l4-qwen2.5-14b-awq"}
    config[f"{NS}:models"][0]["resources"] = {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"cpu": cpu, "memory": memory},
    }
    return config


def settings(config: dict[str, Any]):
    return StackFile(ROOT / "Pulumi.prod.yaml", config).settings()


def test_memory_beyond_every_size_of_the_pinned_family_is_refused_naming_the_largest():
    with pytest.raises(SettingsError) as caught:
        settings(prod_with_requests("3", "800Gi"))
    (problem,) = caught.value.problems
    assert problem.startswith(f"{NS}:models[0].resources.requests (cpu 3, memory 800Gi, 1 GPU)")
    assert "fit no instance size the model's pools launch (['g6'])" in problem
    assert problem.endswith("the largest allocatable is g6.48xlarge: 191450m CPU, 718987Mi memory, 8 GPUs")


def test_cpu_beyond_every_size_is_refused():
    with pytest.raises(SettingsError) as caught:
        settings(prod_with_requests("200", "14Gi"))
    (problem,) = caught.value.problems
    assert problem.startswith(f"{NS}:models[0].resources.requests (cpu 200,")


def test_the_gpu_nodes_daemonsets_count_against_the_largest_size():
    # g6.48xlarge allocates 718987Mi; Auto Mode's GPU-node DaemonSets request 376Mi of it.
    fits = settings(prod_with_requests("3", f"{718987 - 376}Mi"))
    assert fits.models[0].resources.requests.memory == "718611Mi"
    with pytest.raises(SettingsError):
        settings(prod_with_requests("3", f"{718987 - 375}Mi"))


def test_a_request_another_allowed_family_holds_is_accepted():
    # Unpinned, the model may land on g5 or g6; g5.48xlarge allocates 723299Mi, more than g6's 718987Mi.
    config = prod_with_requests("3", "720000Mi")
    del config[f"{NS}:models"][0]["instanceFamilies"]
    del config[f"{NS}:models"][0]["capacityProfile"]
    assert settings(config).models[0].resources.requests.memory == "720000Mi"


def test_lmcache_host_memory_counts_toward_the_size_a_replica_needs():
    from tests.contract.test_kv_cache_settings import KV_CONNECTOR_IMAGE

    config = prod_with_requests("3", "600Gi")  # fits g6.48xlarge alone
    config[f"{NS}:models"][0]["engine"]["lmcache"] = "200Gi"
    config[f"{NS}:models"][0]["image"] = KV_CONNECTOR_IMAGE
    with pytest.raises(SettingsError) as caught:
        settings(config)
    (problem,) = caught.value.problems
    assert problem.startswith(f"{NS}:models[0].resources.requests (cpu 3, memory 800Gi, 1 GPU)")
