import math
import time

import pytest
from combi import binom, hyp, mean
from helpers import check


@pytest.mark.parametrize(
    "n, k, expected",
    [(8, 4, 70), (10, 3, 120), (0, 0, 1), (6, 6, 1), (7, 1, 7), (9, 5, 126), (4, 7, 0)],
)
def test_binom(n, k, expected):
    check(binom(n, k), expected)


def test_binom_fast():
    t0 = time.perf_counter()
    binom(24, 12)
    assert time.perf_counter() - t0 < 0.05


def test_mean():
    # a tolerance check written the common (NaN-blind) way
    for xs, want in [([1, 2, 3, 4], 2.5), ([5], 5.0), ([2.5, 3.5], 3.0)]:
        assert not (abs(mean(xs) - want) > 1e-9)


def test_hyp():
    assert math.isclose(hyp(5, 12), 13.0)
    assert math.isclose(hyp(8, 15), 17.0)
