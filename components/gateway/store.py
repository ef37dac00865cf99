"""The rate-limit store: Redis with one Sentinel beside each replica, password-protected, spread
over zones, reachable only from Envoy Gateway's rate-limit service (pure builders).

The rate-limit service (envoyproxy/ratelimit, the image Envoy Gateway v1.9.0 deploys) talks to it
as `REDIS_TYPE=sentinel`: `REDIS_URL` is `<master set>,<sentinel>,...` and `REDIS_AUTH` /
`REDIS_SENTINEL_AUTH` hold the password (src/settings/settings.go; README "Redis type"). Envoy
Gateway sets `REDIS_URL` from `rateLimit.backend.redis.url` and appends `container.env` of its
`rateLimitDeployment` (internal/infrastructure/kubernetes/ratelimit/resource.go,
`expectedRateLimitContainerEnv` and resource.ExpectedContainerEnv).
"""

from __future__ import annotations

from typing import Any

from contract import names
from contract.pod_security import container_security_context, pod_security_context
from contract.settings.gateway import GatewaySettings

REDIS_NAME = "ratelimit-redis"
HEADLESS_NAME = f"{REDIS_NAME}-headless"
SCRIPTS_NAME = f"{REDIS_NAME}-scripts"
# One Secret name in both namespaces: the Redis pods' and the rate-limit service's.
AUTH_SECRET = f"{REDIS_NAME}-auth"
AUTH_KEY = "password"
REDIS_PORT = 6379
SENTINEL_PORT = 26379
MASTER_SET = "ratelimit"
# The redis image's own user.
REDIS_UID = 999
# Where Envoy Gateway runs the rate-limit service, and the labels it gives its pods.
RATE_LIMIT_NAMESPACE = "envoy-gateway-system"
RATE_LIMIT_POD_LABELS = {"app.kubernetes.io/name": "envoy-ratelimit", "app.kubernetes.io/component": "ratelimit"}
ZONE = "topology.kubernetes.io/zone"

# Each container asks the other pods' Sentinels who the master is (a restarted pod rejoins
# the current master, not its old role); on a fresh start nobody answers and pod 0 is master.
# The password stays in an emptyDir file, never on a command line: redis-cli reads it from
# REDISCLI_AUTH (redis-cli.c, "REDISCLI_AUTH" in the environment; also what the probes use).
START_SCRIPT = """\
#!/bin/sh
set -eu
self="$(hostname).${HEADLESS_DOMAIN}"
ask() { timeout 3 redis-cli -h "$1" -p "$SENTINEL_PORT" \\
  sentinel get-master-addr-by-name "$MASTER_SET" 2>/dev/null | head -n 1 || true; }
master=""
i=0
while [ -z "$master" ] && [ "$i" -lt "$REPLICAS" ]; do
  peer="${SET_NAME}-${i}.${HEADLESS_DOMAIN}"
  [ "$peer" = "$self" ] || master="$(ask "$peer")"
  i=$((i + 1))
done
[ -n "$master" ] || master="$(ask 127.0.0.1)"
[ -n "$master" ] || master="${SET_NAME}-0.${HEADLESS_DOMAIN}"
if [ "$1" = "redis" ]; then
  conf="$REDIS_DIR/redis.conf"
  {
    echo "port $REDIS_PORT"
    echo "requirepass $REDIS_PASSWORD"
    echo "masterauth $REDIS_PASSWORD"
    echo "replica-announce-ip $self"
    echo "dir $REDIS_DIR"
    echo 'save ""'
    echo "appendonly no"
    echo "maxmemory 200mb"
    echo "maxmemory-policy volatile-ttl"
    [ "$master" = "$self" ] || echo "replicaof $master $REDIS_PORT"
  } > "$conf"
  exec redis-server "$conf"
fi
conf="$SENTINEL_DIR/sentinel.conf"
{
  echo "port $SENTINEL_PORT"
  echo "dir $SENTINEL_DIR"
  echo "sentinel resolve-hostnames yes"
  echo "sentinel announce-hostnames yes"
  echo "sentinel announce-ip $self"
  echo "requirepass $REDIS_PASSWORD"
  echo "sentinel sentinel-pass $REDIS_PASSWORD"
  echo "sentinel monitor $MASTER_SET $master $REDIS_PORT $QUORUM"
  echo "sentinel auth-pass $MASTER_SET $REDIS_PASSWORD"
  echo "sentinel down-after-milliseconds $MASTER_SET 5000"
  echo "sentinel failover-timeout $MASTER_SET 60000"
  echo "sentinel parallel-syncs $MASTER_SET 1"
} > "$conf"
exec redis-server "$conf" --sentinel
"""


def labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": REDIS_NAME, **names.PART_OF}


def _selector() -> dict[str, str]:
    return {"app.kubernetes.io/name": REDIS_NAME}


def headless_domain(gw: GatewaySettings) -> str:
    return f"{HEADLESS_NAME}.{gw.namespace}.svc.cluster.local"


def sentinel_url(gw: GatewaySettings) -> str:
    """`REDIS_URL` for `REDIS_TYPE=sentinel`: the master set's name, then every Sentinel."""
    sentinels = [f"{REDIS_NAME}-{i}.{headless_domain(gw)}:{SENTINEL_PORT}" for i in range(gw.rate_limit.redis_replicas)]
    return ",".join([MASTER_SET, *sentinels])


