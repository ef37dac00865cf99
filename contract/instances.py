"""The EC2 instance sizes a GPU replica can land on, and which one it does.

A predictor pod lands on the smallest size of its instance family whose allocatable CPU, memory
and GPUs hold its requests plus the DaemonSet pods every GPU node runs (Karpenter and the
scheduler count both). A g5/g6 `.xlarge` allocates 14,162Mi, so a 14Gi predictor lands on the
`.2xlarge`: that is the instance the pool bills. Sizes: data/instance_types.yaml (Karpenter's
instance-type reference at the pinned v1.14.1); DaemonSets: data/gpu_node_daemonsets.yaml.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "data"
INSTANCE_TYPES = DATA / "instance_types.yaml"
DAEMONSETS = DATA / "gpu_node_daemonsets.yaml"
MIB = 2**20


@dataclass(frozen=True)
class InstanceSize:
    """One EC2 instance type: what it has and what the kubelet offers pods on it."""

    name: str  # "g6.2xlarge"
    vcpus: int
    memory_mib: int
    gpus: int  # whole GPUs as the nvidia.com/gpu resource
    allocatable_cpu_milli: int
    allocatable_memory_mib: int
    max_pods: int

    @property
    def family(self) -> str:
        return self.name.split(".")[0]


@dataclass(frozen=True)
class NodeDaemonSet:
    """A DaemonSet pod on every GPU node, with its requests and where the figures come from."""

    name: str
    cpu_milli: int
    memory_mib: int
    provisioners: tuple[str, ...]
    device_plugin_only: bool
    source: str


@dataclass(frozen=True)
class Requests:
    """What one pod (or a node's DaemonSets together) requests: millicores, MiB, whole GPUs."""

    cpu_milli: int
    memory_mib: int
    gpus: int = 0

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu_milli + other.cpu_milli, self.memory_mib + other.memory_mib, self.gpus + other.gpus)

    def fits(self, size: InstanceSize) -> bool:
        return (
            self.cpu_milli <= size.allocatable_cpu_milli
            and self.memory_mib <= size.allocatable_memory_mib
            and self.gpus <= size.gpus
        )


@functools.cache
def _sizes() -> dict[str, tuple[InstanceSize, ...]]:
    document: dict[str, Any] = yaml.safe_load(INSTANCE_TYPES.read_text())
    return {
        family: tuple(
            InstanceSize(
                name=row["size"],
                vcpus=row["vcpus"],
                memory_mib=row["memoryMiB"],
                gpus=row["gpus"],
                allocatable_cpu_milli=row["allocatableCpuMilli"],
                allocatable_memory_mib=row["allocatableMemoryMiB"],
                max_pods=row["maxPods"],
            )
            for row in rows
        )
        for family, rows in document["families"].items()
    }


def instance_sizes(family: str) -> tuple[InstanceSize, ...]:
    """The sizes of an instance family, smallest first (KeyError: a family with no table)."""
    return _sizes()[family]


def families() -> tuple[str, ...]:
    """Every instance family the table holds."""
    return tuple(_sizes())


def instance_size(name: str) -> InstanceSize:
    """One instance type by name ("g6.2xlarge"); KeyError if the table has none."""
    for size in _sizes().get(name.split(".")[0], ()):
        if size.name == name:
            return size
    raise KeyError(name)


@functools.cache
def node_daemonsets() -> tuple[NodeDaemonSet, ...]:
    document: dict[str, Any] = yaml.safe_load(DAEMONSETS.read_text())
    return tuple(
        NodeDaemonSet(
            name=row["name"],
            cpu_milli=row["cpuMilli"],
            memory_mib=row["memoryMiB"],
            provisioners=tuple(row["provisioners"]),
            device_plugin_only=bool(row.get("devicePluginOnly", False)),
            source=row["source"],
        )
        for row in document["daemonsets"]
    )


def daemonset_overhead(provisioner: str, device_plugin: bool) -> Requests:
    """What the DaemonSets on one GPU node request together under this provisioner; the device
    plugin's only when the program installs it (Karpenter on AL2023)."""
    total = Requests(0, 0)
    for ds in node_daemonsets():
        if provisioner in ds.provisioners and (device_plugin or not ds.device_plugin_only):
            total += Requests(ds.cpu_milli, ds.memory_mib)
    return total


def pod_requests(cpu: float, memory_bytes: float, gpus: int) -> Requests:
    """A pod's requests from cores and bytes (a Kubernetes quantity's value), rounded up as the
    scheduler compares them (millicores, MiB)."""
    return Requests(math.ceil(round(cpu * 1000, 6)), math.ceil(round(memory_bytes / MIB, 6)), gpus)


def landing_size(family: str, pod: Requests, overhead: Requests) -> InstanceSize | None:
    """The smallest size of `family` whose allocatable holds the pod and the node's DaemonSets
    (None: no size does)."""
    need = pod + overhead
    return next((s for s in instance_sizes(family) if need.fits(s)), None)


def largest_allocatable(family: str) -> InstanceSize:
    """The size of `family` with the most allocatable memory (what a refusal names)."""
    return max(instance_sizes(family), key=lambda s: (s.allocatable_memory_mib, s.allocatable_cpu_milli))
