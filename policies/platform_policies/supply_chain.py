"""What runs is pinned: container images, Helm charts, node AMIs and model revisions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from . import k8s
from .base import Subject, resource_policy
from .platform import VLLM_IMAGE_REPOSITORY, VLLM_IMAGE_TAG

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_CHART = "kubernetes:helm.sh/v4:Chart"
EC2_NODE_CLASS = ("karpenter.k8s.aws", "EC2NodeClass")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
REVISION_FLAGS = ("--revision", "--code-revision", "--tokenizer-revision")
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned (None when it is)."""
    if "@sha256:" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return "has no tag (resolves to latest)"
    repository, tag = image.rsplit(":", 1)
    if tag == "latest":
        return "uses the latest tag"
    if repository.endswith(VLLM_IMAGE_REPOSITORY) and tag != VLLM_IMAGE_TAG:
        return (
            f"is vLLM {tag}, but contract/signals.py names the metrics of {VLLM_IMAGE_TAG} "
            "(scaling triggers and alerts would read names this image may not expose)"
        )
    return None


def _revisions(container: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, value) of every model revision a container is given (CLI flags, *REVISION env vars)."""
    # Unknown elements (a bucket name from this update) are skipped; known ones are still checked.
    args = [str(a) for a in (*k8s.known_items(container, "command"), *k8s.known_items(container, "args"))]
    for index, arg in enumerate(args):
        for flag in REVISION_FLAGS:
            if arg == flag:
                yield flag, args[index + 1] if index + 1 < len(args) else ""
            elif arg.startswith(flag + "="):
                yield flag, arg.split("=", 1)[1]
    for env in k8s.known_items(container, "env"):
        name = str(k8s.get(env, "name", default="", unknown=""))
        value = k8s.get(env, "value", unknown=None)
        if name.upper().endswith("REVISION") and value is not None:
            yield f"env {name}", str(value)


def _check_pinned(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    if subject.resource_type in (HELM_RELEASE, HELM_CHART):
        version = k8s.get(subject.props, "version")
        chart = k8s.get(subject.props, "chart")
        if not isinstance(version, str) or not EXACT_VERSION.match(version):
            yield f"Helm release '{subject.name}' ({chart}): chart version {version!r} is not an exact version"
        return
    gk = subject.gk
    if gk is None:
        return
    if gk == EC2_NODE_CLASS:
        for term in k8s.items(subject.props, "spec", "amiSelectorTerms"):
            alias = k8s.get(term, "alias")
            if isinstance(alias, str) and alias.endswith("@latest"):
                yield f"{subject.label}: amiSelectorTerms alias {alias} floats to every new AMI"
    for where, pod_spec in k8s.pod_specs(gk, subject.props):
        for name, container in k8s.containers(pod_spec):
            image = k8s.get(container, "image")
            if isinstance(image, str):
                problem = image_problem(image)
                if problem:
                    yield f"{subject.label}: {where}.{name} image {image} {problem}"
            for flag, value in _revisions(container):
                if not COMMIT.match(value):
                    yield f"{subject.label}: {where}.{name} {flag} {value!r} is not a 40-hex commit"


pinned = resource_policy(
    name="images-and-model-revisions-pinned",
    description=(
        "Container images carry an explicit tag other than latest (or a digest), vLLM images match the version "
        "signals.py describes, Helm charts and node AMIs are pinned, and model revisions are 40-hex commits."
    ),
    remediation=(
        "Pin images as repo:tag (models[].image defaults to the pinned vLLM), chart versions exactly, EC2NodeClass "
        "AMI aliases to a dated version (e.g. al2023@v20250505), and models[].revision to the full commit hash of "
        "the Hugging Face revision (not a branch such as main)."
    ),
    check=_check_pinned,
)

POLICIES = [pinned]
