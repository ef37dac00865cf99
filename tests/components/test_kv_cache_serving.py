"""The predictor's cache flags (issue 26, item 3): vLLM's prefix cache stays its own default, off
is an explicit flag; LMCache attaches as vLLM's KV connector with its CPU tier counted in the pod."""

from __future__ import annotations

from typing import Any

from components.serving.objects import LMCACHE_KV_TRANSFER_CONFIG, container, vllm_args
from contract.settings.models import ModelSettings
from contract.settings.serving import ServingSettings
from tests.contract.test_kv_cache_settings import KV_CONNECTOR_IMAGE


def model(**engine: Any) -> ModelSettings:
    return ModelSettings.model_validate(
        {
            "name": "qwen",
            "huggingFaceId": "Qwen/Qwen2.5-7B-Instruct-AWQ",
            "revision": "b25037543e9394b818fdfca67ab2a00ecc7dd641",
            "sizeGiB": 5.6,
            "engine": engine,
            **({"image": KV_CONNECTOR_IMAGE} if "lmcache" in engine else {}),
        }
    )


def env_of(spec: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in spec["env"]}


def test_the_default_renders_no_cache_flag_and_no_lmcache() -> None:
    args = vllm_args(model())
    assert not [a for a in args if "prefix-caching" in a or "kv-transfer" in a]
    assert not [name for name in env_of(container(model(), ServingSettings())) if name.startswith("LMCACHE_")]


def test_prefix_caching_off_is_vllms_negative_flag() -> None:
    assert "--no-enable-prefix-caching" in vllm_args(model(prefixCaching=False))


def test_lmcache_is_the_lmcache_connector_with_its_cpu_tier_in_gib_and_in_the_memory_request() -> None:
    m = model(lmcache="24Gi")
    assert f"--kv-transfer-config={LMCACHE_KV_TRANSFER_CONFIG}" in vllm_args(m)
    assert LMCACHE_KV_TRANSFER_CONFIG == '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
    spec = container(m, ServingSettings())
    env = env_of(spec)
    assert env["LMCACHE_LOCAL_CPU"] == "True" and env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "24"
    # the defaults (14Gi / 15Gi) plus the 24Gi tier
    assert spec["resources"]["requests"]["memory"] == "38Gi"
    assert spec["resources"]["limits"]["memory"] == "39Gi"