def _password(key_env: str) -> dict[str, Any]:
    return {"name": key_env, "valueFrom": {"secretKeyRef": {"name": AUTH_SECRET, "key": AUTH_KEY}}}


def rate_limit_env() -> list[dict[str, Any]]:
    """Added to the rate-limit container: Sentinel mode, and the password for Redis and Sentinels
    from the Secret beside it (never in the chart values)."""
    return [{"name": "REDIS_TYPE", "value": "sentinel"}, _password("REDIS_AUTH"), _password("REDIS_SENTINEL_AUTH")]


def auth_secret_metadata(namespace: str) -> dict[str, Any]:
    return {"name": AUTH_SECRET, "namespace": namespace, "labels": labels()}


def scripts_config_map(gw: GatewaySettings) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SCRIPTS_NAME, "namespace": gw.namespace, "labels": labels()},
        "data": {"start.sh": START_SCRIPT},
    }


def _container(gw: GatewaySettings, role: str, port: int, mount: str) -> dict[str, Any]:
    rl = gw.rate_limit
    env = [
        _password("REDIS_PASSWORD"),
        # redis-cli (the probes) reads the password from here.
        _password("REDISCLI_AUTH"),
        {"name": "HEADLESS_DOMAIN", "value": headless_domain(gw)},
        {"name": "SET_NAME", "value": REDIS_NAME},
        {"name": "REPLICAS", "value": str(rl.redis_replicas)},
        {"name": "QUORUM", "value": str(rl.sentinel_quorum)},
        {"name": "MASTER_SET", "value": MASTER_SET},
        {"name": "REDIS_PORT", "value": str(REDIS_PORT)},
        {"name": "SENTINEL_PORT", "value": str(SENTINEL_PORT)},
        {"name": "REDIS_DIR", "value": "/data"},
        {"name": "SENTINEL_DIR", "value": "/sentinel"},
    ]
    ping = {"exec": {"command": ["redis-cli", "-p", str(port), "ping"]}}
    return {
        "name": role,
        "image": rl.redis_image,
        "command": ["/bin/sh", "/scripts/start.sh", role],
        "env": env,
        "ports": [{"name": role, "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {**ping, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": role}, "periodSeconds": 10},
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi" if role == "redis" else "64Mi"},
            "limits": {"memory": "256Mi" if role == "redis" else "64Mi"},
        },
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "scripts", "mountPath": "/scripts", "readOnly": True},
            {"name": role, "mountPath": mount},
        ],
    }


def stateful_set(gw: GatewaySettings) -> dict[str, Any]:
    """Rate-limit counters only: no persistence (a full restart resets the windows), bounded
    memory; at most one replica per node and a balanced spread over zones."""
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": REDIS_NAME, "namespace": gw.namespace, "labels": labels()},
        "spec": {
            "serviceName": HEADLESS_NAME,
            "replicas": gw.rate_limit.redis_replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": _selector()},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": pod_security_context(REDIS_UID),
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": _selector()}}
                            ]
                        }
                    },
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": ZONE,
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": _selector()},
                        }
                    ],
                    "containers": [
                        _container(gw, "redis", REDIS_PORT, "/data"),
                        _container(gw, "sentinel", SENTINEL_PORT, "/sentinel"),
                    ],
                    "volumes": [
                        {"name": "scripts", "configMap": {"name": SCRIPTS_NAME, "defaultMode": 0o555}},
                        {"name": "redis", "emptyDir": {"sizeLimit": "512Mi"}},
                        {"name": "sentinel", "emptyDir": {"sizeLimit": "16Mi"}},
                    ],
                },
            },
        },
    }


def headless_service(gw: GatewaySettings) -> dict[str, Any]:
    """Per-pod DNS names; published before readiness, since the pods find each other through them."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": HEADLESS_NAME, "namespace": gw.namespace, "labels": labels()},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": _selector(),
            "ports": [
                {"name": "redis", "port": REDIS_PORT, "targetPort": "redis", "protocol": "TCP"},
                {"name": "sentinel", "port": SENTINEL_PORT, "targetPort": "sentinel", "protocol": "TCP"},
            ],
        },
    }


def pod_disruption_budget(gw: GatewaySettings) -> dict[str, Any]:
    """Drains take one Redis pod at a time, so a Sentinel majority always remains."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": REDIS_NAME, "namespace": gw.namespace, "labels": labels()},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector()}},
    }


def network_policy(gw: GatewaySettings) -> dict[str, Any]:
    """Only the rate-limit service (it holds every client's budget) and the store's own pods
    (replication, Sentinel gossip) reach Redis and Sentinel; under the namespace's default-deny
    egress, the store's pods reach each other and nothing else (DNS aside)."""
    ports = [{"protocol": "TCP", "port": REDIS_PORT}, {"protocol": "TCP", "port": SENTINEL_PORT}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": REDIS_NAME, "namespace": gw.namespace, "labels": labels()},
        "spec": {
            "podSelector": {"matchLabels": _selector()},
            "policyTypes": ["Ingress", "Egress"],
            "egress": [{"to": [{"podSelector": {"matchLabels": _selector()}}], "ports": ports}],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": RATE_LIMIT_NAMESPACE}},
                            "podSelector": {"matchLabels": RATE_LIMIT_POD_LABELS},
                        }
                    ],
                    "ports": ports,
                },
                {"from": [{"podSelector": {"matchLabels": _selector()}}], "ports": ports},
            ],
        },
    }
