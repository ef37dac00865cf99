"""The rules for what a real EKS cluster and operator hit first: Auto Mode tags and node lifetime,
enforced isolation, replicated request path, kept buckets, non-root GPU containers. The real
stacks pass them (test_policies.test_policy_passes_on_*); each has violating cases here, mutated
from what the program registers."""

from __future__ import annotations

import json
from typing import Any

from tests.harness import StackRun
from tests.policies.policy_harness import swap, with_inputs
from tests.policies.test_policies import (
    DISABLED_IN_DEV,
    assert_reported,
    check,
    check_stack,
    eks_cluster,
    first,
    meta_name,
    of_kind,
    serving_container,
    violates,
)

TAGS = "auto-mode-node-class-tags-permitted"
EXPIRE = "node-pools-expire-within-auto-mode-lifetime"
ENFORCED = "network-policies-enforced"
BEHIND_GATEWAY = "predictors-reachable-only-through-gateway"
REPLICAS = "no-single-replica-on-request-path"
FORCE_DESTROY = "buckets-keep-their-objects-on-destroy"
NON_ROOT = "gpu-containers-run-as-non-root"


def custom_tags_policy(run: StackRun):
    (found,) = [r for r in run.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("-custom-tags")]
    return found


# --- Auto Mode NodeClass tags ----------------------------------------------------------------


@violates(TAGS)
def test_node_class_tags_without_the_custom_tags_policy_are_reported(prod: StackRun) -> None:
    found = check_stack(TAGS, prod, custom_tags_policy(prod), None)
    assert_reported(found, TAGS, "NodeClass gpu", "spec.tags", "launch template")


@violates(TAGS)
def test_node_class_tags_with_pulumi_eks_own_cluster_role_are_reported(prod: StackRun) -> None:
    cluster = eks_cluster(prod)
    found = check_stack(TAGS, prod, cluster, with_inputs(cluster, lambda i: i.pop("serviceRole")))
    assert_reported(found, TAGS, "NodeClass gpu")


def test_a_policy_without_the_cluster_tag_condition_does_not_count(prod: StackRun) -> None:
    def unscoped(inputs: dict[str, Any]) -> None:
        document = json.loads(inputs["policy"])
        for statement in document["Statement"]:
            statement.pop("Condition", None)
        inputs["policy"] = json.dumps(document)

    tags_policy = custom_tags_policy(prod)
    assert_reported(check_stack(TAGS, prod, tags_policy, with_inputs(tags_policy, unscoped)), TAGS, "NodeClass gpu")


def test_an_untagged_node_class_needs_no_tags_policy(prod: StackRun) -> None:
    node_class = first(prod, "NodeClass")
    untagged = with_inputs(node_class, lambda i: i["spec"].pop("tags"))
    resources = swap(swap(prod.resources, node_class, untagged), custom_tags_policy(prod), None)
    assert check(TAGS, resources) == []


# --- expireAfter under Auto Mode ---------------------------------------------------------------


@violates(EXPIRE)
def test_auto_mode_pool_expiring_after_21_days_is_reported(prod: StackRun) -> None:
    pool = first(prod, "NodePool")
    mutated = with_inputs(pool, lambda i: i["spec"]["template"]["spec"].update(expireAfter="720h"))
    assert_reported(check(EXPIRE, [mutated]), EXPIRE, meta_name(pool), "720h", "21-day")


@violates(EXPIRE)
def test_auto_mode_pool_that_never_expires_is_reported(prod: StackRun) -> None:
    pool = first(prod, "NodePool")
    mutated = with_inputs(pool, lambda i: i["spec"]["template"]["spec"].update(expireAfter="Never"))
    assert_reported(check(EXPIRE, [mutated]), EXPIRE, meta_name(pool), "Never")


def test_self_managed_karpenter_pool_keeps_its_own_range(prod: StackRun) -> None:
    pool = first(prod, "NodePool")

    def karpenter(inputs: dict[str, Any]) -> None:
        template = inputs["spec"]["template"]["spec"]
        template.update(expireAfter="720h")
        template["nodeClassRef"].update(group="karpenter.k8s.aws", kind="EC2NodeClass")

    assert check(EXPIRE, [with_inputs(pool, karpenter)]) == []


# --- enforced NetworkPolicies ------------------------------------------------------------------


def controller_switch(run: StackRun):
    (found,) = [r for r in of_kind(run, "ConfigMap") if r.inputs["metadata"]["name"] == "amazon-vpc-cni"]
    return found


@violates(ENFORCED)
def test_network_policies_without_the_controller_switch_are_reported(prod: StackRun) -> None:
    assert_reported(
        check_stack(ENFORCED, prod, controller_switch(prod), None),
        ENFORCED,
        "not enforced",
        "enable-network-policy-controller",
    )


@violates(ENFORCED)
def test_network_policies_on_a_node_class_without_network_policy_are_reported(prod: StackRun) -> None:
    node_class = first(prod, "NodeClass")
    mutated = with_inputs(node_class, lambda i: i["spec"].pop("networkPolicy"))
    assert_reported(check_stack(ENFORCED, prod, node_class, mutated), ENFORCED, "NodeClass gpu", "networkPolicy")


