"""Run the real Pulumi program under Pulumi's mocks and capture every registered resource.

The program is executed exactly as `pulumi up` would (the real `__main__.py`, the real
`Pulumi.<stack>.yaml` config), except that the engine is `pulumi.runtime.set_mocks`.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format, struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.config import set_all_config
from pulumi.runtime.settings import SETTINGS
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "inference-platform"
# The signature Pulumi uses to mark a serialized resource reference.
RESOURCE_REFERENCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
SPECIAL_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


@dataclass
class Captured:
    """One registered resource: its type token, logical name, inputs and parent URN."""

    type: str
    name: str
    inputs: dict[str, Any]
    urn: str
    parent: str
    custom: bool
    # Input paths (`stringData`, `spec.password`) the program passed as Pulumi secrets; their
    # values appear unwrapped in `inputs`.
    secret_paths: list[str] = field(default_factory=list)
    # URNs this resource waits for (`depends_on` and input dependencies).
    dependencies: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str | None:
        """`apiVersion/kind` of a Kubernetes object, e.g. `karpenter.sh/v1/NodePool`."""
        if self.type == "kubernetes:apiextensions.k8s.io:CustomResource" or self.type.startswith("kubernetes:"):
            api, kind = self.inputs.get("apiVersion"), self.inputs.get("kind")
            if api and kind:
                return f"{api}/{kind}"
        return None


@dataclass
class StackRun:
    stack: str
    resources: list[Captured]
    outputs: dict[str, Any] = field(default_factory=dict)
    secret_outputs: set[str] = field(default_factory=set)

    def of_type(self, type_token: str) -> list[Captured]:
        return [r for r in self.resources if r.type == type_token]

    def of_kind(self, api_version: str, kind: str) -> list[Captured]:
        return [r for r in self.resources if r.kind == f"{api_version}/{kind}"]

    def named(self, name: str) -> Captured:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def children_of(self, parent: Captured) -> list[Captured]:
        return [r for r in self.resources if r.parent == parent.urn]

    def kubernetes_objects(self) -> list[Captured]:
        return [r for r in self.resources if r.kind is not None]


class ProgramFailed(Exception):
    """The program stopped; carries what it had registered before it did."""

    def __init__(self, error: Exception, registered: list[Captured]) -> None:
        super().__init__(str(error))
        self.error = error
        self.registered = registered


def _fake_id(args: pulumi_mocks.MockResourceArgs) -> str:
    return f"{args.name}-id"


class PlatformMocks(pulumi.runtime.Mocks):
    """Outputs a real provider would compute, just enough for the program to wire them."""

    def __init__(self, stack: str, existing_clusters: list[str] | None = None) -> None:
        self.stack = stack
        self.monitor: CapturingMonitor | None = None
        # EKS clusters the mocked account already has: by default the stack's own (a stack that
        # was deployed before); [] is an empty account.
        self.existing_clusters = [f"llm-{stack}"] if existing_clusters is None else existing_clusters

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        typ, name = args.typ, args.name
        if typ == "eks:index:Cluster":
            return _fake_id(args), self._eks_cluster(args)
        if typ.startswith("aws:"):
            state.setdefault("arn", f"arn:aws:{typ.split(':')[1].split('/')[0]}:us-west-2:123456789012:{name}")
        if typ == "aws:s3/bucket:Bucket":
            state.setdefault("bucket", name)
        if typ == "aws:amp/workspace:Workspace":
            state.setdefault(
                "prometheusEndpoint", f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/ws-{name}/"
            )
        if typ == "aws:sqs/queue:Queue":
            state.setdefault("name", name)
            state.setdefault("url", f"https://sqs.us-west-2.amazonaws.com/123456789012/{name}")
        if typ in ("aws:iam/role:Role", "aws:cloudwatch/eventRule:EventRule"):
            state.setdefault("name", name)
        if typ.startswith("kubernetes:"):
            metadata = dict(state.get("metadata") or {})
            metadata.setdefault("name", name)
            state["metadata"] = metadata
        if typ == "random:index/randomPassword:RandomPassword":
            state.setdefault("result", f"{name}-not-a-real-password")
        if typ == "kubernetes:core/v1:Service" and (state.get("spec") or {}).get("type") == "LoadBalancer":
            state["status"] = {"loadBalancer": {"ingress": [{"hostname": f"{name}.elb.us-west-2.amazonaws.com"}]}}
        return _fake_id(args), state

    def call(self, args: pulumi_mocks.MockCallArgs) -> dict[str, Any]:
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": "us-west-2", "region": "us-west-2"}
        if args.token == "aws:index/getPartition:getPartition":
            return {"id": "aws", "partition": "aws", "dnsSuffix": "amazonaws.com", "reverseDnsPrefix": "com.amazonaws"}
        if args.token == "aws:eks/getClusters:getClusters":
            return {"id": "us-west-2", "names": self.existing_clusters}
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": "123456789012", "arn": "arn:aws:iam::123456789012:user/test", "userId": "test"}
        return {}

    def _eks_cluster(self, args: pulumi_mocks.MockResourceArgs) -> dict[str, Any]:
        """`pulumi_eks.Cluster` is a component whose outputs include a reference to the
        underlying `aws.eks.Cluster`; register that resource so it can be rehydrated."""
        assert self.monitor is not None
        cluster_name = args.inputs.get("name") or args.name
        urn = f"urn:pulumi:{self.stack}::{PROJECT}::eks:index:Cluster$aws:eks/cluster:Cluster::{args.name}-eksCluster"
        aws_state = {
            "name": cluster_name,
            "arn": f"arn:aws:eks:us-west-2:123456789012:cluster/{cluster_name}",
            "endpoint": "https://example.eks.amazonaws.com",
            "version": args.inputs.get("version"),
            "vpcConfig": {"clusterSecurityGroupId": "sg-cluster", "vpcId": "vpc-1"},
            "certificateAuthority": {"data": "Y2VydA=="},
        }
        self.monitor.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, f"{cluster_name}", aws_state)
        reference = {SPECIAL_SIG_KEY: RESOURCE_REFERENCE_SIG, "urn": urn, "id": cluster_name, "packageVersion": ""}
        kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": cluster_name}]}
        return {
            **args.inputs,
            "eksCluster": reference,
            "kubeconfig": kubeconfig,
            "kubeconfigJson": json.dumps(kubeconfig),
            "autoModeNodeRoleName": f"{cluster_name}-auto-node",
            "clusterSecurityGroupId": "sg-cluster",
            "nodeSecurityGroupId": "sg-node",
        }


class CapturingMonitor(pulumi_mocks.MockMonitor):
    """Records every registration (type, name, inputs, parent) as the engine would see it."""

    def __init__(self, mocks: PlatformMocks) -> None:
        super().__init__(mocks)
        mocks.monitor = self
        self.captured: list[Captured] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            secret_paths: list[str] = []
            props = _references_as_urns(request.object)
            inputs = _reveal(pulumi.runtime.rpc.deserialize_properties(props), "", secret_paths)
            self.captured.append(
                Captured(
                    request.type,
                    request.name,
                    inputs,
                    response.urn,
                    request.parent,
                    bool(request.custom),
                    secret_paths,
                    list(request.dependencies),
                )
            )
        return response


def _references_as_urns(props: struct_pb2.Struct) -> struct_pb2.Struct:
    """A resource passed as an input (`service_role=role`) arrives as a reference; record it as its
    URN, plain data like every other input, instead of a rehydrated Resource object."""
    raw = json_format.MessageToDict(props)

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get(SPECIAL_SIG_KEY) == RESOURCE_REFERENCE_SIG:
                return value["urn"]
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return json_format.ParseDict(plain(raw), struct_pb2.Struct())


def _reveal(value: Any, path: str, secret_paths: list[str]) -> Any:
    """Unwrap Pulumi secret markers, recording where they were."""
    if isinstance(value, dict):
        if value.get(SPECIAL_SIG_KEY) == SECRET_SIG:
            secret_paths.append(path)
            return _reveal(value.get("value"), path, secret_paths)
        return {k: _reveal(v, f"{path}.{k}" if path else k, secret_paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_reveal(v, f"{path}[{i}]", secret_paths) for i, v in enumerate(value)]
    return value


def stack_config(stack: str) -> dict[str, str]:
    from contract.settings.stack_file import read_stack

    return read_stack(stack, ROOT).engine_config()


def run_program(
    stack: str, config: dict[str, str] | None = None, existing_clusters: list[str] | None = None
) -> StackRun:
    """Evaluate `__main__.py` for `stack` (or with explicit config) and return what it registered;
    `existing_clusters`: the EKS clusters the account already has (default: the stack's own)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    # A test that ran `asyncio.run` leaves the main thread without an event loop; Pulumi's
    # synchronous helpers need one.
    asyncio.set_event_loop(asyncio.new_event_loop())
    mocks = PlatformMocks(stack, existing_clusters)
    monitor = CapturingMonitor(mocks)
    pulumi.runtime.settings.ROOT.set(None)  # a fresh root Stack for every run
    set_all_config(config if config is not None else stack_config(stack))
    pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    SETTINGS.rpc_manager.clear()
    SETTINGS.outputs.clear()

    def program() -> None:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    try:
        _sync_await(run_pulumi_func(program))
    except Exception as exc:
        raise ProgramFailed(exc, monitor.captured) from exc
    root = pulumi.runtime.settings.get_root_resource()
    raw_exports = getattr(root, "outputs", {})
    exports = {key: _sync_await(_resolve(value)) for key, value in raw_exports.items()}
    secrets = {key for key, value in raw_exports.items() if _sync_await(_is_secret(value))}
    return StackRun(stack, monitor.captured, exports, secrets)


async def _resolve(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        return await value.future()
    if isinstance(value, list):
        return [await _resolve(v) for v in value]
    if isinstance(value, dict):
        return {k: await _resolve(v) for k, v in value.items()}
    return value


async def _is_secret(value: Any) -> bool:
    return isinstance(value, pulumi.Output) and await value.is_secret()
