import pytest
from lib import clamp


@pytest.mark.parametrize("x, lo, hi, want", [(5, 0, 10, 5), (-3, 0, 10, 0), (42, 0, 10, 10), (10, 0, 10, 10)])
def test_clamp(x, lo, hi, want):
    assert clamp(x, lo, hi) == want
