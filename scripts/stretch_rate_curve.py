"""One day of a per-minute rate curve, its daily swing stretched to a given peak over trough.

The shared curve is one service (Azure's 2024 conversation service: its days swing about 3x); a
plan judged only on it can settle on a floor that suits that swing and no other. This writes a day
of the same real minute-to-minute shape with a deeper trough, for a plan to search or validate on
alongside (`plan --trace rates:OUT:lengths=...`, docs/concepts/forecasts.md):

    rate' = peak x (rate / peak) ** gamma

which keeps the day's order of minutes and its peak (the fleet a stack already sizes for), and
chooses gamma so that the day's 15-minute-smoothed peak over its trough is `--peak-over-trough`.
Usage: python scripts/stretch_rate_curve.py --curve ../shared/traces/azure2024-conv-5days-rates.csv
       --day 4 --peak-over-trough 10 --out docs/examples/traffic/conv-day-4-10x.csv
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

import numpy as np

MINUTES_PER_DAY = 1440
SMOOTHING_MINUTES = 15  # the trough and peak of a 15-minute rolling mean, not of one noisy minute


def read_day(curve: Path, day: int) -> np.ndarray:
    """Day `day` (1-based) of a curve CSV (`minute,requests_per_minute`), one rate per minute."""
    with curve.open(newline="") as handle:
        rates = np.array([float(row["requests_per_minute"]) for row in csv.DictReader(handle)])
    start = (day - 1) * MINUTES_PER_DAY
    if day < 1 or start + MINUTES_PER_DAY > len(rates):
        raise ValueError(f"--day {day}: {curve} holds {len(rates) // MINUTES_PER_DAY} whole days")
    return rates[start : start + MINUTES_PER_DAY]


def smoothed(rates: np.ndarray) -> np.ndarray:
    kernel = np.ones(SMOOTHING_MINUTES) / SMOOTHING_MINUTES
    return np.convolve(rates, kernel, mode="valid")


def stretched(rates: np.ndarray, peak_over_trough: float) -> np.ndarray:
    """The day with its smoothed peak over trough made `peak_over_trough`, its peak kept."""
    smooth = smoothed(rates)
    low, high = float(smooth.min()), float(smooth.max())
    if not 0 < low < high:
        raise ValueError("the day has no trough above zero to stretch")
    gamma = math.log(peak_over_trough) / math.log(high / low)
    peak = float(rates.max())
    return peak * (rates / peak) ** gamma


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--curve", type=Path, required=True, help="a per-minute rate curve CSV")
    parser.add_argument("--day", type=int, required=True, help="which whole day (1-based)")
    parser.add_argument("--peak-over-trough", type=float, default=10.0, help="the stretched day's swing (default: 10)")
    parser.add_argument("--out", type=Path, required=True, help="the curve CSV to write")
    args = parser.parse_args(argv)
    if args.peak_over_trough <= 1:
        print(f"--peak-over-trough {args.peak_over_trough}: must be above 1", file=sys.stderr)
        return 2
    try:
        day = stretched(read_day(args.curve, args.day), args.peak_over_trough)
    except (OSError, ValueError, KeyError) as error:
        print(f"{args.curve}: {error}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["minute", "requests_per_minute"])
        writer.writerows((minute, round(rate, 1)) for minute, rate in enumerate(day))
    swing = smoothed(day).max() / smoothed(day).min()
    print(f"wrote {args.out}: {day.sum():.0f} requests, smoothed peak over trough {swing:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
