"""The GitHub workflows: valid against GitHub's workflow schema, tests on every pull request,
a policy-checked preview of every stack commented on the pull request, OIDC credentials
only, and deployments only from main with a manual approval before prod."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in ROOT.glob("Pulumi.*.yaml"))
PULUMI_ACTION = "pulumi/actions"
AWS_CREDENTIALS_ACTION = "aws-actions/configure-aws-credentials"
# An action reference pinned to a commit: `owner/name@<40 hex>` (a tag can be moved to new code).
PINNED_ACTION = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")
APPLYING_COMMANDS = {"up", "update", "destroy", "refresh"}


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def triggers(workflow: dict[str, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the bare key `on` as the boolean True.
    on = workflow.get("on", workflow.get(True))
    return on if isinstance(on, dict) else {name: None for name in ([on] if isinstance(on, str) else on)}


def steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(job id, job, step) for every step of every job."""
    return [(job_id, job, step) for job_id, job in workflow["jobs"].items() for step in job.get("steps", [])]


def pulumi_steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    return [(j, job, s) for j, job, s in steps(workflow) if s.get("uses", "").startswith(PULUMI_ACTION + "@")]


def by_name(name: str) -> dict[str, Any]:
    return load(WORKFLOWS / f"{name}.yml")


def test_there_are_ci_preview_and_deploy_workflows() -> None:
    assert {p.stem for p in FILES} >= {"ci", "preview", "deploy"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_validates_against_the_github_workflow_schema(path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_schema_check_rejects_an_invalid_workflow(tmp_path: Path) -> None:
    """The schema check can fail: a job without `runs-on` (or `uses`) is not a workflow job."""
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  build:\n    steps:\n      - run: make test\n")
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0


def test_ci_runs_the_readme_test_command_on_pull_requests() -> None:
    ci = by_name("ci")
    assert "pull_request" in triggers(ci)
    runs = [s.get("run", "") for _, _, s in steps(ci)]
    assert any(".ci/run" in r for r in runs)
    # .ci/run is the README's `make test`.
    assert "make test" in (ROOT / ".ci" / "run").read_text() and "make test" in (ROOT / "README.md").read_text()


def preview_jobs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Stack name -> (job, its pulumi step) of the preview workflow."""
    return {step["with"]["stack-name"]: (job, step) for _, job, step in pulumi_steps(by_name("preview"))}


def role_of(job: dict[str, Any]) -> str:
    [credentials] = [s for s in job["steps"] if s.get("uses", "").startswith(AWS_CREDENTIALS_ACTION + "@")]
    return credentials["with"]["role-to-assume"]


def test_preview_runs_every_stack_with_the_policy_pack_and_its_config() -> None:
    jobs = preview_jobs()
    assert sorted(jobs) == STACKS
    for stack, (_job, step) in jobs.items():
        assert step["with"]["command"] == "preview"
        assert step["with"]["policyPacks"] == "policies"
        assert step["with"]["policyPackConfigs"] == f"policies/config/{stack}.json"
        assert (ROOT / "policies" / "config" / f"{stack}.json").is_file()


def test_prod_preview_runs_only_in_its_reviewed_environment() -> None:
    """A pull_request job's OIDC subject (`repo:<org>/<repo>:pull_request`) names no branch or
    actor, so any pushed branch could run its own code with a role trusted for it. The prod
    preview names the `prod-preview` environment, whose required reviewers approve the job and
    whose subject (`repo:<org>/<repo>:environment:prod-preview`, GitHub docs "OpenID Connect
    reference") the prod preview role trusts alone."""
    job, _ = preview_jobs()["prod"]
    assert job["environment"] == "prod-preview"
    assert role_of(job) == "${{ vars.AWS_PREVIEW_PROD_ROLE_ARN }}"


def test_pull_request_preview_without_an_environment_is_dev_only_with_the_dev_role() -> None:
    jobs = preview_jobs()
    unreviewed = {stack for stack, (job, _) in jobs.items() if "environment" not in job}
    assert unreviewed == {"dev"}
    assert role_of(jobs["dev"][0]) == "${{ vars.AWS_PREVIEW_DEV_ROLE_ARN }}"
    assert role_of(jobs["dev"][0]) != role_of(jobs["prod"][0])


def test_preview_grants_the_oidc_token_per_job_not_workflow_wide() -> None:
    preview = by_name("preview")
    assert "id-token" not in preview["permissions"]
    for job, _ in preview_jobs().values():
        assert job["permissions"]["id-token"] == "write"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_tag_beside_it(path: Path) -> None:
    lines = path.read_text().splitlines()
    for _, _, step in steps(load(path)):
        uses = step.get("uses", "")
        if not uses or uses.startswith("./"):
            continue
        assert PINNED_ACTION.match(uses), f"{path.name}: {uses} is not pinned to a commit SHA"
        line = next(line for line in lines if f"uses: {uses}" in line)
        assert re.search(r"# v\d+\.\d+\.\d+$", line), f"{path.name}: {uses} has no tag comment"


def test_preview_comments_the_diff_on_the_pull_request() -> None:
    preview = by_name("preview")
    assert set(triggers(preview)) == {"pull_request"}
    for job, step in preview_jobs().values():
        assert step["with"]["comment-on-pr"] is True and step["with"]["diff"] is True
        assert job["permissions"]["pull-requests"] == "write"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_pull_request_workflow_applies_changes(path: Path) -> None:
    workflow = load(path)
    on = triggers(workflow)
    if not {"pull_request", "pull_request_target"} & set(on):
        return
    commands = {s["with"].get("command") for _, _, s in pulumi_steps(workflow)}
    assert not commands & APPLYING_COMMANDS
    assert not any(
        "pulumi up" in s.get("run", "") or "pulumi destroy" in s.get("run", "") for _, _, s in steps(workflow)
    )


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_cloud_credentials_come_from_oidc_role_assumption(path: Path) -> None:
    workflow = load(path)
    text = path.read_text()
    assert "aws-access-key-id" not in text and "AWS_SECRET_ACCESS_KEY" not in text and "PULUMI_ACCESS_TOKEN" not in text
    for job_id, job, _ in pulumi_steps(workflow):
        job_steps = job["steps"]
        credentials = [s for s in job_steps if s.get("uses", "").startswith(AWS_CREDENTIALS_ACTION + "@")]
        assert credentials, f"{path.name}:{job_id} runs Pulumi without assuming a role"
        assert credentials[0]["with"]["role-to-assume"].startswith("${{ vars.")
        first_pulumi = next(i for i, s in enumerate(job_steps) if s.get("uses", "").startswith("pulumi/actions@"))
        assert job_steps.index(credentials[0]) < first_pulumi, f"{path.name}:{job_id} assumes the role too late"
        permissions = job.get("permissions", workflow.get("permissions", {}))
        assert permissions.get("id-token") == "write", f"{path.name}:{job_id} cannot request an OIDC token"


def test_deploy_runs_only_for_pushes_to_main() -> None:
    deploy = by_name("deploy")
    assert triggers(deploy) == {"push": {"branches": ["main"]}}
    for job_id, job, _ in pulumi_steps(deploy):
        assert "refs/heads/main" in job["if"], job_id


def test_deploy_tests_first_then_dev_then_prod_behind_its_environment() -> None:
    jobs = by_name("deploy")["jobs"]
    assert jobs["test"]["uses"] == "./.github/workflows/ci.yml"
    assert jobs["dev"]["needs"] == "test" and jobs["dev"]["environment"] == "dev"
    assert jobs["prod"]["needs"] == "dev" and jobs["prod"]["environment"] == "prod"
    [(_, _, step)] = [s for s in pulumi_steps(by_name("deploy")) if s[0] == "prod"]
    assert step["with"]["command"] == "up" and step["with"]["stack-name"] == "prod"
    assert step["with"]["policyPackConfigs"] == "policies/config/prod.json"


def test_deploy_never_cancels_a_running_update() -> None:
    assert by_name("deploy")["concurrency"]["cancel-in-progress"] is False


def test_ci_is_callable_from_the_deploy_workflow() -> None:
    assert "workflow_call" in triggers(by_name("ci"))


@pytest.mark.parametrize("name", ["preview", "deploy"])
def test_pulumi_runs_on_the_runner_inside_its_stacks_vpc(name: str) -> None:
    """The stacks' API endpoints are private (cluster.endpointAccess): a GitHub-hosted runner cannot
    reach them, so every job that previews or deploys a stack runs on the self-hosted runner
    labelled for that stack (README, "Deploy")."""
    for job_id, job, step in pulumi_steps(by_name(name)):
        runs_on = job["runs-on"]
        assert isinstance(runs_on, list) and "self-hosted" in runs_on, job_id
        assert f"inference-platform-{step['with']['stack-name']}" in runs_on, job_id


def test_tests_still_run_on_github_hosted_runners() -> None:
    """Only what talks to a cluster needs the runner in the VPC; `make test` needs no cloud."""
    assert by_name("ci")["jobs"]["test"]["runs-on"].startswith("ubuntu-")


LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;\\]+)")


def _pins(path: Path) -> dict[str, str]:
    normalize = lambda name: re.sub(r"[-_.]+", "-", name).lower()  # noqa: E731 (PEP 503 names)
    return {normalize(m[1]): m[2] for line in path.read_text().splitlines() if (m := PIN.match(line.strip()))}


@pytest.mark.parametrize("name", ["preview.yml", "deploy.yml"])
def test_jobs_with_a_cloud_role_install_only_hash_checked_packages(name: str) -> None:
    """pip's hash-checking mode refuses any distribution whose sha256 the lock does not list (pip
    docs, "Secure installs"): these jobs run the installed code with the stack's role."""
    installs = [
        line
        for _, _, step in steps(load(WORKFLOWS / name))
        for line in str(step.get("run", "")).splitlines()
        if re.search(r"\bpip3?\s+install\b", line)
    ]
    assert installs and all("--require-hashes -r requirements.lock" in line for line in installs)


def test_the_lock_pins_what_the_program_and_the_pack_pin_with_hashes_for_every_package() -> None:
    locked = _pins(LOCK)
    wanted = {**_pins(ROOT / "requirements.txt"), **_pins(ROOT / "policies" / "requirements.txt")}
    assert {name: locked.get(name) for name in wanted} == wanted
    hashes: dict[str, int] = {}
    current = ""
    for line in LOCK.read_text().splitlines():
        if m := PIN.match(line):
            current = m[1]
            hashes[current] = 0
        elif current and "--hash=sha256:" in line:
            hashes[current] += 1
    assert len(hashes) == len(locked) and all(hashes.values())
