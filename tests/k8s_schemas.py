"""Validate Kubernetes objects against real schemas: core kinds with `kubernetes-validate`
(strict), custom resources against the upstream CRDs in `CRD_SCHEMA_DIR`."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[1]
KUBERNETES_VERSION = "1.34.0"
# The EKS Auto Mode NodeClass has no published CRD; this schema is written from the
# EKS user guide ("Create a Node Class") and kept strict like the others.
LOCAL_SCHEMAS = {("eks.amazonaws.com", "NodeClass"): ROOT / "tests" / "schemas" / "eks.amazonaws.com_nodeclasses.json"}


# Upstream CRDs of charts ../shared/crds does not carry: cert-manager's Certificate and Issuer
# (cert-manager/cert-manager deploy/crds at v1.21.1, unmodified; the chart is pinned to v1.21.2).
LOCAL_CRDS = ROOT / "tests" / "schemas"


def crd_dir() -> Path:
    configured = os.environ.get("CRD_SCHEMA_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "crds"
    if not path.is_dir():
        raise FileNotFoundError(f"CRD schema folder not found: {path} (set CRD_SCHEMA_DIR)")
    return path


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml: the CRDs are large
    """PyYAML stops on a bare `=` enum value (implicit tag:yaml.org,2002:value); keep it a string."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


@cache
def _crds_of_group(group: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(version, kind) -> openAPIV3Schema for the CRDs of one API group (files are named
    `<group>_<plural>.yaml` upstream, so only those files are parsed)."""
    index: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted([*crd_dir().rglob(f"{group}_*.yaml"), *LOCAL_CRDS.rglob(f"{group}_*.yaml")]):
        for doc in yaml.load_all(path.read_text(), Loader=_Loader):
            if not doc or doc.get("kind") != "CustomResourceDefinition" or doc["spec"]["group"] != group:
                continue
            for version in doc["spec"]["versions"]:
                schema = version.get("schema", {}).get("openAPIV3Schema")
                if schema:
                    index[(version["name"], doc["spec"]["names"]["kind"])] = schema
    return index


def _strict(schema: Any) -> Any:
    """Turn a structural OpenAPI v3 schema into a JSON Schema that rejects unknown fields,
    except where the CRD says `x-kubernetes-preserve-unknown-fields`."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("nullable"):
        out.pop("nullable", None)
        if "type" in out:
            out["type"] = [out["type"], "null"]
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    return out


def custom_resource_schema(api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = api_version.rpartition("/")
    local = LOCAL_SCHEMAS.get((group, kind))
    if local:
        return json.loads(local.read_text())
    schema = _crds_of_group(group).get((version, kind))
    if schema is None:
        raise LookupError(f"no CRD schema for {api_version} {kind} in {crd_dir()}")
    return _strict(schema)


CORE_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "policy",
        "autoscaling",
        "rbac.authorization.k8s.io",
        "networking.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "admissionregistration.k8s.io",
    }
)


def is_core(api_version: str) -> bool:
    return api_version.rpartition("/")[0] in CORE_GROUPS


def validate(obj: dict[str, Any]) -> list[str]:
    """Every schema violation of one object, as readable lines (empty when valid)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    if is_core(api_version):
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return [f"{kind} {obj.get('metadata', {}).get('name')}: {exc.message} at {'.'.join(map(str, exc.path))}"]
        return []
    validator = jsonschema.Draft7Validator(custom_resource_schema(api_version, kind))
    name = obj.get("metadata", {}).get("name")
    return [
        f"{api_version} {kind} {name}: {error.message} at {'.'.join(map(str, error.absolute_path))}"
        for error in validator.iter_errors(obj)
    ]
