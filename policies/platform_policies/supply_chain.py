"""What runs is pinned: container images, Helm charts, node AMIs and model revisions."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import PolicyConfigSchema

from contract import images

from . import k8s
from .base import Subject, resource_policy
from .platform import VLLM_IMAGE_REPOSITORY, VLLM_IMAGE_TAG

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_CHART = "kubernetes:helm.sh/v4:Chart"
EC2_NODE_CLASS = ("karpenter.k8s.aws", "EC2NodeClass")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
REVISION_FLAGS = ("--revision", "--code-revision", "--tokenizer-revision")
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")


def image_problem(image: str, require_digest: bool = True) -> str | None:
    """Why an image reference is not pinned (None when it is). A tag is a name the registry may
    move (Docker Official Images rebuild theirs in place when the base updates); only a digest
    fixes the bytes a node pulls (containerd pulls a reference with a digest by the digest)."""
    ref = images.parse(image)
    if ref is None:
        return "is not an image reference this policy can read"
    if ref.tag is None and ref.digest is None:
        return "has no tag (resolves to latest)"
    if ref.tag == "latest" and ref.digest is None:
        return "uses the latest tag"
    if ref.tag is not None and ref.repository.endswith(VLLM_IMAGE_REPOSITORY) and ref.tag != VLLM_IMAGE_TAG:
        return (
            f"is vLLM {ref.tag}, but contract/signals.py names the metrics of {VLLM_IMAGE_TAG} "
            "(scaling triggers and alerts would read names this image may not expose)"
        )
    if require_digest and ref.digest is None:
        return (
            "is pinned by tag only; a tag can be re-pushed, so a new node may pull other bytes with no diff in "
            "the preview (pin repo:tag@sha256:<digest>, see scripts/pin_image_digests.py)"
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


def _check_pinned(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
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
                problem = image_problem(image, bool(config.get("requireDigest", True)))
                if problem:
                    yield f"{subject.label}: {where}.{name} image {image} {problem}"
            for flag, value in _revisions(container):
                if not COMMIT.match(value):
                    yield f"{subject.label}: {where}.{name} {flag} {value!r} is not a 40-hex commit"


pinned = resource_policy(
    name="images-and-model-revisions-pinned",
    description=(
        "Container images carry a digest (repo:tag@sha256:...; with requireDigest false, a tag other than latest "
        "is enough), vLLM images match the version signals.py describes, Helm charts and node AMIs are pinned, and "
        "model revisions are 40-hex commits."
    ),
    remediation=(
        "Pin images as repo:tag@sha256:<digest> (contract/images.py holds the platform's; "
        "scripts/pin_image_digests.py refreshes them from the registries), chart versions exactly, EC2NodeClass "
        "AMI aliases to a dated version (e.g. al2023@v20250505), and models[].revision to the full commit hash of "
        "the Hugging Face revision (not a branch such as main)."
    ),
    check=_check_pinned,
    config=PolicyConfigSchema(properties={"requireDigest": {"type": "boolean", "default": True}}),
)

# --- packages installed at start-up ----------------------------------------------------------

PIP_INSTALL = re.compile(r"\bpip3?(\.\d+)?\s+install\b|-m\s+pip\s+install\b")
# pip's hash-checking mode refuses any distribution whose digest the requirements file does not
# pin, and --only-binary=:all: refuses source distributions, whose build runs their own code
# (pip docs, "Secure installs" and "pip install --only-binary").
REQUIRED_PIP_FLAGS = {
    "--require-hashes": re.compile(r"(^|\s)--require-hashes(\s|$)"),
    "--only-binary=:all:": re.compile(r"(^|\s)--only-binary(=|\s+)(:all:|\"?:all:\"?)(\s|;|$)"),
}


def _check_pip(subject: Subject, _config: Mapping[str, Any]) -> Iterator[str]:
    gk = subject.gk
    if gk is None:
        return
    for where, pod_spec in k8s.pod_specs(gk, subject.props):
        for name, container in k8s.containers(pod_spec):
            text = " ".join(
                str(a) for a in (*k8s.known_items(container, "command"), *k8s.known_items(container, "args"))
            )
            for command in (c.strip() for c in re.split(r"[;&|\n]+", text)):
                if not PIP_INSTALL.search(command):
                    continue
                missing = [flag for flag, pattern in REQUIRED_PIP_FLAGS.items() if not pattern.search(command)]
                if missing:
                    yield (
                        f"{subject.label}: {where}.{name} runs pip install without {missing}: it would install "
                        "whatever the index serves under those names at start-up, with the pod's credentials"
                    )


pip_hashes = resource_policy(
    name="pip-installs-require-hashes",
    description=(
        "A container that installs Python packages when it starts (the model-sync Job) does so in pip's "
        "hash-checking mode and from wheels only (--require-hashes --only-binary=:all:): the packages run with the "
        "writer's AWS credentials, so a changed package on the index must fail the install, not run."
    ),
    remediation=(
        "Keep `--require-hashes --only-binary=:all:` in components/model_sync.py and every dependency of "
        "modelsync/requirements.txt pinned with its --hash lines."
    ),
    check=_check_pip,
)

# --- predictors serve only verified weights ------------------------------------------------

VERIFY_FLAG = "--verify"
DEFAULT_VERIFY_MODES = ["sha256"]


def _verify_modes(container: Mapping[str, Any]) -> list[str]:
    args = [str(a) for a in (*k8s.known_items(container, "command"), *k8s.known_items(container, "args"))]
    modes = [args[i + 1] for i, a in enumerate(args[:-1]) if a == VERIFY_FLAG]
    return modes + [a.split("=", 1)[1] for a in args if a.startswith(VERIFY_FLAG + "=")]


def _check_weights_verified(subject: Subject, config: Mapping[str, Any]) -> Iterator[str]:
    if subject.gk != k8s.INFERENCE_SERVICE:
        return
    predictor = k8s.get(subject.props, "spec", "predictor")
    if not k8s.is_map(predictor):
        return
    gates = [(n, _verify_modes(c)) for n, c in k8s.containers(predictor) if n.startswith("initContainers")]
    modes = [m for _, found in gates for m in found]
    allowed = list(config.get("allowedModes", DEFAULT_VERIFY_MODES))
    if not modes:
        yield (
            f"{subject.label}: no init container gates the predictor on the published manifest ({VERIFY_FLAG}); "
            "it would serve whatever bytes the prefix holds"
        )
    elif any(m not in allowed for m in modes):
        yield (
            f"{subject.label}: the weights gate runs with {VERIFY_FLAG} {sorted(set(modes))}, not {allowed}; a size "
            "check accepts a file overwritten in place with other bytes of the same length"
        )


weights_verified = resource_policy(
    name="predictors-serve-only-verified-weights",
    description=(
        "Every InferenceService predictor starts behind the weights gate (modelsync's mounted check as an init "
        "container) with --verify sha256: a size check alone accepts a same-sized file with other bytes."
    ),
    remediation=(
        "Keep models[].gateVerification at sha256 (components/serving/objects.py builds the wait-for-model gate). A "
        "stack that chooses size for a very large model says so in its policy config: "
        '{"predictors-serve-only-verified-weights": {"allowedModes": ["sha256", "size"]}}.'
    ),
    check=_check_weights_verified,
    config=PolicyConfigSchema(
        properties={
            "allowedModes": {
                "type": "array",
                "items": {"type": "string", "enum": ["sha256", "size"]},
                "default": DEFAULT_VERIFY_MODES,
            }
        }
    ),
)

POLICIES = [pinned, pip_hashes, weights_verified]
