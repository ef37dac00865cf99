"""The policy pack imports only `contract/` (pydantic and yaml): loading it, as the analyzer
does, starts no cloud SDK."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.harness import ROOT

CLOUD_SDKS = ("pulumi_aws", "pulumi_eks", "pulumi_kubernetes")

# `policies/__main__.py` as Pulumi runs it (the pack directory on sys.path), with a PolicyPack
# that records its policies instead of starting the analyzer's gRPC server.
LOAD_PACK = f"""
import json, runpy, sys
import pulumi_policy
built = []
pulumi_policy.PolicyPack.__init__ = lambda self, *args, **kwargs: built.append(len(kwargs["policies"]))
sys.path.insert(0, {str(ROOT / "policies")!r})
runpy.run_path({str(ROOT / "policies" / "__main__.py")!r}, run_name="__main__")
print(json.dumps({{"policies": built, "sdks": [m for m in {list(CLOUD_SDKS)!r} if m in sys.modules]}}))
"""


def load_pack() -> dict[str, list]:
    result = subprocess.run(
        [sys.executable, "-c", LOAD_PACK], capture_output=True, text=True, cwd=ROOT / "policies", timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_loading_the_policy_pack_builds_it_without_importing_a_cloud_sdk() -> None:
    loaded = load_pack()
    (policies,) = loaded["policies"]
    assert policies > 0
    assert loaded["sdks"] == []
