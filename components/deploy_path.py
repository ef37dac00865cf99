"""Whether this run can reach the Kubernetes API it is about to create, decided before any resource.

A private endpoint answers only from inside its VPC (EKS user guide, "Cluster API server endpoint":
with public access off, "all traffic to your cluster API server must come from within your
cluster's VPC or a connected network"). A run that creates the cluster also creates that VPC, so
nobody can be inside it yet: the first Kubernetes object would time out after the cluster was built.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from contract.settings import NAMESPACE
from contract.settings.cluster import ClusterSettings


def refuse_unreachable_first_deploy(settings: ClusterSettings, cluster_name: str) -> None:
    """Stop a `private` stack whose cluster does not exist yet (eks:ListClusters in the stack's region)."""
    if settings.endpoint_access != "private" or cluster_name in aws.eks.get_clusters().names:
        return
    raise pulumi.RunError(
        f"{NAMESPACE}:cluster.endpointAccess ('private') cannot create EKS cluster {cluster_name!r}: this run "
        "also creates the VPC its private endpoint lives in, so nothing can reach the API to create the "
        "Kubernetes objects. Create the stack with endpointAccess 'public-allowlist' and your egress range in "
        "cluster.publicAccessCidrs, then switch to 'private' from a runner in the VPC (README, 'Deploy')"
    )
