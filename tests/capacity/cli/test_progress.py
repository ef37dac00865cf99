"""Progress: a sweep's bar moves within each level; piped, the long commands print a line every few seconds."""

import io

from capacity.cli.progress import counted, describe, fraction_done

TICK = {"now_s": 30.0, "end_s": 120.0, "phase": "measure", "completed": 7, "measured_ok": 3, "recent_p99_s": 1.5}


def test_a_single_load_run_is_as_far_as_its_clock():
    assert fraction_done(TICK) == 0.25


def test_a_sweep_advances_within_a_level():
    state = {**TICK, "level_index": 2, "levels": 4, "concurrency": 20}
    assert fraction_done(state) == (2 + 0.25) / 4
    assert describe(state).startswith("concurrency 20 (3/4)  measure  done 7")


def test_piped_progress_prints_a_plain_line_per_interval_and_one_when_done():
    out = io.StringIO()  # not a TTY, as under `tee` or in CI
    with counted("plan prod/m", True, "candidates", every_s=0.0, stream=out) as update:
        assert update is not None
        update(1, 40)
        update(2, 40)
    lines = out.getvalue().splitlines()
    assert [line.rsplit(",", 1)[0] for line in lines] == [
        "plan prod/m: 1/40 candidates",
        "plan prod/m: 2/40 candidates",
        "plan prod/m: 2/40 candidates",
    ]
    assert all(line.endswith(" s") for line in lines)


def test_piped_progress_is_throttled_to_one_line_every_few_seconds():
    out = io.StringIO()
    with counted("explain m", True, "simulations", every_s=3600.0, stream=out) as update:
        assert update is not None
        for done in range(1, 100):
            update(done, None)
    assert out.getvalue().splitlines() == [out.getvalue().splitlines()[-1]]
    assert out.getvalue().startswith("explain m: 99 simulations, ")


def test_progress_is_silent_when_disabled():
    out = io.StringIO()
    with counted("plan", False, "candidates", stream=out) as update:
        assert update is None
    assert out.getvalue() == ""


def test_piped_progress_prints_a_line_while_a_long_first_step_reports_nothing():
    """Issue 37: schedule's first line came after 45 s (loading and the oracle report no step)."""
    import time

    out = io.StringIO()
    with counted("schedule", True, "steps", every_s=0.01, stream=out):
        for _ in range(1000):  # bounded: at most 10 s
            if out.getvalue():
                break
            time.sleep(0.01)
    assert out.getvalue().startswith("schedule: 0 steps, ")
