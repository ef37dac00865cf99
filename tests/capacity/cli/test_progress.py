"""The progress bar's arithmetic: a sweep's bar moves within each level, not only between them."""

from capacity.cli.progress import describe, fraction_done

TICK = {"now_s": 30.0, "end_s": 120.0, "phase": "measure", "completed": 7, "measured_ok": 3, "recent_p99_s": 1.5}


def test_a_single_load_run_is_as_far_as_its_clock():
    assert fraction_done(TICK) == 0.25


def test_a_sweep_advances_within_a_level():
    state = {**TICK, "level_index": 2, "levels": 4, "concurrency": 20}
    assert fraction_done(state) == (2 + 0.25) / 4
    assert describe(state).startswith("concurrency 20 (3/4)  measure  done 7")
