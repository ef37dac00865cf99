"""Per-model routing, prefix caching and LMCache (issue 26, item 3): defaults leave both stacks as
they were, and a bad value or combination is refused in one line that names its key."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from contract.settings import SettingsError
from contract.settings.models import ModelSettings
from contract.settings.stack_file import StackFile, read_stack
from tests.harness import ROOT

NS = "inference-platform"
MODELS = f"{NS}:models"
# An operator's own build of the pinned vLLM release with vLLM's INSTALL_KV_CONNECTORS=true (its
# docker/Dockerfile then installs requirements/kv_connectors.txt, lmcache among them), in their registry,
# pinned by the digest their push printed (the pack requires one).
KV_CONNECTOR_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/vllm-openai-kv-connectors:v0.25.1@sha256:" + "c" * 64


def config_of(stack: str) -> dict[str, Any]:
    return copy.deepcopy(read_stack(stack, ROOT).config)


def settings_of(config: dict[str, Any], stack: str = "prod") -> Any:
    return StackFile(ROOT / f"Pulumi.{stack}.yaml", config).settings()


def one_problem(config: dict[str, Any]) -> str:
    with pytest.raises(SettingsError) as caught:
        settings_of(config)
    (problem,) = caught.value.problems
    return problem


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_committed_stacks_route_least_request_with_prefix_caching_and_no_lmcache(stack: str) -> None:
    for model in settings_of(config_of(stack), stack).models:
        assert model.serving.routing == "least-request"
        assert model.engine.prefix_caching is True  # vLLM's own default (vllm/config/cache.py)
        assert model.engine.lmcache is None
        assert model.container_resources() == {
            "requests": {"cpu": model.resources.requests.cpu, "memory": model.resources.requests.memory},
            "limits": {"cpu": model.resources.limits.cpu, "memory": model.resources.limits.memory},
        }


def test_the_endpoint_picker_and_lmcache_are_accepted_per_model() -> None:
    config = config_of("prod")
    config[MODELS][0]["serving"] = {"routing": "endpoint-picker"}
    config[MODELS][0]["engine"]["lmcache"] = "16Gi"
    config[MODELS][0]["image"] = KV_CONNECTOR_IMAGE
    first, second = settings_of(config).models
    assert first.serving.routing == "endpoint-picker" and first.engine.lmcache_bytes == 16 * 2**30
    assert second.serving.routing == "least-request" and second.engine.lmcache_bytes == 0


def test_lmcache_memory_is_added_to_the_pods_memory_request_and_limit() -> None:
    model = ModelSettings.model_validate(
        {
            "name": "m",
            "huggingFaceId": "Qwen/Qwen2.5-7B-Instruct-AWQ",
            "revision": "b25037543e9394b818fdfca67ab2a00ecc7dd641",
            "sizeGiB": 5.6,
            "engine": {"lmcache": "16Gi"},
            "image": KV_CONNECTOR_IMAGE,
            "resources": {"requests": {"cpu": "3", "memory": "14Gi"}, "limits": {"cpu": "4", "memory": "15Gi"}},
        }
    )
    assert model.container_resources() == {
        "requests": {"cpu": "3", "memory": "30Gi"},
        "limits": {"cpu": "4", "memory": "31Gi"},
    }


def test_an_unknown_routing_is_refused_naming_the_key() -> None:
    config = config_of("prod")
    config[MODELS][1]["serving"] = {"routing": "round-robin"}
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[1].serving.routing") and "least-request" in problem


def test_the_endpoint_picker_without_prefix_caching_is_refused_naming_routing() -> None:
    config = config_of("prod")
    config[MODELS][0]["serving"] = {"routing": "endpoint-picker"}
    config[MODELS][0]["engine"]["prefixCaching"] = False
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[0].serving.routing") and "engine.prefixCaching" in problem


@pytest.mark.parametrize("value", ["16", "512Mi", "500m", "16GB", "lots"])
def test_lmcache_below_a_gib_or_not_in_bytes_is_refused_naming_the_key(value: str) -> None:
    config = config_of("prod")
    config[MODELS][0]["engine"]["lmcache"] = value
    config[MODELS][0]["image"] = KV_CONNECTOR_IMAGE
    assert one_problem(config).startswith(f"{NS}:models[0].engine.lmcache")


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.25.1", "docker.io/vllm/vllm-openai@sha256:" + "a" * 64])
def test_lmcache_on_the_stock_vllm_image_is_refused_naming_the_key(image: str) -> None:
    # vllm docker/Dockerfile: ARG INSTALL_KV_CONNECTORS=false, lmcache installed only when true
    config = config_of("prod")
    config[MODELS][0]["engine"]["lmcache"] = "16Gi"
    config[MODELS][0]["image"] = image
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[0].engine.lmcache") and "INSTALL_KV_CONNECTORS" in problem


@pytest.mark.parametrize(
    ("flag", "owner"),
    [
        ("--enable-prefix-caching", "engine.prefixCaching"),
        ("--no-enable-prefix-caching", "engine.prefixCaching"),
        ('--kv-transfer-config={"kv_connector":"LMCacheConnectorV1"}', "engine.lmcache"),
        ("--kv-offloading-backend=lmcache", "engine.lmcache"),
    ],
)
def test_cache_flags_in_extra_args_are_refused_naming_their_setting(flag: str, owner: str) -> None:
    config = config_of("prod")
    config[MODELS][0]["engine"]["extraArgs"] = [flag]
    problem = one_problem(config)
    assert problem.startswith(f"{NS}:models[0].engine.extraArgs") and owner in problem
