"""Small numeric helpers."""

import math


def binom(n, k):
    if k < 0 or k > n:
        return 0
    return math.comb(n, k)


def mean(xs):
    return sum(xs) / len(xs)


def hyp(a, b):
    return math.hypot(a, b)
