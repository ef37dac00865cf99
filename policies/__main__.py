"""The inference platform's policy pack: `pulumi preview --policy-pack policies`.

The policies import the platform's own constants (GPU taint, vLLM metric names, naming
contract) from `contract/`, one directory up (no Pulumi imports there, so no cloud SDK loads); Pulumi runs this file with the pack
directory on sys.path, so the project root is added here. Nothing else happens here:
constructing a PolicyPack starts the analyzer's gRPC server and never returns.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from platform_policies import PACK_NAME, POLICIES
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(name=PACK_NAME, enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)
