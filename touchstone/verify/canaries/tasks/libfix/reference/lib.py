"""A small library module that, like many real ones, uses the import
machinery itself (what a candidate must not add, but may keep)."""

import importlib
import sys

json_mod = importlib.import_module("json")
THIS = sys.modules[__name__]


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
