"""Gateway component: installs Envoy Gateway and the Envoy AI Gateway, then applies the
objects of `objects.py` (one OpenAI-compatible endpoint for every model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from contract import names
from contract.settings.gateway import GatewaySettings
from contract.settings.models import ModelSettings

from ..helm import helm_release
from ..naming import type_token
from .objects import (
    AI_GATEWAY_CHART,
    AI_GATEWAY_CRDS_CHART,
    AI_GATEWAY_NAMESPACE,
    AI_GATEWAY_VERSION,
    API_KEYS_SECRET,
    ENVOY_GATEWAY_CHART,
    ENVOY_GATEWAY_NAMESPACE,
    ENVOY_GATEWAY_VERSION,
    ai_gateway_route,
    ai_gateway_values,
    ai_service_backend,
    backend,
    backend_traffic_policy,
    client_traffic_policy,
    envoy_gateway_values,
    envoy_proxy,
    gateway,
    gateway_class,
    load_balancer_service,
    redis_deployment,
    redis_network_policy,
    redis_service,
    security_policy,
)


@dataclass(frozen=True)
class GatewayArgs:
    settings: GatewaySettings
    models: list[ModelSettings]
    # Model name -> the predictor Service's cluster DNS name (from Serving).
    service_hosts: dict[str, str]
    service_port: int
    auto_mode: bool
    provider: k8s.Provider
    depends_on: list[pulumi.Resource]


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
                f"{name}-{logical}", api_version=obj["apiVersion"], kind=obj["kind"],
                metadata=obj["metadata"], spec=obj["spec"], opts=after(*deps),
            )

        namespace = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": gw.namespace, "labels": names.PART_OF},
            opts=k8s_opts,
        )
        redis = redis_deployment(gw)
        k8s.apps.v1.Deployment(f"{name}-redis", metadata=redis["metadata"], spec=redis["spec"], opts=after(namespace))
        redis_svc = redis_service(gw)
        k8s.core.v1.Service(f"{name}-redis", metadata=redis_svc["metadata"], spec=redis_svc["spec"],
                            opts=after(namespace))
        redis_policy = redis_network_policy(gw)
        k8s.networking.v1.NetworkPolicy(f"{name}-redis", metadata=redis_policy["metadata"],
                                        spec=redis_policy["spec"], opts=after(namespace))

        envoy_gateway = helm_release(
            f"{name}-envoy-gateway", ENVOY_GATEWAY_CHART, ENVOY_GATEWAY_VERSION, ENVOY_GATEWAY_NAMESPACE, k8s_opts,
            create_namespace=True, values=envoy_gateway_values(gw), atomic=True,
        )
        ai_crds = helm_release(
            f"{name}-ai-gateway-crds", AI_GATEWAY_CRDS_CHART, AI_GATEWAY_VERSION, AI_GATEWAY_NAMESPACE, k8s_opts,
            create_namespace=True,
        )
        ai_gateway = helm_release(
            f"{name}-ai-gateway", AI_GATEWAY_CHART, AI_GATEWAY_VERSION, AI_GATEWAY_NAMESPACE,
            after(ai_crds, envoy_gateway), create_namespace=True, values=ai_gateway_values(gw), atomic=True,
        )
        installed = (namespace, envoy_gateway, ai_gateway)

        keys = {
            c.name: random.RandomPassword(f"{name}-{c.name}-key", length=48, special=False,
                                          opts=pulumi.ResourceOptions(parent=self))
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
        for model in args.models:
            apply(f"{model.name}-backend",
                  backend(model, gw, args.service_hosts[model.name], args.service_port), *installed)
            apply(f"{model.name}-ai-backend", ai_service_backend(model, gw), *installed)
        # Policies first, then the route, then the load balancer: there is never a moment in
        # which a route is reachable without its key check and limits (and on destroy, the
        # route goes before them).
        policies = [
            apply("auth", security_policy(gw), gw_obj, secret),
            apply("limits", backend_traffic_policy(gw), gw_obj),
            apply("connections", client_traffic_policy(gw), gw_obj),
        ]
        route = apply("route", ai_gateway_route(args.models, gw), gw_obj, *policies, *installed, *args.depends_on)

        lb = load_balancer_service(gw, args.auto_mode)
        nlb = k8s.core.v1.Service(f"{name}-nlb", metadata=lb["metadata"], spec=lb["spec"],
                                  opts=after(gw_obj, route, *policies))

        self.hostname = nlb.status.apply(_ingress_hostname)
        self.endpoint_url = self.hostname.apply(lambda host: f"{gw.url_scheme}://{host}/v1")
        self.api_keys = pulumi.Output.secret(pulumi.Output.all(**{c: k.result for c, k in keys.items()}))
        self.register_outputs({"hostname": self.hostname, "endpointUrl": self.endpoint_url, "apiKeys": self.api_keys})


def _ingress_hostname(status: Any) -> str:
    ingress = (status.load_balancer.ingress or []) if status and status.load_balancer else []
    return ingress[0].hostname if ingress and ingress[0].hostname else ""
