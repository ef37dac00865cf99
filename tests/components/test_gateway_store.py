"""The rate-limit store's start script, run by /bin/sh with stand-ins for hostname, redis-cli and
redis-server: who becomes master on a fresh start, whom a restarted pod follows, and what each
container's config says (the Redis and Sentinel directives are those of redis.conf /
sentinel.conf of Redis 7.4)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from components.gateway import store

DOMAIN = "ratelimit-redis-headless.ai-gateway.svc.cluster.local"
STUBS = {
    "hostname": 'echo "$FAKE_HOSTNAME"\n',
    # Answers `sentinel get-master-addr-by-name` for the hosts listed in $ANSWERS ("host master").
    "redis-cli": 'echo "$*" >> "$ARGV_LOG"\nhost="$2"\nmaster="$(grep "^$host " "$ANSWERS" | cut -d" " -f2)"\n'
    '[ -n "$master" ] || exit 1\necho "$master"\necho 6379\n',
    # Shows what it was started with instead of serving.
    "redis-server": 'echo "ARGS $*"\ncat "$1"\n',
}


@pytest.fixture
def run_script(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in STUBS.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    script = tmp_path / "start.sh"
    script.write_text(store.START_SCRIPT)

    def run(role: str, pod: int, answers: dict[str, str] | None = None) -> str:
        (tmp_path / "answers").write_text("".join(f"{h} {m}\n" for h, m in (answers or {}).items()))
        for directory in ("redis", "sentinel"):
            (tmp_path / directory).mkdir(exist_ok=True)
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "FAKE_HOSTNAME": f"ratelimit-redis-{pod}",
            "ANSWERS": str(tmp_path / "answers"),
            "ARGV_LOG": str(tmp_path / "redis-cli-argv"),
            "REDIS_PASSWORD": "pw",
            "HEADLESS_DOMAIN": DOMAIN,
            "SET_NAME": "ratelimit-redis",
            "REPLICAS": "3",
            "QUORUM": "2",
            "MASTER_SET": "ratelimit",
            "REDIS_PORT": "6379",
            "SENTINEL_PORT": "26379",
            "REDIS_DIR": str(tmp_path / "redis"),
            "SENTINEL_DIR": str(tmp_path / "sentinel"),
        }
        done = subprocess.run(["/bin/sh", str(script), role], env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run


def host(pod: int) -> str:
    return f"ratelimit-redis-{pod}.{DOMAIN}"


def test_redis_cli_never_gets_the_password_on_its_command_line(run_script, tmp_path: Path) -> None:
    """Any process on the node can read another's argv (/proc/<pid>/cmdline); redis-cli reads
    the password from REDISCLI_AUTH instead, which the containers set."""
    run_script("redis", 1)
    calls = (tmp_path / "redis-cli-argv").read_text().splitlines()
    assert calls and not any("pw" in call.split() for call in calls)


def test_on_a_fresh_start_pod_zero_is_master(run_script) -> None:
    config = run_script("redis", 0)
    assert "replicaof" not in config
    assert f"replica-announce-ip {host(0)}" in config


def test_on_a_fresh_start_the_other_pods_replicate_pod_zero(run_script) -> None:
    assert f"replicaof {host(0)} 6379" in run_script("redis", 2)


def test_a_restarted_pod_follows_the_master_the_sentinels_elected(run_script) -> None:
    config = run_script("redis", 0, {host(2): host(1)})
    assert f"replicaof {host(1)} 6379" in config


def test_redis_requires_the_password_and_keeps_nothing_on_disk(run_script) -> None:
    config = run_script("redis", 1)
    assert "requirepass pw" in config and "masterauth pw" in config
    assert 'save ""' in config and "appendonly no" in config


def test_sentinel_monitors_the_current_master_with_a_majority_quorum(run_script) -> None:
    config = run_script("sentinel", 1, {host(0): host(2)})
    assert config.startswith("ARGS ") and "--sentinel" in config.splitlines()[0]
    assert f"sentinel monitor ratelimit {host(2)} 6379 2" in config
    assert "sentinel auth-pass ratelimit pw" in config and "requirepass pw" in config
    # Hostnames, not pod IPs: a rescheduled pod keeps its name.
    assert config.index("sentinel resolve-hostnames yes") < config.index("sentinel monitor")
    assert "sentinel announce-hostnames yes" in config
