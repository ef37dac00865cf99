"""Operators from their upstream Helm charts at pinned versions, installed one way."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def helm_release(
    name: str,
    chart: str,
    version: str,
    namespace: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
    *,
    repository: str | None = None,
    values: pulumi.Input[dict[str, Any]] | None = None,
    create_namespace: bool | None = None,
    atomic: bool | None = None,
    release_name: str | None = None,
) -> k8s.helm.v3.Release:
    """A `helm.v3.Release` (several charts need hooks); `repository` is for classic chart
    repositories, an `oci://` chart needs none; `release_name` for a chart that names its objects
    after the release (unset: Pulumi's auto-name). Unset options stay unset in the release."""
    return k8s.helm.v3.Release(
        name,
        name=release_name,
        chart=chart,
        version=version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repository) if repository else None,
        namespace=namespace,
        create_namespace=create_namespace,
        values=values,
        atomic=atomic,
        opts=opts,
    )
