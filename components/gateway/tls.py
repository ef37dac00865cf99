"""TLS on the gateway without an ACM certificate (`gateway.clusterTls`): a CA of the gateway's own,
and from it a certificate for the NLB's hostname that Envoy presents on its HTTPS listener; the
NLB passes TCP through. cert-manager (installed by Serving, v1.21) issues and renews both: a
self-signed Issuer signs the CA Certificate, a CA Issuer signs the serving one (cert-manager docs,
"SelfSigned" bootstrapping a CA issuer; "CA" issuer). Pure builders; the schema is cert-manager's
`cert-manager.io/v1` (tests/schemas/cert-manager)."""

from __future__ import annotations

from typing import Any

from contract import names
from contract.settings.gateway import GatewaySettings

CERT_MANAGER_API = "cert-manager.io/v1"
SELF_SIGNED_ISSUER = "gateway-selfsigned"
CA_ISSUER = "gateway-ca"
# The CA's Secret: `ca.crt` is what clients trust (README, "Call the endpoint").
CA_SECRET = "gateway-ca"
# The serving certificate's Secret, which the Gateway's HTTPS listener references.
SERVING_SECRET = "gateway-tls"
CA_DURATION = "87600h"  # ten years; the serving certificate rotates under it
SERVING_DURATION = "2160h"  # 90 days
SERVING_RENEW_BEFORE = "720h"  # 30 days: Envoy picks up the renewed Secret


def _object(kind: str, name: str, gw: GatewaySettings, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": CERT_MANAGER_API,
        "kind": kind,
        "metadata": {"name": name, "namespace": gw.namespace, "labels": names.PART_OF},
        "spec": spec,
    }


def _issuer_ref(name: str) -> dict[str, str]:
    return {"name": name, "kind": "Issuer", "group": "cert-manager.io"}


def self_signed_issuer(gw: GatewaySettings) -> dict[str, Any]:
    return _object("Issuer", SELF_SIGNED_ISSUER, gw, {"selfSigned": {}})


def ca_certificate(gw: GatewaySettings) -> dict[str, Any]:
    return _object(
        "Certificate",
        CA_ISSUER,
        gw,
        {
            "isCA": True,
            "commonName": f"inference gateway CA ({gw.namespace})",
            "secretName": CA_SECRET,
            "duration": CA_DURATION,
            "privateKey": {"algorithm": "ECDSA", "size": 256},
            "issuerRef": _issuer_ref(SELF_SIGNED_ISSUER),
        },
    )


def ca_issuer(gw: GatewaySettings) -> dict[str, Any]:
    return _object("Issuer", CA_ISSUER, gw, {"ca": {"secretName": CA_SECRET}})


def serving_certificate(gw: GatewaySettings, hostname: str) -> dict[str, Any]:
    """For the NLB's DNS name, which clients connect to (known once the NLB exists)."""
    return _object(
        "Certificate",
        SERVING_SECRET,
        gw,
        {
            "secretName": SERVING_SECRET,
            "dnsNames": [hostname],
            "duration": SERVING_DURATION,
            "renewBefore": SERVING_RENEW_BEFORE,
            "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature"],
            "issuerRef": _issuer_ref(CA_ISSUER),
        },
    )
