"""Gateway component: installs Envoy Gateway and the Envoy AI Gateway, then applies the
objects of `objects.py` (one OpenAI-compatible endpoint for every model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from contract import names
from contract.settings.gateway import GatewaySettings
from contract.settings.models import ModelSettings

from .. import isolation
from ..helm import helm_release
from ..naming import type_token
from . import store, tls
from .objects import (
    AI_GATEWAY_CHART,
    AI_GATEWAY_CRDS_CHART,
    AI_GATEWAY_NAMESPACE,
    AI_GATEWAY_VERSION,
    API_KEYS_SECRET,
    BACKEND_KEY_FIELD,
    BACKEND_KEY_SECRET,
    ENVOY_GATEWAY_CHART,
    ENVOY_GATEWAY_NAMESPACE,
    ENVOY_GATEWAY_VERSION,
    ai_gateway_route,
    ai_gateway_values,
    ai_service_backend,
    backend,
    backend_security_policy,
    backend_traffic_policy,
    client_traffic_policy,
    envoy_gateway_values,
    envoy_proxy,
    gateway,
    gateway_class,
    inference_pool_reference_grant,
    inference_pool_security_policy,
    load_balancer_service,
    security_policy,
)


@dataclass(frozen=True)
class GatewayArgs:
    settings: GatewaySettings
    models: list[ModelSettings]
    # Model name -> the predictor Service's cluster DNS name (from Serving).
    service_hosts: dict[str, str]
    service_port: int
    # The key the predictors require (Serving holds the other copy).
    backend_api_key: pulumi.Output[str]
    auto_mode: bool
    # The NLB's source ranges when gateway.sourceRanges is unset.
    vpc_cidr: str
    provider: k8s.Provider
    depends_on: list[pulumi.Resource]
    # Without Auto Mode, the controller that gives the `service.k8s.aws/nlb` Service its address.
    load_balancer_controller: pulumi.Resource | None = None
    # Model name -> its InferencePool (name, namespace) for models routed by the endpoint picker
    # (Serving), the predictor key's Secret beside those pools, and what creates the pools.
    inference_pools: dict[str, dict[str, str]] = field(default_factory=dict)
    pool_key_secret: str = ""
    inference_pool_releases: list[pulumi.Resource] = field(default_factory=list)


class Gateway(pulumi.ComponentResource):
    hostname: pulumi.Output[str]
    endpoint_url: pulumi.Output[str]
    api_keys: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: GatewayArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("gateway", "Gateway"), name, None, opts)
        gw = args.settings
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)

        def after(*deps: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=list(deps)))

        def apply(logical: str, obj: dict[str, Any], *deps: pulumi.Resource) -> pulumi.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{name}-{logical}",
                api_version=obj["apiVersion"],
                kind=obj["kind"],
                metadata=obj["metadata"],
                spec=obj["spec"],
                opts=after(*deps),
            )

        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata={"name": gw.namespace, "labels": names.PART_OF},
            opts=k8s_opts,
        )

        def core(logical: str, resource: type, obj: dict[str, Any], *deps: pulumi.Resource) -> pulumi.Resource:
            fields = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
            return resource(f"{name}-{logical}", **fields, opts=after(*deps))

        core("default-deny", k8s.networking.v1.NetworkPolicy, isolation.default_deny_ingress(gw.namespace), namespace)
        # Only the Redis pods run here; they need DNS and each other (store.network_policy).
        core("deny-egress", k8s.networking.v1.NetworkPolicy, isolation.default_deny_egress(gw.namespace), namespace)
        core("dns", k8s.networking.v1.NetworkPolicy, isolation.dns_egress(gw.namespace), namespace)
        envoy_gateway = helm_release(
            f"{name}-envoy-gateway",
            ENVOY_GATEWAY_CHART,
            ENVOY_GATEWAY_VERSION,
            ENVOY_GATEWAY_NAMESPACE,
            k8s_opts,
            create_namespace=True,
            values=envoy_gateway_values(gw, args.models),
            atomic=True,
        )
        ai_crds = helm_release(
            f"{name}-ai-gateway-crds",
            AI_GATEWAY_CRDS_CHART,
            AI_GATEWAY_VERSION,
            AI_GATEWAY_NAMESPACE,
            k8s_opts,
            create_namespace=True,
        )
        ai_gateway = helm_release(
            f"{name}-ai-gateway",
            AI_GATEWAY_CHART,
            AI_GATEWAY_VERSION,
            AI_GATEWAY_NAMESPACE,
            after(ai_crds, envoy_gateway),
            create_namespace=True,
            values=ai_gateway_values(gw),
            atomic=True,
        )
        installed = (namespace, envoy_gateway, ai_gateway)
        self._rate_limit_store(name, gw, core, namespace, envoy_gateway)

        keys = {
            c.name: random.RandomPassword(
                f"{name}-{c.name}-key", length=48, special=False, opts=pulumi.ResourceOptions(parent=self)
            )
            for c in gw.clients
        }
        # apiKeyAuth reads one entry per client: key = client id, value = its API key.
        secret = k8s.core.v1.Secret(
            f"{name}-api-keys",
            metadata={"name": API_KEYS_SECRET, "namespace": gw.namespace},
            type="Opaque",
            string_data={client: pulumi.Output.secret(key.result) for client, key in keys.items()},
            opts=after(namespace),
        )

        apply("class", gateway_class(), envoy_gateway)
        proxy = apply("proxy", envoy_proxy(gw), *installed)
        gw_obj = apply("gateway", gateway(gw), proxy, *installed)
        backend_key = k8s.core.v1.Secret(
            f"{name}-backend-key",
            metadata={"name": BACKEND_KEY_SECRET, "namespace": gw.namespace, "labels": names.PART_OF},
            type="Opaque",
            string_data={BACKEND_KEY_FIELD: pulumi.Output.secret(args.backend_api_key)},
            opts=after(namespace),
        )
        pools = args.inference_pools
        pool_objects = self._inference_pool_access(name, args, apply, installed)
        for model in (m for m in args.models if m.name not in pools):
            apply(
                f"{model.name}-backend",
                backend(model, gw, args.service_hosts[model.name], args.service_port),
                *installed,
            )
            ai_backend = apply(f"{model.name}-ai-backend", ai_service_backend(model, gw), *installed)
            apply(f"{model.name}-backend-key", backend_security_policy(model, gw), ai_backend, backend_key)
        # Policies first, then the route, then the load balancer: there is never a moment in
        # which a route is reachable without its key check and limits (and on destroy, the
        # route goes before them).
        policies = [
            apply("auth", security_policy(gw), gw_obj, secret),
            apply("limits", backend_traffic_policy(gw), gw_obj),
            apply("connections", client_traffic_policy(gw), gw_obj),
        ]
        route = apply(
            "route",
            ai_gateway_route(args.models, gw, pools),
            gw_obj,
            *policies,
            *installed,
            *pool_objects,
            *args.depends_on,
        )

        lb = load_balancer_service(gw, args.auto_mode, args.vpc_cidr)
        controller = [args.load_balancer_controller] if args.load_balancer_controller else []
        nlb = k8s.core.v1.Service(
            f"{name}-nlb",
            metadata=lb["metadata"],
            spec=lb["spec"],
            opts=after(gw_obj, route, *policies, *controller),
        )

        self.hostname = nlb.status.apply(_ingress_hostname)
        if gw.tls_mode == "cluster":
            # cert-manager's CRDs come with Serving (args.depends_on).
            self._cluster_tls(name, gw, apply, after, [namespace, *args.depends_on], nlb)
        self.endpoint_url = self.hostname.apply(lambda host: f"{gw.url_scheme}://{host}/v1")
        self.api_keys = pulumi.Output.secret(pulumi.Output.all(**{c: k.result for c, k in keys.items()}))
        self.register_outputs({"hostname": self.hostname, "endpointUrl": self.endpoint_url, "apiKeys": self.api_keys})

    def _cluster_tls(
        self,
        name: str,
        gw: GatewaySettings,
        apply: Any,
        after: Any,
        installed: list[pulumi.Resource],
        nlb: pulumi.Resource,
    ) -> None:
        """The gateway's CA and the NLB hostname's certificate (cert-manager, installed by Serving)."""
        self_signed = apply("tls-selfsigned", tls.self_signed_issuer(gw), *installed)
        ca = apply("tls-ca", tls.ca_certificate(gw), self_signed)
        issuer = apply("tls-ca-issuer", tls.ca_issuer(gw), ca)
        serving = self.hostname.apply(lambda host: tls.serving_certificate(gw, host))
        k8s.apiextensions.CustomResource(
            f"{name}-tls",
            api_version=tls.CERT_MANAGER_API,
            kind="Certificate",
            metadata=serving["metadata"],
            spec=serving["spec"],
            opts=after(issuer, nlb),
        )

    def _inference_pool_access(
        self, name: str, args: GatewayArgs, apply: Any, installed: tuple[pulumi.Resource, ...]
    ) -> list[pulumi.Resource]:
        """For pools in other namespaces: the grant that lets the route name them, and each pool's
        predictor key (the AI gateway's CRDs must exist first, so the gateway creates them)."""
        made: list[pulumi.Resource] = []
        namespaces = sorted({pool["namespace"] for pool in args.inference_pools.values()})
        for namespace in namespaces:
            if namespace != args.settings.namespace:
                grant = inference_pool_reference_grant(args.settings, namespace)
                made.append(apply(f"{namespace}-pool-grant", grant, *installed))
        for model in args.models:
            pool = args.inference_pools.get(model.name)
            if pool is not None:
                policy = inference_pool_security_policy(model, pool, args.pool_key_secret)
                made.append(apply(f"{model.name}-pool-key", policy, *installed, *args.inference_pool_releases))
        return made

    def _rate_limit_store(
        self, name: str, gw: GatewaySettings, core: Any, namespace: pulumi.Resource, envoy_gateway: pulumi.Resource
    ) -> None:
        """Redis + Sentinel in the gateway namespace; the password (random, a Pulumi secret) in a
        Secret beside the Redis pods and one beside the rate-limit service, which Envoy Gateway
        creates in its own namespace."""
        password = random.RandomPassword(
            f"{name}-redis-password", length=48, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        secret = pulumi.Output.secret(password.result)
        for logical, namespace_name, dep in (
            ("redis-auth", gw.namespace, namespace),
            ("ratelimit-redis-auth", store.RATE_LIMIT_NAMESPACE, envoy_gateway),
        ):
            core(
                logical,
                k8s.core.v1.Secret,
                {
                    "metadata": store.auth_secret_metadata(namespace_name),
                    "type": "Opaque",
                    "string_data": {store.AUTH_KEY: secret},
                },
                dep,
            )
        scripts = core("redis-scripts", k8s.core.v1.ConfigMap, store.scripts_config_map(gw), namespace)
        core("redis-headless", k8s.core.v1.Service, store.headless_service(gw), namespace)
        core("redis", k8s.apps.v1.StatefulSet, store.stateful_set(gw), namespace, scripts)
        core("redis", k8s.policy.v1.PodDisruptionBudget, store.pod_disruption_budget(gw), namespace)
        core("redis", k8s.networking.v1.NetworkPolicy, store.network_policy(gw), namespace)


def _ingress_hostname(status: Any) -> str:
    ingress = (status.load_balancer.ingress or []) if status and status.load_balancer else []
    return ingress[0].hostname if ingress and ingress[0].hostname else ""
