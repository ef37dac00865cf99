"""Serving component: installs cert-manager and KServe from their charts, then applies the
objects of `objects.py` (one vLLM InferenceService per model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from contract import names
from contract.settings.models import ModelSettings
from contract.settings.serving import ServingSettings

from .. import isolation
from ..helm import helm_release
from ..naming import type_token
from .objects import (
    CERT_MANAGER_CHART,
    CERT_MANAGER_NAMESPACE,
    CERT_MANAGER_VERSION,
    INFERENCE_EXTENSION_CRDS,
    INFERENCE_EXTENSION_VERSION,
    INFERENCEPOOL_CHART,
    KSERVE_CHART,
    KSERVE_CRD_CHART,
    KSERVE_VERSION,
    PREDICTOR_KEY_FIELD,
    PREDICTOR_KEY_SECRET,
    compile_cache_claim,
    endpoint_picker_egress_policy,
    endpoint_picker_network_policy,
    endpoint_picker_pdb,
    endpoint_picker_peer,
    inference_pool,
    inference_pool_values,
    inference_service,
    kserve_values,
    pod_disruption_budget,
    predictor_network_policy,
    routes_by_endpoint_picker,
    service_account,
    service_host,
)


@dataclass(frozen=True)
class ModelReplicas:
    min: int
    max: int


@dataclass(frozen=True)
class ServingArgs:
    settings: ServingSettings
    models: list[ModelSettings]
    # Model name -> its autoscaling bounds (the ScaledObject scales between them).
    replicas: dict[str, ModelReplicas]
    # The weights claims (ModelStore) and model-sync Jobs the predictors wait for.
    depends_on: list[pulumi.Resource]
    provider: k8s.Provider
    # NetworkPolicy peers that may call the predictors' port (the gateway's proxies).
    predictor_peers: list[dict[str, Any]]
    # The GPU nodes' instance-family label (GpuCapacity's provisioner): pins models to their families.
    instance_family_label: str
    # NetworkPolicy peers that call an endpoint picker's ext-proc port (the gateway's proxies).
    endpoint_picker_callers: list[dict[str, Any]]
    # Endpoint-picker replicas per pool (more than one: active-passive with leader election).
    endpoint_picker_replicas: int
    # Where the endpoint picker reaches the Kubernetes API (the VPC: the control plane's ENIs).
    api_server_cidr: str
    # NetworkPolicy peers that may scrape the metrics-only port (Prometheus).
    metrics_peers: list[dict[str, Any]] = field(default_factory=list)


class Serving(pulumi.ComponentResource):
    service_hosts: dict[str, str]
    # Model name -> its InferencePool (name, namespace), for models routed by the endpoint picker.
    inference_pools: dict[str, dict[str, str]]
    # What the gateway's InferencePool objects wait for (the CRDs and each pool's chart release).
    inference_pool_releases: list[pulumi.Resource]
    # The key every predictor requires; only the gateway gets the other copy.
    backend_api_key: pulumi.Output[str]

    def __init__(self, name: str, args: ServingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("serving", "Serving"), name, None, opts)
        s = args.settings
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        cert_manager = helm_release(
            f"{name}-cert-manager",
            CERT_MANAGER_CHART,
            CERT_MANAGER_VERSION,
            CERT_MANAGER_NAMESPACE,
            k8s_opts,
            create_namespace=True,
            # KServe's webhook certificates are cert-manager Certificates.
            values={"crds": {"enabled": True}},
            atomic=True,
        )
        crds = helm_release(
            f"{name}-kserve-crd",
            KSERVE_CRD_CHART,
            KSERVE_VERSION,
            s.kserve_namespace,
            k8s_opts,
            create_namespace=True,
        )
        kserve = helm_release(
            f"{name}-kserve",
            KSERVE_CHART,
            KSERVE_VERSION,
            s.kserve_namespace,
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[cert_manager, crds])),
            create_namespace=True,
            values=kserve_values(),
            atomic=True,
        )

        isolated = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=args.depends_on))
        for logical, policy in (
            ("default-deny", isolation.default_deny_ingress(s.namespace)),
            (
                "predictors",
                predictor_network_policy(
                    s, [*args.predictor_peers, *endpoint_picker_peer(args.models)], args.metrics_peers
                ),
            ),
            # Predictors call nothing (weights come through the Mountpoint volume, the Hub is off):
            # a compromised engine reaches no internet, IMDS, Kubernetes API, Prometheus or rate limiter.
            ("deny-egress", isolation.default_deny_egress(s.namespace)),
            ("dns", isolation.dns_egress(s.namespace)),
        ):
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{logical}", metadata=policy["metadata"], spec=policy["spec"], opts=isolated
            )
        key = random.RandomPassword(
            f"{name}-backend-key", length=48, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        self.backend_api_key = pulumi.Output.secret(key.result)
        key_secret = k8s.core.v1.Secret(
            f"{name}-backend-key",
            metadata={"name": PREDICTOR_KEY_SECRET, "namespace": s.namespace, "labels": names.PART_OF},
            type="Opaque",
            string_data={PREDICTOR_KEY_FIELD: self.backend_api_key},
            opts=isolated,
        )

        cache: list[pulumi.Resource] = []
        claim = compile_cache_claim(s)
        if claim is not None:  # predictors share one torch.compile cache (serving.fastStart.compileCache)
            cache.append(
                k8s.core.v1.PersistentVolumeClaim(
                    f"{name}-compile-cache", metadata=claim["metadata"], spec=claim["spec"], opts=isolated
                )
            )

        self.service_hosts = {}
        for model in args.models:
            replicas = args.replicas[model.name]
            model_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
            account = service_account(model, s)
            sa = k8s.core.v1.ServiceAccount(
                f"{name}-{model.name}",
                metadata=account["metadata"],
                automount_service_account_token=account["automountServiceAccountToken"],
                opts=model_opts,
            )
            isvc = inference_service(
                model, s, replicas.min, replicas.max, instance_family_label=args.instance_family_label
            )
            k8s.apiextensions.CustomResource(
                f"{name}-{model.name}",
                api_version=isvc["apiVersion"],
                kind=isvc["kind"],
                metadata=isvc["metadata"],
                spec=isvc["spec"],
                opts=pulumi.ResourceOptions.merge(
                    model_opts, pulumi.ResourceOptions(depends_on=[kserve, sa, key_secret, *args.depends_on, *cache])
                ),
            )
            pdb = pod_disruption_budget(model, s)
            k8s.policy.v1.PodDisruptionBudget(
                f"{name}-{model.name}", metadata=pdb["metadata"], spec=pdb["spec"], opts=model_opts
            )
            self.service_hosts[model.name] = service_host(model, s)

        self._endpoint_pickers(name, args, k8s_opts, isolated)
        self.register_outputs({"serviceHosts": self.service_hosts, "inferencePools": self.inference_pools})

    def _endpoint_pickers(
        self, name: str, args: ServingArgs, k8s_opts: pulumi.ResourceOptions, isolated: pulumi.ResourceOptions
    ) -> None:
        """Per model routed by the endpoint picker: its InferencePool and EPP from the chart, a
        disruption budget when it has a standby, and the one port Envoy may call."""
        s = args.settings
        self.inference_pools = {}
        self.inference_pool_releases = []
        pickers = routes_by_endpoint_picker(args.models)
        if not pickers:
            return
        crds = k8s.yaml.v2.ConfigFile(f"{name}-inference-extension-crds", file=INFERENCE_EXTENSION_CRDS, opts=k8s_opts)
        self.inference_pool_releases.append(crds)
        for model in pickers:
            pool = inference_pool(model, s)["metadata"]
            release = helm_release(
                f"{name}-{model.name}-epp",
                INFERENCEPOOL_CHART,
                INFERENCE_EXTENSION_VERSION,
                s.namespace,
                pulumi.ResourceOptions.merge(isolated, pulumi.ResourceOptions(depends_on=[crds])),
                values=inference_pool_values(model, args.endpoint_picker_replicas),
                atomic=True,
                release_name=pool["name"],
            )
            self.inference_pool_releases.append(release)
            self.inference_pools[model.name] = {"name": pool["name"], "namespace": pool["namespace"]}
            policy = endpoint_picker_network_policy(model, s, args.endpoint_picker_callers)
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{model.name}-epp", metadata=policy["metadata"], spec=policy["spec"], opts=isolated
            )
            egress = endpoint_picker_egress_policy(model, s, args.api_server_cidr)
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{model.name}-epp-egress", metadata=egress["metadata"], spec=egress["spec"], opts=isolated
            )
            if args.endpoint_picker_replicas > 1:
                pdb = endpoint_picker_pdb(model, s)
                k8s.policy.v1.PodDisruptionBudget(
                    f"{name}-{model.name}-epp", metadata=pdb["metadata"], spec=pdb["spec"], opts=k8s_opts
                )
