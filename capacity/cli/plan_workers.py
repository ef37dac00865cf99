"""Print the Kubernetes Job that runs planner workers in the platform's cluster, joining one study.

Everything after `--` is the plan's own arguments, the same ones the coordinating
`python -m capacity plan ... --storage URL` runs with (they name its study). Each of the Job's pods
runs `python -m capacity plan <those arguments> --workers K --storage "$(OPTUNA_STORAGE)" --join`,
the storage URL read from the key `url` of a Secret (create it first; the README's "Many machines"),
on the cluster's general-purpose nodes, never a GPU node. Apply it with `kubectl apply -f -`.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from capacity.planning.worker_job import DEFAULT_NAME, DEFAULT_STORAGE_SECRET, STORAGE_SECRET_KEY, worker_job


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--image",
        required=True,
        help="the image holding this repository and the traces the plan arguments name, pinned by tag or digest",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker pods running at once (the Job's parallelism)")
    parser.add_argument("--namespace", required=True, help="the namespace the Job and the Secret live in")
    parser.add_argument(
        "--storage-secret",
        default=DEFAULT_STORAGE_SECRET,
        help=f"the Secret whose key `{STORAGE_SECRET_KEY}` holds the storage URL (postgresql+psycopg://...)",
    )
    parser.add_argument("--name", default=DEFAULT_NAME, help="the Job's name")
    parser.add_argument(
        "--active-deadline-seconds",
        type=int,
        default=6 * 3600,
        help="the Job's activeDeadlineSeconds: its pods are stopped after this long",
    )
    parser.add_argument(
        "--simulations-per-pod",
        type=int,
        default=1,
        help="the plan's --workers in each pod; the pod requests one CPU and one simulation's memory per simulation",
    )
    parser.add_argument("plan_args", nargs="*", metavar="-- PLAN_ARGS", help="the plan's arguments")


def run(args: argparse.Namespace) -> int:
    job = worker_job(
        list(args.plan_args),
        args.image,
        args.workers,
        args.storage_secret,
        args.namespace,
        active_deadline_seconds=args.active_deadline_seconds,
        name=args.name,
        simulations_per_pod=args.simulations_per_pod,
    )
    yaml.safe_dump(job, sys.stdout, sort_keys=False)
    return 0
