"""The restricted security context every platform pod runs with (Kubernetes Pod Security
Standards, "restricted"): non-root, no privilege escalation, no capabilities, read-only root,
the runtime's default seccomp profile. One definition for serving, model sync and the store."""

from __future__ import annotations

from typing import Any

# A UID with no passwd entry in the images (distroless "nonroot"): never root, whatever the image says.
NON_ROOT_UID = 65532


def pod_security_context(uid: int = NON_ROOT_UID) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(**extra: Any) -> dict[str, Any]:
    """The container half; `extra` adds fields such as `runAsNonRoot` for a container that
    must say so itself (an init container in a pod this program does not own)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        **extra,
    }
