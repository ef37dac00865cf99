"""The Job and gate settings issue 15 depends on: a retry right after a kill cleans up the killed
pod's uploads, no two pods write one prefix at once, and the gate verifies what the model asks for."""

from __future__ import annotations

from components.model_sync import STALE_UPLOAD_AGE_SECONDS, job_manifest, manifest_wait_init_container
from contract.settings.models import ModelSettings
from tests.k8s_schemas import validate

MODEL = {"name": "qwen-small", "huggingFaceId": "Qwen/Qwen2.5-0.5B-Instruct", "revision": "a" * 40, "sizeGiB": 1.2}
JOB_FIRST_RETRY_SECONDS = 10  # the Job controller's first pod-failure backoff


def test_a_retry_after_a_kill_is_old_enough_to_clean_up_and_runs_alone():
    job = job_manifest(ModelSettings.model_validate(MODEL), "weights", "us-east-1", "serving", "src", "0" * 64)
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]

    assert args[args.index("--abort-stale-uploads-after") + 1] == str(STALE_UPLOAD_AGE_SECONDS)
    assert 0 < STALE_UPLOAD_AGE_SECONDS < JOB_FIRST_RETRY_SECONDS
    assert job["spec"]["podReplacementPolicy"] == "Failed"
    assert validate(job) == []


def test_the_gate_verifies_sha256_by_default_and_sizes_only_when_the_model_says_so():
    default = manifest_wait_init_container(ModelSettings.model_validate(MODEL), "/mnt/models")
    large = manifest_wait_init_container(
        ModelSettings.model_validate({**MODEL, "gateVerification": "size"}), "/mnt/models"
    )

    assert default["args"][default["args"].index("--verify") + 1] == "sha256"
    assert large["args"][large["args"].index("--verify") + 1] == "size"
