"""The inference platform's CrossGuard policies, importable without starting a policy pack
(tests call each policy's `validate` directly; `policies/__main__.py` builds the pack)."""

from __future__ import annotations

from pulumi_policy import Policy

from . import (
    admission,
    backends,
    cluster,
    endpoint_picker,
    first_deploy,
    gateway,
    gpu,
    identity,
    isolation,
    network,
    operators,
    scaling,
    serving,
    storage,
    supply_chain,
    workloads,
)

PACK_NAME = "inference-platform"

POLICIES: list[Policy] = [
    *scaling.POLICIES,
    *gpu.POLICIES,
    *storage.POLICIES,
    *supply_chain.POLICIES,
    *gateway.POLICIES,
    *serving.POLICIES,
    *cluster.POLICIES,
    *isolation.POLICIES,
    *first_deploy.POLICIES,
    *identity.POLICIES,
    *workloads.POLICIES,
    *backends.POLICIES,
    *network.POLICIES,
    *endpoint_picker.POLICIES,
    *admission.POLICIES,
    *operators.POLICIES,
]

BY_NAME: dict[str, Policy] = {policy.name: policy for policy in POLICIES}
if len(BY_NAME) != len(POLICIES):
    raise RuntimeError("policy names must be unique within the pack")
