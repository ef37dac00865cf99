"""Red-team checks over what each stack renders, read the way an attacker would, without the
policy pack: the four gaps of issue 38 stay closed on dev and prod.

1. every image a pod runs is pinned by digest (a re-pushed tag cannot change what runs);
2. the EKS secrets key has a key policy of its own: nobody account-wide may use it, the cluster
   role may (KMS Developer Guide, "Default key policy": without one, any identity policy granting
   kms:Decrypt on "*" decrypts every Secret);
3. the only namespace that enforces the `privileged` Pod Security level holds the host-level
   exporters alone; Prometheus, Grafana and Alertmanager run under `baseline` or better;
4. every LoadBalancer Service admits named source ranges, none of them every address.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator
from typing import Any

from contract.settings.stack_file import load_stack
from tests.harness import ROOT, StackRun

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
RELEASE = "kubernetes:helm.sh/v3:Release"
# Actions that read or write what a KMS key protects (kms:* and the wildcards included).
KEY_USE = re.compile(r"^kms:(\*|Decrypt|Encrypt|GenerateDataKey.*|ReEncrypt.*)$", re.I)


def _images(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "image" and isinstance(item, str):
                yield item
            else:
                yield from _images(item)
    elif isinstance(value, list):
        for item in value:
            yield from _images(item)


def test_every_image_a_pod_runs_is_pinned_by_digest(stack: StackRun) -> None:
    images = {image for r in stack.kubernetes_objects() for image in _images(r.inputs)}
    assert len(images) >= 3  # vLLM (predictor and its gate), the model-sync Job's python, Redis
    assert sorted(i for i in images if not DIGEST.search(i)) == []


def _principals(statement: dict[str, Any]) -> list[str]:
    principal = statement.get("Principal")
    if isinstance(principal, str):
        return [principal]
    values = [v for v in (principal or {}).values()]
    return [p for v in values for p in ([v] if isinstance(v, str) else v)]


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement.get("Action", [])
    return [actions] if isinstance(actions, str) else list(actions)


def test_nobody_account_wide_may_use_the_eks_secrets_key_and_the_cluster_role_may(stack: StackRun) -> None:
    (cluster,) = stack.of_type("eks:index:Cluster")
    (key,) = [
        k for k in stack.of_type("aws:kms/key:Key") if cluster.inputs["encryptionConfigKeyArn"].endswith(":" + k.name)
    ]
    assert key.inputs.get("policy"), "the secrets key is on KMS's default key policy"
    statements = [s for s in json.loads(key.inputs["policy"])["Statement"] if s["Effect"] == "Allow"]
    for statement in statements:
        wide = [p for p in _principals(statement) if p == "*" or p.endswith(":root")]
        assert not (wide and [a for a in _actions(statement) if KEY_USE.match(a)]), statement
    role = stack.named(cluster.inputs["serviceRole"].rsplit("::", 1)[1])
    users = [s for s in statements if any(p.endswith(":" + role.name) for p in _principals(s))]
    assert users and {"kms:Decrypt", "kms:Encrypt"} <= {a for s in users for a in _actions(s)}


def _enforced(stack: StackRun) -> dict[str, str]:
    found: dict[str, str] = {}
    for r in stack.of_kind("v1", "Namespace") + stack.of_kind("v1", "NamespacePatch"):
        level = (r.inputs["metadata"].get("labels") or {}).get(PSA_ENFORCE)
        if level:
            found[r.inputs["metadata"]["name"]] = level
    return found


def test_only_the_host_level_exporters_run_in_a_privileged_namespace(stack: StackRun) -> None:
    enforced = _enforced(stack)
    privileged = {ns for ns, level in enforced.items() if level == "privileged"}
    releases = {r.inputs["chart"]: r.inputs for r in stack.of_type(RELEASE)}
    stack_release = releases["kube-prometheus-stack"]
    node_exporter_namespace = stack_release["values"]["prometheus-node-exporter"]["namespaceOverride"]
    assert privileged == {releases["dcgm-exporter"]["namespace"]} == {node_exporter_namespace}
    assert [chart for chart, r in releases.items() if r["namespace"] in privileged] == ["dcgm-exporter"]
    # Prometheus, Grafana, Alertmanager, the operator, kube-state-metrics.
    assert enforced[stack_release["namespace"]] in ("baseline", "restricted")


def test_every_load_balancer_admits_named_ranges_and_none_is_every_address(stack: StackRun) -> None:
    balancers = [r.inputs for r in stack.of_kind("v1", "Service") if r.inputs["spec"].get("type") == "LoadBalancer"]
    assert balancers
    vpc = ipaddress.ip_network(load_stack(stack.stack, ROOT).network.cidr)
    for service in balancers:
        ranges = [ipaddress.ip_network(r) for r in service["spec"].get("loadBalancerSourceRanges", [])]
        assert ranges and all(r.prefixlen > 0 for r in ranges), service["metadata"]["name"]
        assert all(r.subnet_of(vpc) for r in ranges), ranges  # both committed stacks admit their VPC only
