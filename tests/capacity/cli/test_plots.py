"""The commands' plots show what they claim (issue 37): explain's attainment axis ends at 100%
and a threshold not simulated says so in its own label; simulate's replicas panel shows desired
whole, with minReplicas and maxReplicas; the envelope marks the planning point beside the knee."""

from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure

from capacity.measure.envelope import find_knee, read_envelope
from capacity.measure.recommend import recommend
from capacity.measure.report import plot_envelope
from capacity.planning.report import plot_sensitivity, plot_timeline
from capacity.planning.run import RunOptions, run_policy
from capacity.planning.stack import load_stack_model
from capacity.workload import traces
from tests.capacity.conftest import REPO

LAB_ENVELOPE = Path(__file__).parent / "data" / "lab-a10g-envelope.csv"
NAN = float("nan")


@pytest.fixture
def drawn(monkeypatch):
    """The figures a plot function saves, kept open to be read (nothing is written)."""
    figures: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *args, **kwargs: figures.append(self))
    monkeypatch.setattr(plt, "close", lambda *args: None)
    yield figures
    for figure in figures:
        plt.close(figure)


def test_explains_attainment_axis_ends_at_100_percent_and_its_labels_stay_inside(drawn, tmp_path):
    rows = [("triggers.queueDepth.targetPerReplica", [("half 1", 0.999, 10.0), ("double 4", 1.0, 8.0)])]
    plot_sensitivity(rows, (0.997, 9.0), tmp_path / "s.png", "t")
    left = drawn[0].axes[0]
    assert left.get_xlim()[1] == 100
    double = next(t for t in left.texts if t.get_text() == "double 4")
    assert double.get_horizontalalignment() == "right"  # its label runs left of the marker at 100%


def test_a_threshold_not_simulated_says_so_in_its_own_label_not_over_the_plot(drawn, tmp_path):
    rows = [
        ("triggers.kvCache.targetPerReplica", [("half", NAN, NAN), ("double", NAN, NAN)]),
        ("minReplicas", [("half 1", 0.95, 7.0), ("double 4", 0.99, 12.0)]),
    ]
    plot_sensitivity(rows, (0.97, 9.0), tmp_path / "s.png", "t")
    left = drawn[0].axes[0]
    assert left.get_yticklabels()[0].get_text() == "triggers.kvCache.targetPerReplica (not simulated)"
    assert not [t for t in left.texts if "not simulated" in t.get_text()]


def test_simulates_replica_panel_draws_max_replicas_and_desired_below_the_top(drawn, tmp_path):
    sm = load_stack_model("prod", "qwen25-14b-awq", root=REPO)
    trace = traces.load("synthetic:step:base=2,peak=30,at=120,length=300,duration=900,prompt=512,output=128")
    result = run_policy(sm, trace, RunOptions())
    bounds = (sm.policy.min_replicas, sm.policy.max_replicas)
    plot_timeline(result, tmp_path / "t.png", "t", {"ttft_p95_s": 2.5, "tpot_p95_s": 0.1}, bounds=bounds)
    replicas = drawn[0].axes[2]
    labels = [line.get_label() for line in replicas.get_lines()]
    assert f"maxReplicas {bounds[1]}" in labels and f"minReplicas {bounds[0]}" in labels
    assert labels.index("desired") > labels.index("ready")  # drawn over ready where they coincide
    assert replicas.get_ylim()[1] > max([*result.timeline.desired, bounds[1]])


def test_the_envelope_marks_the_planning_point_beside_the_knee(drawn, tmp_path):
    rows = read_envelope(LAB_ENVELOPE)
    rec = recommend(rows, None, 2.5)
    plot_envelope(rows, find_knee(rows), tmp_path / "e.png", "lab", None, rec.planning)
    labels = [line.get_label() for line in drawn[0].axes[0].get_lines()]
    assert f"planning point: {rec.planning.concurrency} in flight, {rec.planning.successful_rps:.2f} req/s" in labels
    assert any(label.startswith("knee: ") for label in labels)
