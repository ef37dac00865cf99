"""Where model files come from: the Hugging Face hub at a pinned commit, or a local mirror."""

from __future__ import annotations

import errno
import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import MANIFEST_NAME
from .errors import SyncError

# huggingface_hub keeps download metadata inside local_dir; it is not part of the model.
_HF_METADATA_DIR = ".cache"


@dataclass(frozen=True)
class SourceFile:
    rel_path: str  # "/"-separated, relative to the model root; becomes the S3 key suffix
    path: Path


def matches(rel_path: str, include: list[str], exclude: list[str]) -> bool:
    """Hub-style glob matching on the relative path (fnmatch: `*` also crosses `/`)."""
    included = not include or any(fnmatch.fnmatchcase(rel_path, p) for p in include)
    return included and not any(fnmatch.fnmatchcase(rel_path, p) for p in exclude)


def list_files(
    root: Path, include: list[str], exclude: list[str], skip_dirs: frozenset[str] = frozenset()
) -> list[SourceFile]:
    """Every regular file under root that the patterns select, sorted, symlinks followed."""
    if not root.is_dir():
        raise SyncError(f"source directory {root} does not exist or is not a directory")
    found: list[SourceFile] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [d for d in dirnames if d not in skip_dirs]
        for name in filenames:
            path = here / name
            rel = path.relative_to(root).as_posix()
            if rel == MANIFEST_NAME:
                raise SyncError(f"source file {path} uses the reserved name {MANIFEST_NAME}")
            if matches(rel, include, exclude):
                if not path.is_file():
                    raise SyncError(f"source file {path} is not a readable regular file (broken symlink?)")
                found.append(SourceFile(rel, path))
    if not found:
        raise SyncError(f"no files under {root} match --include {include or ['*']} / --exclude {exclude}")
    return sorted(found, key=lambda f: f.rel_path)


def hub_download_kwargs(
    model_id: str,
    revision: str,
    staging_dir: Path,
    include: list[str],
    exclude: list[str],
    token: str | None,
    max_workers: int,
    endpoint: str | None = None,
) -> dict[str, Any]:
    """Arguments for huggingface_hub.snapshot_download: exact commit, files straight into staging_dir."""
    return {
        "repo_id": model_id,
        "repo_type": "model",
        "revision": revision,
        "local_dir": str(staging_dir),
        "allow_patterns": include or None,
        "ignore_patterns": exclude or None,
        "token": token or False,  # False: never fall back to a token cached on the machine
        "max_workers": max_workers,
        "endpoint": endpoint,  # None: the public hub, or HF_ENDPOINT
    }


def download_from_hub(
    model_id: str,
    revision: str,
    staging_dir: Path,
    include: list[str],
    exclude: list[str],
    token: str | None,
    max_workers: int,
    endpoint: str | None = None,
) -> list[SourceFile]:
    """Downloads the pinned commit (the hub verifies LFS files' SHA-256) and lists what arrived."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    staging_dir.mkdir(parents=True, exist_ok=True)
    kwargs = hub_download_kwargs(model_id, revision, staging_dir, include, exclude, token, max_workers, endpoint)
    try:
        snapshot_download(**kwargs)
    except GatedRepoError:
        raise SyncError(
            f"{model_id} is gated: the token in HF_TOKEN lacks access (accept the licence on the hub)"
        ) from None
    except RevisionNotFoundError:
        raise SyncError(f"revision {revision} does not exist in {model_id}") from None
    except RepositoryNotFoundError:
        raise SyncError(f"{model_id} not found on the hub, or private and HF_TOKEN is missing/invalid") from None
    except LocalEntryNotFoundError as err:
        raise SyncError(f"cannot reach the Hugging Face hub to download {model_id}@{revision}: {err}") from None
    except HfHubHTTPError as err:
        raise SyncError(f"hub request for {model_id}@{revision} failed: {err}") from None
    except OSError as err:
        raise disk_error(err, staging_dir) from None
    return list_files(staging_dir, include, exclude, skip_dirs=frozenset({_HF_METADATA_DIR}))


def disk_error(err: OSError, where: Path) -> SyncError:
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return SyncError(f"disk full while writing under {where}: ephemeral storage must exceed the model size ({err})")
    return SyncError(f"file system error under {where}: {err}")