@violates(ENFORCED)
def test_network_policies_without_auto_mode_need_the_vpc_cni_switch(prod: StackRun) -> None:
    cluster = eks_cluster(prod)
    standard = with_inputs(cluster, lambda i: i.pop("autoMode"))
    assert_reported(check_stack(ENFORCED, prod, cluster, standard), ENFORCED, "enableNetworkPolicy")
    switched = with_inputs(standard, lambda i: i.update(vpcCniOptions={"enableNetworkPolicy": True}))
    assert check_stack(ENFORCED, prod, cluster, switched) == []


# --- predictors only through the gateway --------------------------------------------------------


def network_policy(run: StackRun, name: str, namespace: str):
    (found,) = [
        r
        for r in of_kind(run, "NetworkPolicy")
        if (r.inputs["metadata"]["name"], r.inputs["metadata"]["namespace"]) == (name, namespace)
    ]
    return found


@violates(BEHIND_GATEWAY)
def test_predictor_namespace_without_default_deny_is_reported(prod: StackRun) -> None:
    namespace = first(prod, "InferenceService").inputs["metadata"]["namespace"]
    found = check_stack(BEHIND_GATEWAY, prod, network_policy(prod, "default-deny-ingress", namespace), None)
    assert_reported(found, BEHIND_GATEWAY, "no default-deny", "past the gateway")


@violates(BEHIND_GATEWAY)
def test_predictor_policy_admitting_any_source_is_reported(prod: StackRun) -> None:
    namespace = first(prod, "InferenceService").inputs["metadata"]["namespace"]
    predictors = network_policy(prod, "predictors", namespace)
    for opened in (
        {"ports": [{"port": 8080}]},
        {"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]},
        {"from": [{"namespaceSelector": {}}]},
    ):
        mutated = with_inputs(predictors, lambda i, rule=opened: i["spec"]["ingress"].append(rule))
        assert_reported(
            check_stack(BEHIND_GATEWAY, prod, predictors, mutated), BEHIND_GATEWAY, "NetworkPolicy", "not named pods"
        )


# --- no single replica on the prod request path -----------------------------------------------------


def redis(run: StackRun):
    return first(run, "StatefulSet")


@violates(REPLICAS)
def test_single_replica_rate_limit_store_is_reported(prod: StackRun) -> None:
    mutated = with_inputs(redis(prod), lambda i: i["spec"].update(replicas=1))
    assert_reported(check(REPLICAS, [mutated]), REPLICAS, "StatefulSet", "1 replica")


@violates(REPLICAS)
def test_single_envoy_proxy_and_rate_limit_service_are_reported(dev: StackRun) -> None:
    found = check(REPLICAS, dev.resources)
    assert_reported(found, REPLICAS, "Envoy proxies", "1 replica")
    assert_reported(found, REPLICAS, "the rate-limit service", "1 replica")


def test_dev_config_disables_the_replica_and_force_destroy_rules() -> None:
    assert {REPLICAS, FORCE_DESTROY} <= DISABLED_IN_DEV


# --- buckets kept on destroy ------------------------------------------------------------------------


@violates(FORCE_DESTROY)
def test_force_destroy_bucket_is_reported(dev: StackRun) -> None:
    (bucket,) = dev.of_type("aws:s3/bucket:Bucket")
    assert_reported(check(FORCE_DESTROY, [bucket]), FORCE_DESTROY, "forceDestroy")


def test_prod_model_store_is_kept(prod: StackRun) -> None:
    assert check(FORCE_DESTROY, prod.of_type("aws:s3/bucket:Bucket")) == []


# --- GPU containers as non-root ---------------------------------------------------------------------


@violates(NON_ROOT)
def test_gpu_container_allowed_to_run_as_root_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")

    def rootable(inputs: dict[str, Any]) -> None:
        inputs["spec"]["predictor"].pop("securityContext")
        serving_container(inputs)["securityContext"].pop("runAsNonRoot")

    assert_reported(check(NON_ROOT, [with_inputs(isvc, rootable)]), NON_ROOT, meta_name(isvc), "run as root")


@violates(NON_ROOT)
def test_gpu_container_as_uid_zero_or_escalating_is_reported(prod: StackRun) -> None:
    isvc = first(prod, "InferenceService")
    as_root = with_inputs(isvc, lambda i: serving_container(i)["securityContext"].update(runAsUser=0))
    assert_reported(check(NON_ROOT, [as_root]), NON_ROOT, "run as root")
    escalating = with_inputs(
        isvc, lambda i: serving_container(i)["securityContext"].update(allowPrivilegeEscalation=True)
    )
    assert_reported(check(NON_ROOT, [escalating]), NON_ROOT, "privilege escalation")


def test_non_gpu_containers_are_not_this_rules_business(prod: StackRun) -> None:
    mutated = with_inputs(redis(prod), lambda i: i["spec"]["template"]["spec"].pop("securityContext"))
    assert check(NON_ROOT, [mutated]) == []
