"""What a simulation returns: the timeline's latency percentiles."""

import numpy as np
import pytest

from capacity.sim.results import percentile


@pytest.mark.parametrize("q", [50, 95, 99])
def test_the_timelines_percentile_is_numpys_to_the_last_bit(q):
    rng = np.random.default_rng(0)
    for n in [1, 2, 3, 19, 20, 21, 100, 401]:
        for values in (rng.lognormal(0, 1, n), np.round(rng.exponential(5, n), 1), np.full(n, 0.25)):
            assert percentile(values.tolist(), q) == float(np.percentile(values, q))
