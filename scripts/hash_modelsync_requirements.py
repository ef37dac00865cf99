"""Pin modelsync/requirements.txt to PyPI's own file hashes (the model-sync Job installs it with
`pip --require-hashes --only-binary=:all:`, so a re-uploaded or swapped artifact cannot run).

Keeps every `name==version` line and rewrites its hashes from PyPI's simple index (JSON, PEP 691):
the wheels that can install in the Job's image (CPython 3.11, glibc Linux, x86_64 or arm64).

    .venv/bin/python scripts/hash_modelsync_requirements.py [--index https://pypi.org/simple]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import httpx

REQUIREMENTS = Path(__file__).resolve().parents[1] / "modelsync" / "requirements.txt"
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)")
HEADER = (
    "# What the model-sync Job installs at start (python image + this list): boto3 and\n"
    "# huggingface_hub with their full dependency closure, every version exact, every wheel\n"
    "# pinned to PyPI's sha256 (pip --require-hashes). Regenerate after changing a version:\n"
    "#   .venv/bin/python scripts/hash_modelsync_requirements.py\n"
)


def installable(filename: str) -> bool:
    """A wheel the Job's image (CPython 3.11, glibc, x86_64/aarch64) can install."""
    if not filename.endswith(".whl"):
        return False
    if filename.endswith("-none-any.whl"):
        return True
    python_ok = "-cp311-" in filename or "-abi3-" in filename
    return python_ok and "manylinux" in filename and ("x86_64" in filename or "aarch64" in filename)


def pins(text: str) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for line in text.splitlines() if (m := PIN.match(line.strip()))]


def wheel_hashes(client: httpx.Client, index: str, name: str, version: str) -> list[str]:
    project = re.sub(r"[-_.]+", "-", name).lower()
    response = client.get(f"{index}/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    response.raise_for_status()
    normalized = re.sub(r"[-_.]+", "_", name).lower()
    hashes = sorted(
        f["hashes"]["sha256"]
        for f in response.json()["files"]
        if f["filename"].lower().startswith(f"{normalized}-{version}-")
        and installable(f["filename"])
        and not f.get("yanked")
    )
    if not hashes:
        raise SystemExit(f"{name}=={version}: PyPI has no wheel the Job's image can install")
    return hashes


def render(locked: list[tuple[str, str, list[str]]]) -> str:
    lines = [HEADER.rstrip("\n")]
    for name, version, hashes in locked:
        lines.append(f"{name}=={version} \\")
        lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", default="https://pypi.org/simple")
    args = parser.parse_args()
    with httpx.Client(timeout=30, follow_redirects=True) as client:
        locked = [(n, v, wheel_hashes(client, args.index.rstrip("/"), n, v)) for n, v in pins(REQUIREMENTS.read_text())]
    REQUIREMENTS.write_text(render(locked))
    print(f"{REQUIREMENTS}: {len(locked)} pins, {sum(len(h) for *_, h in locked)} wheel hashes")


if __name__ == "__main__":
    main()
