"""Read a model's per-minute request curve and length mix from Prometheus, to replay as a trace.

Writes OUT/rates.csv (the curve: requests finished per minute, summed over replicas, with each
minute's UTC time) and OUT/lengths.csv (vLLM's prompt and generation token histograms over the
range), then prints the `--trace rates:...` spec that replays them wherever --trace is taken.
Lengths drawn from the two histograms are independent: the prompt/output pairing is lost.
"""

from __future__ import annotations

import argparse
import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

from capacity.measure.history import read_history
from capacity.measure.prometheus import PrometheusClient
from capacity.workload import rates, traces
from contract import signals


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--model", required=True, help="served model name (the model_name label)")
    parser.add_argument("--namespace", default=None, help="namespace label inside a cluster (default: any namespace)")
    parser.add_argument("--range", default="7d", help="how far back from --end, whole minutes (e.g. 7d, 36h, 90m)")
    parser.add_argument(
        "--end",
        default=None,
        help="the range's end, ISO 8601 (UTC unless it says otherwise; default: now, down to the minute)",
    )
    parser.add_argument("--out", type=Path, default=Path("history"), help="folder for rates.csv and lengths.csv")


def _range(args: argparse.Namespace) -> tuple[datetime, datetime]:
    end = rates.utc_time(args.end, "--end") if args.end else datetime.now(UTC).replace(second=0, microsecond=0)
    try:
        span = traces.duration_seconds(args.range)
    except ValueError as error:
        raise ValueError(f"--range {error}") from None
    if span < 60 or span % 60:
        raise ValueError(f"--range must be a whole number of minutes, at least one, got {args.range!r}")
    return end - timedelta(seconds=span), end


def run(args: argparse.Namespace) -> int:
    start, end = _range(args)
    client = PrometheusClient(args.prometheus, timeout_s=120.0)  # a week of minutes is a long query
    try:
        client.require_ready()
        history = read_history(client, signals.Scope(args.model, args.namespace), start, end)
    finally:
        client.close()
    args.out.mkdir(parents=True, exist_ok=True)
    curve, mix = args.out / "rates.csv", args.out / "lengths.csv"
    rates.write_curve(curve, history.curve)
    rates.write_length_mix(mix, history.mix)
    per_minute = history.curve.per_minute
    print(
        f"{args.model}: {per_minute.sum():,.0f} requests from {rates.iso(start)} to {rates.iso(end)} "
        f"({len(per_minute)} minutes, mean {history.curve.mean_per_second:.3g} req/s, "
        f"busiest minute {per_minute.max():,.0f})"
    )
    if history.empty_minutes:
        print(f"{history.empty_minutes} minutes had no sample (Prometheus or the model down): written as 0 requests")
    print(f"wrote {curve} and {mix}; replay them with:")
    print(f"  --trace {shlex.quote(f'rates:{curve}:lengths={mix}')}")
    return 0
