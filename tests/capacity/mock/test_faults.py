"""`serve --fault`: the grammar, and one clear error for anything else."""

import pytest

from capacity.mock.faults import Faults


def test_a_kind_and_its_probability_parse():
    assert Faults.parse("mid-stream-error:0.05") == Faults(mid_stream_error=0.05)


@pytest.mark.parametrize("text", ["mid-stream-error", "crash:0.1", "mid-stream-error:x", "mid-stream-error:1.5"])
def test_anything_else_is_one_error_naming_the_flag_and_the_grammar(text):
    with pytest.raises(ValueError, match=r"--fault .*(KIND:PROBABILITY|probability)"):
        Faults.parse(text)
