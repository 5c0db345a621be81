from combi import binom, hyp, mean
from helpers import check


def test_binom_small():
    check(binom(5, 2), 10)


def test_mean_small():
    check(mean([1, 2, 3]), 2.0)


def test_hyp_small():
    check(hyp(3, 4), 5.0)
