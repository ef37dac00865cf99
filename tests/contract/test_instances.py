"""The instance-size table and the DaemonSets of a GPU node: where a replica lands (issue 22, item 5).

The figures are Karpenter's: aws/karpenter-provider-aws@v1.14.1 (bde00654cd31)
website/content/en/docs/reference/instance-types.md, quoted below for a few rows, and its overhead
formula (pkg/providers/instancetype/types.go kubeReservedResources, evictionThreshold;
pkg/operator/options/options.go VMMemoryOverheadPercent 0.075), which every row must reproduce.
"""

from __future__ import annotations

import math

import pytest
import yaml

from components.gpu_capacity import KARPENTER_VERSION, device_plugin_values
from components.observability.objects import dcgm_values
from contract.gpu import GPU_FAMILIES
from contract.instances import (
    INSTANCE_TYPES,
    InstanceSize,
    Requests,
    daemonset_overhead,
    families,
    instance_size,
    instance_sizes,
    landing_size,
    node_daemonsets,
    pod_requests,
)
from contract.settings.models import quantity

# (instance type, vCPUs, memory MiB, allocatable cpu m, allocatable memory Mi, nvidia.com/gpu, pods),
# as the reference lists them (its lines 9735, 10246, 10490, 25159, 25266 at v1.14.1).
UPSTREAM_ROWS = [
    ("g5.xlarge", 4, 16384, 3920, 14162, 1, 58),
    ("g6.2xlarge", 8, 32768, 7910, 29317, 1, 58),
    ("g6e.xlarge", 4, 32768, 3920, 29317, 1, 58),
    ("p4d.24xlarge", 96, 1179648, 95690, 1082712, 8, 737),
    ("p5.48xlarge", 192, 2097152, 191450, 1938410, 8, 100),
]


@pytest.mark.parametrize("row", UPSTREAM_ROWS, ids=[r[0] for r in UPSTREAM_ROWS])
def test_the_table_holds_karpenters_published_figures(row):
    name, vcpus, memory, cpu, allocatable, gpus, pods = row
    assert instance_size(name) == InstanceSize(name, vcpus, memory, gpus, cpu, allocatable, pods)


def karpenter_allocatable(size: InstanceSize) -> tuple[int, int]:
    """Karpenter v1.14.1's allocatable for an AL2023 node: memory less ceil(7.5%) VM overhead, less
    kube-reserved 11 x pods + 255 Mi and the 100Mi eviction threshold; cpu less kube-reserved
    6% / 1% / 0.5% / 0.25% of the first, second, next two and remaining cores."""
    memory = size.memory_mib - math.ceil(size.memory_mib * 0.075) - (11 * size.max_pods + 255) - 100
    milli = size.vcpus * 1000
    reserved = sum(
        int((min(milli, end) - start) * share)
        for start, end, share in ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))
        if milli >= start
    )
    return milli - reserved, memory


def test_every_row_is_what_karpenters_overhead_formula_gives():
    rows = [s for f in families() for s in instance_sizes(f)]
    wrong = [s.name for s in rows if karpenter_allocatable(s) != (s.allocatable_cpu_milli, s.allocatable_memory_mib)]
    assert rows and not wrong


def test_every_family_the_settings_accept_has_sizes():
    assert set(GPU_FAMILIES) <= set(families())
    assert all(instance_sizes(f) for f in GPU_FAMILIES)


def test_sizes_are_listed_smallest_first():
    for family in families():
        order = [(s.gpus, s.vcpus, s.memory_mib) for s in instance_sizes(family)]
        assert order == sorted(order), family


def test_fractional_gpu_sizes_offer_no_whole_gpu():
    # g6f carries an L4 slice: the reference lists no nvidia.com/gpu for it.
    assert {s.gpus for s in instance_sizes("g6f")} == {0}


def test_a_14gi_predictor_lands_on_the_2xlarge_because_the_xlarge_allocates_14162mi():
    pod = pod_requests(quantity("3"), quantity("14Gi"), 1)
    assert pod == Requests(3000, 14336, 1)
    assert instance_size("g6.xlarge").allocatable_memory_mib == 14162
    landed = landing_size("g6", pod, daemonset_overhead("auto-mode", device_plugin=False))
    assert landed is not None and landed.name == "g6.2xlarge"


def test_the_daemonsets_can_push_a_replica_to_the_next_size():
    overhead = daemonset_overhead("auto-mode", device_plugin=False)
    alone = Requests(3000, 14162 - overhead.memory_mib, 1)
    landed_alone = landing_size("g5", alone, overhead)
    landed_over = landing_size("g5", alone + Requests(0, 1), overhead)
    assert landed_alone is not None and landed_alone.name == "g5.xlarge"
    assert landed_over is not None and landed_over.name == "g5.2xlarge"


def test_no_size_holds_more_gpus_than_the_family_carries():
    assert landing_size("g6", Requests(1000, 1024, 9), Requests(0, 0)) is None


def test_auto_mode_gpu_nodes_run_dcgm_node_exporter_and_mountpoint_only():
    # Auto Mode builds networking, kube-proxy, Pod Identity, EBS storage and the NVIDIA plugin in.
    on_auto = {d.name for d in node_daemonsets() if "auto-mode" in d.provisioners}
    assert on_auto == {"dcgm-exporter", "prometheus-node-exporter", "s3-csi-node"}
    assert daemonset_overhead("auto-mode", device_plugin=False) == Requests(130, 376)


def test_karpenter_gpu_nodes_add_the_cni_ebs_and_pod_identity_daemonsets():
    assert daemonset_overhead("karpenter", device_plugin=True) == Requests(185, 480)


def test_the_device_plugin_counts_only_where_the_program_installs_it():
    only = [d for d in node_daemonsets() if d.device_plugin_only]
    assert [d.name for d in only] == ["nvidia-device-plugin"] and only[0].provisioners == ("karpenter",)


def test_the_dcgm_figure_is_what_the_program_deploys():
    (dcgm,) = [d for d in node_daemonsets() if d.name == "dcgm-exporter"]
    requests = dcgm_values()["resources"]["requests"]
    assert pod_requests(quantity(requests["cpu"]), quantity(requests["memory"]), 0) == Requests(
        dcgm.cpu_milli, dcgm.memory_mib
    )


def test_the_device_plugin_is_deployed_without_requests_as_counted():
    (plugin,) = [d for d in node_daemonsets() if d.name == "nvidia-device-plugin"]
    assert "resources" not in device_plugin_values() and (plugin.cpu_milli, plugin.memory_mib) == (0, 0)


def test_every_daemonset_names_its_source():
    assert all(d.source.strip() for d in node_daemonsets())


def test_the_table_is_from_the_karpenter_the_program_deploys():
    # Bumping Karpenter means regenerating the table (scripts/karpenter_instance_types.py).
    source = yaml.safe_load(INSTANCE_TYPES.read_text())["source"]
    assert source.startswith(f"aws/karpenter-provider-aws@v{KARPENTER_VERSION} ")
